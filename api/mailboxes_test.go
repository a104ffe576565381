package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
)

func TestMailboxesAreAdminsAndShowNoSecret(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	ab := serveAPI(t, b, b.NewQueue(t), 0)
	if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "bilal", DisplayName: "Bilal", Email: "bilal@support.example.com",
		Teams: []string{"billing"}}); err != nil {
		t.Fatal(err)
	}
	bilal := ab.key(t, "agent:bilal")
	body := []byte(`{"name": "billing", "imap_url": "imaps://billing%40example.org:S3cret-imap@imap.example.org/INBOX", "address": "billing@example.org",
		"team": "billing", "from": "Example Billing <billing@example.org>"}`)
	status, _, resp := ab.do(t, bilal, "POST", "/v1/mailboxes", body, "")
	requireError(t, status, resp, 403, "forbidden")
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/mailboxes", body, "")
	if status != 201 || resp["imap_url"] != "imaps://billing%40example.org@imap.example.org:993/INBOX" || resp["after_import"] != "move" {
		t.Fatalf("add: %d %v", status, resp)
	}
	for _, path := range []string{"/v1/mailboxes", "/v1/mailboxes/billing"} {
		_, _, got := ab.do(t, ab.agent, "GET", path, nil, "")
		if strings.Contains(string(mustJSON(got)), "S3cret") {
			t.Errorf("%s shows the password: %v", path, got)
		}
	}
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/mailboxes", []byte(`{"name": "x", "imap_url": "ftp://a@b/", "address": "x@example.org"}`), "")
	requireError(t, status, resp, 422, "invalid_imap_url")
	// A mailbox behind a company's own MTA names it; what is not an
	// authserv-id (another field's text) is refused.
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/mailboxes", []byte(`{"name": "own", "imap_url": "imaps://own@imap.example.org/INBOX",
		"address": "own@example.org", "authserv_id": "mx.example.org"}`), "")
	if status != 201 || resp["authserv_id"] != "mx.example.org" {
		t.Errorf("add with an authserv-id: %d %v", status, resp)
	}
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/mailboxes", []byte(`{"name": "own", "imap_url": "imaps://own@imap.example.org/INBOX",
		"address": "own@example.org", "authserv_id": "mx.example.org; dmarc=pass"}`), "")
	requireError(t, status, resp, 422, "invalid_mailbox")
	// A team that wants a clean queue imports only what comes from now on;
	// a time in the future would pass by every mail until then.
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/mailboxes", []byte(`{"name": "fresh", "imap_url": "imaps://fresh@imap.example.org/INBOX",
		"address": "fresh@example.org", "import_since": "2026-11-01T09:00:00+01:00"}`), "")
	if status != 201 || resp["import_since"] != "2026-11-01T08:00:00Z" {
		t.Errorf("add with import_since: %d %v", status, resp)
	}
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/mailboxes", []byte(`{"name": "fresh", "imap_url": "imaps://fresh@imap.example.org/INBOX",
		"address": "fresh@example.org", "import_since": null}`), "")
	if status != 201 || resp["import_since"] != nil {
		t.Errorf("add again with import_since null, which imports everything: %d %v", status, resp)
	}
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/mailboxes", []byte(`{"name": "fresh", "imap_url": "imaps://fresh@imap.example.org/INBOX",
		"address": "fresh@example.org", "import_since": "`+time.Now().Add(48*time.Hour).Format(time.RFC3339)+`"}`), "")
	requireError(t, status, resp, 422, "invalid_mailbox")
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/mailboxes", []byte(`{"name": "fresh", "imap_url": "imaps://fresh@imap.example.org/INBOX",
		"address": "fresh@example.org", "import_since": "yesterday"}`), "")
	if status != 400 {
		t.Errorf("import_since that is no time: %d %v, want 400", status, resp)
	}
	status, _, resp = ab.do(t, ab.agent, "PATCH", "/v1/mailboxes/billing", []byte(`{"disabled": true}`), "")
	if status != 200 || resp["disabled_at"] == nil {
		t.Errorf("disable: %d %v", status, resp)
	}
	status, _, resp = ab.do(t, ab.agent, "GET", "/v1/mailboxes/nope", nil, "")
	if status != 404 || resp["message"] != "mailbox nope not found" {
		t.Errorf("an unknown mailbox: %d %v", status, resp)
	}
	// A name no mailbox can have never reaches PostgreSQL, which refuses its bytes.
	for _, name := range []string{"%00", "bill%00ing", "%FF%FE", "%C3%28"} {
		for _, method := range []string{"GET", "PATCH"} {
			status, _, resp = ab.do(t, ab.agent, method, "/v1/mailboxes/"+name, []byte(`{"disabled": true}`), "")
			requireError(t, status, resp, 404, "not_found")
		}
	}
}
