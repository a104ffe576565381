package api_test

import (
	"strconv"
	"testing"

	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
)

func TestAdminsManageWhatTouchesEveryone(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	ab := serveAPI(t, b, b.NewQueue(t), 0) // alice is an admin
	if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "bilal", DisplayName: "Bilal", Email: "bilal@support.example.com"}); err != nil {
		t.Fatal(err)
	}
	bilal := ab.key(t, "agent:bilal")
	hook := []byte(`{"url": "https://hooks.example.com/helpdesk?token=s3cret", "events": ["ticket.created"]}`)

	t.Run("OnlyAdminsRegisterWebhooksAndTheyReachNothingInside", func(t *testing.T) {
		status, _, resp := ab.do(t, bilal, "POST", "/v1/webhooks", hook, "")
		requireError(t, status, resp, 403, "forbidden")
		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://[::1]:8080/", "http://0.0.0.0:8080/",
			"http://localhost:8080/", "http://127.0.0.1:5432/", "http://[::ffff:127.0.0.1]/", "http://100.64.0.1/"} {
			status, _, resp := ab.do(t, ab.agent, "POST", "/v1/webhooks", []byte(`{"url": "`+u+`", "events": ["ticket.created"]}`), "")
			requireError(t, status, resp, 422, "url_refused")
		}
	})

	t.Run("AWebhookIsItsCreatorsOthersSeeNone", func(t *testing.T) {
		status, _, created := ab.do(t, ab.agent, "POST", "/v1/webhooks", hook, "")
		if status != 201 {
			t.Fatalf("register: %d %v", status, created)
		}
		_, _, mine := ab.do(t, ab.agent, "GET", "/v1/webhooks", nil, "")
		_, _, theirs := ab.do(t, bilal, "GET", "/v1/webhooks", nil, "")
		if len(mine["webhooks"].([]any)) == 0 || len(theirs["webhooks"].([]any)) != 0 {
			t.Errorf("the admin sees %v, another agent %v: want the endpoint, and none with its token", mine, theirs)
		}
		id := jsonID(created["id"])
		status, _, resp := ab.do(t, bilal, "DELETE", "/v1/webhooks/"+id, nil, "")
		requireError(t, status, resp, 404, "not_found")
	})

	t.Run("OnlyAdminsClearSuppressionsAndManageAgents", func(t *testing.T) {
		status, _, resp := ab.do(t, bilal, "DELETE", "/v1/suppressions/ada@example.com", nil, "")
		requireError(t, status, resp, 403, "forbidden")
		status, _, resp = ab.do(t, bilal, "PATCH", "/v1/agents/bilal", []byte(`{"admin": true}`), "")
		requireError(t, status, resp, 403, "forbidden")
		status, _, resp = ab.do(t, ab.agent, "PATCH", "/v1/agents/me", []byte(`{"admin": false}`), "")
		requireError(t, status, resp, 422, "own_admin")
		status, _, resp = ab.do(t, ab.agent, "PATCH", "/v1/agents/bilal", []byte(`{"admin": true}`), "")
		if status != 200 || resp["admin"] != true {
			t.Fatalf("an admin makes bilal one: %d %v", status, resp)
		}
		_, _, agents := ab.do(t, bilal, "GET", "/v1/agents", nil, "")
		for _, a := range agents["agents"].([]any) {
			if a := a.(map[string]any); a["name"] == "bilal" && a["admin"] != true {
				t.Errorf("GET /v1/agents shows %v", a)
			}
		}
		if status, _, _ := ab.do(t, bilal, "DELETE", "/v1/suppressions/ada@example.com", nil, ""); status == 403 {
			t.Error("an admin now, bilal still may not clear a suppression")
		}
	})
}

// jsonID is a JSON number id as a path segment.
func jsonID(v any) string {
	return strconv.FormatInt(int64(v.(float64)), 10)
}
