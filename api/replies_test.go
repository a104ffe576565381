package api_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

type replyBundle struct {
	*apiBundle
	smtp     *smtptest.Server
	ticketID string
	customer string // the ticket's customer's key
}

func setupReplies(t *testing.T) *replyBundle {
	t.Helper()
	b := jobstest.Setup(t)
	srv := b.WithSMTP(t)
	ab := serveAPI(t, b, b.StartQueue(t), 0)
	ticketID, _ := b.OpenTicket(t, ab.queue, "Charged twice", "My card was charged twice.")
	return &replyBundle{apiBundle: ab, smtp: srv, ticketID: ticketID, customer: ab.key(t, "customer:C-0001")}
}

func (b *replyBundle) outboundRows(t *testing.T) [3]int {
	t.Helper()
	var n [3]int
	err := b.Pool.QueryRow(b.Ctx, `SELECT (SELECT count(*) FROM messages WHERE direction = 'outbound'),
		(SELECT count(*) FROM river_job WHERE kind = 'email_outbound'), (SELECT count(*) FROM outbound_recipients)`).Scan(&n[0], &n[1], &n[2])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReplies(t *testing.T) {
	t.Parallel()

	t.Run("AReplyPostedTwiceWithOneKeyIsOneMessageOneJobOneEmail", func(t *testing.T) {
		t.Parallel()
		b := setupReplies(t)
		body := []byte(`{"body": "We refunded the second charge.", "cc": ["Bram <bram@example.com>"]}`)
		path := "/v1/tickets/" + b.ticketID + "/replies"
		s1, _, first := b.do(t, b.agent, "POST", path, body, "reply-key-1")
		s2, h2, second := b.do(t, b.agent, "POST", path, body, "reply-key-1")
		if s1 != 202 || s2 != 202 || fmt.Sprint(first) != fmt.Sprint(second) || h2.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("answers %d %v and %d %v", s1, first, s2, second)
		}
		jobstest.WaitFor(t, b.queue, int64(first["job_id"].(float64)), jobs.StateSucceeded, 10*time.Second)
		if got := b.outboundRows(t); got != [3]int{1, 1, 2} {
			t.Errorf("outbound messages, email jobs, recipients = %v, want [1 1 2]", got)
		}
		if got := b.smtp.Deliveries(); len(got) != 1 || len(got[0].To) != 2 {
			t.Errorf("deliveries %+v, want one email to both recipients", got)
		}

		status, _, resp := b.do(t, b.agent, "GET", "/v1/tickets/"+b.ticketID+"/messages", nil, "")
		msgs := resp["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		d := last["delivery"].(map[string]any)
		root := msgs[0].(map[string]any)["email_message_id"]
		if status != 200 || last["email_message_id"] != first["email_message_id"] || d["state"] != "sent" ||
			d["in_reply_to"] != root || len(d["recipients"].([]any)) != 2 || d["attempts"] != float64(1) {
			t.Errorf("messages: %d %v", status, last)
		}
		refs := d["references"].([]any)
		if len(refs) != 1 || refs[0] != root {
			t.Errorf("references %v, want the thread root %v", refs, root)
		}
	})

	t.Run("BadRepliesWriteNothing", func(t *testing.T) {
		t.Parallel()
		b := setupReplies(t)
		path := "/v1/tickets/" + b.ticketID + "/replies"
		for _, tc := range []struct {
			name, key, path, body string
			status                int
			code                  string
		}{
			{"CcWithCRLF", "agent", path, `{"body":"Hi","cc":["x@example.com\r\nBcc: victim@example.com"]}`, 422, "invalid_cc"},
			{"CcNotAnAddress", "agent", path, `{"body":"Hi","cc":["not an address"]}`, 422, "invalid_cc"},
			{"TwoAddressesInOneCc", "agent", path, `{"body":"Hi","cc":["a@example.com, b@example.com"]}`, 422, "invalid_cc"},
			{"EmptyBody", "agent", path, `{"body":""}`, 422, "invalid_body"},
			{"UnknownField", "agent", path, `{"body":"Hi","bcc":["a@example.com"]}`, 400, "unknown_field"},
			{"UnknownTicket", "agent", "/v1/tickets/T-999999/replies", `{"body":"Hi"}`, 404, "not_found"},
			{"ACustomerCannotReplyAsAnAgent", "customer", path, `{"body":"Hi"}`, 403, "forbidden"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := b.outboundRows(t)
				key := map[string]string{"agent": b.agent, "customer": b.customer}[tc.key]
				status, _, resp := b.do(t, key, "POST", tc.path, []byte(tc.body), "")
				requireError(t, status, resp, tc.status, tc.code)
				if after := b.outboundRows(t); after != before {
					t.Errorf("rows %v became %v", before, after)
				}
			})
		}
		if n := b.smtp.Connections(); n != 0 {
			t.Errorf("%d SMTP connections for refused replies", n)
		}
	})

	t.Run("WithoutARelayRepliesAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setupIntake(t, 0)
		_, _, created := b.do(t, b.c22, "POST", "/v1/tickets", ticketBody("C-0022", "Hi"), "")
		status, _, resp := b.do(t, b.agent, "POST", "/v1/tickets/"+created["ticket_id"].(string)+"/replies", []byte(`{"body":"Hi"}`), "")
		requireError(t, status, resp, 503, "email_not_configured")
	})
}

func TestAnAnswerAfterANewerMessageIsRefused(t *testing.T) {
	t.Parallel()
	b := setupTeam(t, false)
	id, _ := b.open(t, "Charged twice", "Please refund one.")
	_, _, msgs := b.do(t, b.bilal, "GET", "/v1/tickets/"+id+"/messages", nil, "")
	list := msgs["messages"].([]any)
	seen := int64(list[len(list)-1].(map[string]any)["id"].(float64))
	if status, _, resp := b.do(t, b.customer, "POST", "/v1/tickets/"+id+"/messages", mustJSON(map[string]string{"body": "And the fee too."}), ""); status != 202 {
		t.Fatalf("customer: %d %v", status, resp)
	}
	status, _, resp := b.do(t, b.bilal, "POST", "/v1/tickets/"+id+"/replies", mustJSON(map[string]any{"body": "Refunded.", "seen_message": seen}), "")
	requireError(t, status, resp, 409, "ticket_changed")
	status, _, resp = b.do(t, b.bilal, "POST", "/v1/tickets/"+id+"/notes", mustJSON(map[string]any{"body": "Checked.", "seen_message": seen}), "")
	requireError(t, status, resp, 409, "ticket_changed")
	_, _, after := b.do(t, b.bilal, "GET", "/v1/tickets/"+id+"/messages", nil, "")
	newest := after["messages"].([]any)
	if status, _, resp := b.do(t, b.bilal, "POST", "/v1/tickets/"+id+"/replies", mustJSON(map[string]any{"body": "Refunded both.",
		"seen_message": newest[len(newest)-1].(map[string]any)["id"]}), ""); status != 202 {
		t.Errorf("with the newest message seen: %d %v", status, resp)
	}
}

func TestSavedReplies(t *testing.T) {
	t.Parallel()
	b := setupTeam(t, false)
	status, _, mine := b.do(t, b.bilal, "POST", "/v1/saved-replies", mustJSON(map[string]string{"title": "Thanks", "body": "Thanks, {{customer.name}}!"}), "")
	if status != 201 || mine["owner"] != "bilal" || mine["team"] != nil {
		t.Fatalf("personal: %d %v", status, mine)
	}
	status, _, team := b.do(t, b.bilal, "POST", "/v1/saved-replies", mustJSON(map[string]string{"title": "Refund", "body": "Refunded.", "team": "billing"}), "")
	if status != 201 || team["team"] != "billing" {
		t.Fatalf("team: %d %v", status, team)
	}
	status, _, resp := b.do(t, b.bilal, "POST", "/v1/saved-replies", mustJSON(map[string]string{"title": "x", "body": "y", "team": "shipping"}), "")
	requireError(t, status, resp, 422, "unknown_team")
	status, _, resp = b.do(t, b.bilal, "POST", "/v1/saved-replies", mustJSON(map[string]string{"title": "", "body": "y"}), "")
	requireError(t, status, resp, 422, "invalid_saved_reply")
	_, _, list := b.do(t, b.bilal, "GET", "/v1/saved-replies", nil, "")
	if got, _ := list["saved_replies"].([]any); len(got) != 2 {
		t.Errorf("bilal's: %v", list)
	}
	_, _, chloes := b.do(t, b.key(t, "agent:chloe"), "GET", "/v1/saved-replies", nil, "")
	if got, _ := chloes["saved_replies"].([]any); len(got) != 0 {
		t.Errorf("chloe (shipping) sees %v", chloes)
	}
	status, _, resp = b.do(t, b.key(t, "agent:chloe"), "DELETE", "/v1/saved-replies/"+jsonID(mine["id"]), nil, "")
	requireError(t, status, resp, 404, "not_found")
}

// TestConcurrentCopiesOfASavedReplyMakeOne: the saved reply is written in
// the request's transaction, after its Idempotency-Key is claimed, so
// copies sent at once wait on the claim and replay the first answer.
func TestConcurrentCopiesOfASavedReplyMakeOne(t *testing.T) {
	t.Parallel()
	b := setupTeam(t, false)
	body := mustJSON(map[string]string{"title": "Thanks", "body": "Thanks!"})
	const n = 10
	var (
		mu  sync.Mutex
		ids = map[any]int{}
	)
	atOnce(n, func() {
		status, _, resp := b.do(t, b.bilal, "POST", "/v1/saved-replies", body, "saved-reply-key-1")
		mu.Lock()
		defer mu.Unlock()
		if status != 201 {
			t.Errorf("copy: %d %v", status, resp)
		}
		ids[resp["id"]]++
	})
	_, _, list := b.do(t, b.bilal, "GET", "/v1/saved-replies", nil, "")
	if got, _ := list["saved_replies"].([]any); len(got) != 1 || len(ids) != 1 {
		t.Errorf("%d saved replies, answers naming %d: want one, and every copy its answer", len(got), len(ids))
	}
}
