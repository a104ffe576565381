package api_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

// receiver is a webhook endpoint that checks each delivery's Standard
// Webhooks signature itself and keeps what it accepted by webhook-id.
type receiver struct {
	secret string
	mu     sync.Mutex
	seen   map[string][]string // webhook-id → the bodies accepted with it
	types  map[string]int      // event type → accepted deliveries
	calls  int
	fail   int // answer 500 to this many calls first
	bad    []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.calls++
	if rc.calls <= rc.fail {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(rc.secret, "whsec_"))
	if err != nil {
		rc.bad = append(rc.bad, "secret: "+err.Error())
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	sec, _ := strconv.ParseInt(ts, 10, 64)
	if r.Header.Get("webhook-signature") != want || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute || !strings.HasPrefix(id, "evt_") {
		rc.bad = append(rc.bad, fmt.Sprintf("delivery %s at %s: signature %q, want %q", id, ts, r.Header.Get("webhook-signature"), want))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var event struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &event); err != nil || event.Type == "" {
		rc.bad = append(rc.bad, "body "+string(body))
	}
	if len(rc.seen[id]) == 0 {
		rc.types[event.Type]++
	}
	rc.seen[id] = append(rc.seen[id], string(body))
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) count(eventType string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.types[eventType]
}

func TestWebhooks(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	b.AllowLoopbackWebhooks() // the receiver below listens on loopback
	srv := b.WithSMTP(t)
	// The second mail's recipient is refused for good: message.failed.
	srv.Script(smtptest.Fault{}, smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"c1@example.com": smtptest.ErrNoSuchUser}})
	b.Config.WebhookPoll = 20 * time.Millisecond
	b.Config.WebhookBackoff = backoff.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}
	q := b.StartQueue(t)
	ab := serveAPI(t, b, q, 0)
	rc := &receiver{seen: map[string][]string{}, types: map[string]int{}, fail: 1}
	endpoint := httptest.NewServer(rc)
	t.Cleanup(endpoint.Close)

	t.Run("BadRegistrationsAreRefused", func(t *testing.T) {
		customer := ab.key(t, "customer:C-0009")
		for _, tc := range []struct {
			key, body string
			status    int
			code      string
		}{
			{customer, `{"url": "https://example.com/h", "events": ["ticket.created"]}`, 403, "forbidden"},
			{ab.agent, `{"url": "ftp://example.com/h", "events": ["ticket.created"]}`, 422, "invalid_url"},
			{ab.agent, `{"url": "https://user:pw@example.com/h", "events": ["ticket.created"]}`, 422, "invalid_url"},
			{ab.agent, `{"url": "https://example.com/h", "events": []}`, 422, "invalid_events"},
			{ab.agent, `{"url": "https://example.com/h", "events": ["ticket.exploded"]}`, 422, "invalid_events"},
		} {
			status, _, resp := ab.do(t, tc.key, "POST", "/v1/webhooks", []byte(tc.body), "")
			requireError(t, status, resp, tc.status, tc.code)
		}
	})

	status, _, hook := ab.do(t, ab.agent, "POST", "/v1/webhooks", []byte(`{"url": "`+endpoint.URL+`/hooks", "events": ["ticket.created",
		"ticket.triaged", "ticket.status_changed", "message.sent", "message.failed", "message.received"]}`), "")
	secret, _ := hook["secret"].(string)
	if status != 201 || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("register: %d %v", status, hook)
	}
	rc.mu.Lock()
	rc.secret = secret
	rc.mu.Unlock()
	_, _, list := ab.do(t, ab.agent, "GET", "/v1/webhooks", nil, "")
	if l := list["webhooks"].([]any); len(l) != 1 || l[0].(map[string]any)["secret"] != nil {
		t.Errorf("the list shows %v; want the endpoint without its secret", l)
	}

	ticketID, triageJob := b.OpenTicket(t, q, "Parcel", "Where is my parcel?")
	jobstest.WaitFor(t, q, triageJob, jobs.StateSucceeded, 10*time.Second)
	_, sent := b.Reply(t, q, ticketID, "On its way.")
	jobstest.WaitFor(t, q, sent, jobs.StateSucceeded, 10*time.Second)
	_, failed := b.Reply(t, q, ticketID, "Again.")
	jobstest.WaitFor(t, q, failed, jobs.StateFailed, 10*time.Second)

	// Two status changes: the first reply makes the ticket pending, and the
	// second one's bounce (its 550 at RCPT) opens it again.
	want := map[string]int{"ticket.created": 1, "message.received": 1, "ticket.triaged": 1, "ticket.status_changed": 2,
		"message.sent": 1, "message.failed": 1}
	deadline := time.Now().Add(20 * time.Second)
	for {
		done := true
		for typ, n := range want {
			done = done && rc.count(typ) >= n
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	t.Run("EveryEventArrivesSignedOncePerID", func(t *testing.T) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for typ, n := range want {
			if rc.types[typ] != n {
				t.Errorf("%s arrived %d times, want %d (all: %v)", typ, rc.types[typ], n, rc.types)
			}
		}
		for id, bodies := range rc.seen {
			if len(bodies) != 1 {
				t.Errorf("%s accepted %d times", id, len(bodies))
			}
		}
		if len(rc.bad) > 0 {
			t.Errorf("bad deliveries: %v", rc.bad)
		}
		if rc.calls != len(rc.seen)+1 {
			t.Errorf("%d calls for %d events: want one more, the refused first one, retried", rc.calls, len(rc.seen))
		}
	})

	t.Run("ADeletedEndpointGetsNothingMore", func(t *testing.T) {
		resp := uiRequest(t, "DELETE", ab.url+fmt.Sprintf("/v1/webhooks/%v", hook["id"]), "", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+ab.agent)
		})
		if resp.StatusCode != 204 {
			t.Fatalf("delete: %d", resp.StatusCode)
		}
		status, _, again := ab.do(t, ab.agent, "DELETE", fmt.Sprintf("/v1/webhooks/%v", hook["id"]), nil, "")
		requireError(t, status, again, 404, "not_found")
		var events int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM webhook_events`).Scan(&events); err != nil {
			t.Fatal(err)
		}
		b.OpenTicket(t, q, "Another", "Hello.")
		var after int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM webhook_events`).Scan(&after); err != nil {
			t.Fatal(err)
		}
		if after != events {
			t.Errorf("%d events recorded with no endpoint, want none", after-events)
		}
	})
}
