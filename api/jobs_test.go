package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

type apiBundle struct {
	*jobstest.Bundle
	queue  *jobs.Queue
	url    string
	agent  string // an agent's API key
	server *api.Server
}

// setup serves the API over a started queue, with an agent key ready.
func setup(t *testing.T) *apiBundle {
	t.Helper()
	b := jobstest.Setup(t)
	b.Config.TriageMaxAttempts = 2
	return serveAPI(t, b, b.StartQueue(t), 0)
}

func serveAPI(t testing.TB, b *jobstest.Bundle, q *jobs.Queue, retention time.Duration) *apiBundle {
	t.Helper()
	b.DeskConfig.IdempotencyRetention = retention
	return serveAPIWith(t, b, q, api.Config{})
}

// serveAPIWith serves the API with config; its rate per key is unlimited
// unless config says otherwise.
func serveAPIWith(t testing.TB, b *jobstest.Bundle, q *jobs.Queue, config api.Config) *apiBundle {
	t.Helper()
	config.Logger, config.Pool, config.Queue, config.Desk = jobstest.Logger(), b.Pool, q, b.Desk(q)
	if config.WebhookEgress == nil {
		config.WebhookEgress = &b.Config.WebhookEgress
	}
	if config.RatePerKey == 0 {
		config.RatePerKey, config.BurstPerKey = 1e6, 1e6
	}
	server := api.New(config)
	var h http.Handler = server
	if t, ok := t.(*testing.T); ok {
		h = validated(t, h) // every answer is checked against api/openapi.json
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ab := &apiBundle{Bundle: b, queue: q, url: srv.URL, server: server}
	admin := true // alice is the admin of these tests; others are not
	if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "alice", DisplayName: "Alice", Email: "alice@support.example.com", Admin: &admin}); err != nil {
		t.Fatal(err)
	}
	ab.agent = ab.key(t, "agent:alice")
	return ab
}

// key stores a new API key for the actor and returns it.
func (b *apiBundle) key(t testing.TB, actor string) string {
	t.Helper()
	key, sha := api.NewAPIKey()
	if err := b.Store.InsertAPIKey(b.Ctx, vocab.Actor(actor), sha); err != nil {
		t.Fatal(err)
	}
	return key
}

// call sends a request as the agent and decodes the JSON answer into a map.
func (b *apiBundle) call(t *testing.T, method, path string) (int, map[string]any) {
	t.Helper()
	status, _, body := b.do(t, b.agent, method, path, nil, "")
	return status, body
}

// do sends a request with the key (none if empty), an optional
// Idempotency-Key and body, and decodes the JSON answer.
func (b *apiBundle) do(t *testing.T, key, method, path string, body []byte, idemKey string) (int, http.Header, map[string]any) {
	t.Helper()
	header := http.Header{}
	if idemKey != "" {
		header.Set(api.HeaderIdempotencyKey, idemKey)
	}
	return b.doWith(t, key, method, path, body, header)
}

// doWith is do with the request's other headers.
func (b *apiBundle) doWith(t *testing.T, key, method, path string, body []byte, header http.Header) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json (body %s)", method, path, ct, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: answer is not a JSON object: %s", method, path, raw)
	}
	return resp.StatusCode, resp.Header, out
}

func requireError(t *testing.T, status int, body map[string]any, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || body["error"] != wantCode || body["message"] == "" {
		t.Errorf("got %d %v, want %d with error %q and a message", status, body, wantStatus, wantCode)
	}
}

func TestJobsAPI(t *testing.T) {
	t.Parallel()

	t.Run("GetShowsTheJobAsAPersonSeesIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID, jobID := b.OpenTicket(t, b.queue, "Parcel", "Where is my parcel?")
		jobstest.WaitFor(t, b.queue, jobID, jobs.StateSucceeded, 10*time.Second)

		status, body := b.call(t, "GET", fmt.Sprintf("/v1/jobs/%d", jobID))
		want := map[string]any{"job_id": float64(jobID), "kind": "triage", "ticket_id": ticketID,
			"state": "succeeded", "attempt": float64(1), "max_attempts": float64(2), "snoozes": float64(0), "last_error": nil, "errors": []any{}}
		if status != 200 || fmt.Sprint(body) != fmt.Sprint(want) {
			t.Errorf("got %d %v, want 200 %v", status, body, want)
		}
	})

	t.Run("DeadLettersAreListedAndRetryBringsThemToSuccess", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.Sim.SetMode(simulator.ModeOutage); err != nil {
			t.Fatal(err)
		}
		_, deadID := b.OpenTicket(t, b.queue, "Down", "The app is down.")
		jobstest.WaitFor(t, b.queue, deadID, jobs.StateDeadLetter, 10*time.Second)

		status, body := b.call(t, "GET", "/v1/jobs?state=dead_letter")
		list, _ := body["jobs"].([]any)
		if status != 200 || len(list) != 1 || list[0].(map[string]any)["job_id"] != float64(deadID) {
			t.Fatalf("dead letters: %d %v, want job %d alone", status, body, deadID)
		}
		if got := list[0].(map[string]any)["last_error"]; got != "ProviderUnavailable: the provider answered 503 on classify" {
			t.Errorf("last_error = %v", got)
		}

		if err := b.Sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		status, body = b.call(t, "POST", fmt.Sprintf("/v1/jobs/%d/retry", deadID))
		if status != 200 || body["attempt"] != float64(0) || body["max_attempts"] != float64(2) {
			t.Errorf("retry: %d %v, want 200 with attempt 0 of 2", status, body)
		}
		jobstest.WaitFor(t, b.queue, deadID, jobs.StateSucceeded, 10*time.Second)

		status, body = b.call(t, "POST", fmt.Sprintf("/v1/jobs/%d/retry", deadID))
		requireError(t, status, body, http.StatusConflict, "not_retryable")
	})

	t.Run("BadRequestsGetJSONErrors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct {
			method, path string
			status       int
			code         string
		}{
			{"GET", "/v1/jobs/999999", 404, "not_found"},
			{"POST", "/v1/jobs/999999/retry", 404, "not_found"},
			{"GET", "/v1/jobs/abc", 400, "invalid_job_id"},
			{"GET", "/v1/jobs/-1", 400, "invalid_job_id"},
			{"GET", "/v1/jobs", 400, "invalid_state"},
			{"GET", "/v1/jobs?state=lost", 400, "invalid_state"},
			{"GET", "/v1/jobs?state=failed&limit=0", 400, "invalid_limit"},
			{"GET", "/v1/jobs?state=failed&after=x", 400, "invalid_after"},
			{"DELETE", "/v1/jobs/1", 405, "method_not_allowed"},
			{"GET", "/v1/jobs/1/retry", 405, "method_not_allowed"},
			{"GET", "/nowhere", 404, "not_found"},
			{"PUT", "/v1/tickets", 405, "method_not_allowed"},
			{"GET", "/v1/tickets?status=lost", 400, "invalid_status"},
			{"GET", "/v1/tickets?cursor=bm90LWEtY3Vyc29y", 400, "invalid_cursor"},
			{"GET", "/v1/tickets/T-999999", 404, "not_found"},
		} {
			t.Run(strings.ReplaceAll(tc.method+tc.path, "/", "_"), func(t *testing.T) {
				status, body := b.call(t, tc.method, tc.path)
				requireError(t, status, body, tc.status, tc.code)
			})
		}
	})
}
