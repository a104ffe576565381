package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
)

// teamBundle is a support team at work: three agents (alice and bilal in
// billing, chloe in shipping), a customer with a ticket, a relay, triage
// with auto-assignment.
type teamBundle struct {
	*apiBundle
	smtp     *smtptest.Server
	customer string // C-0001's key
	bilal    string // bilal's key
}

func setupTeam(t *testing.T, start bool) *teamBundle {
	t.Helper()
	b := jobstest.Setup(t)
	srv := b.WithSMTP(t)
	b.DeskConfig.AutoAssign = true
	for _, a := range []store.UpsertAgentParams{
		{Name: "alice", DisplayName: "Alice", Email: "alice@support.example.com", Teams: []string{"billing"}},
		{Name: "bilal", DisplayName: "Bilal", Email: "bilal@support.example.com", Teams: []string{"billing", "general"}},
		{Name: "chloe", DisplayName: "Chloé", Email: "chloe@support.example.com", Teams: []string{"shipping"}},
	} {
		if err := b.Store.UpsertAgent(b.Ctx, &a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Store.InsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "ada@example.com", Name: "Ada Lovelace"}); err != nil {
		t.Fatal(err)
	}
	q := b.NewQueue(t)
	if start {
		q = b.StartQueue(t)
	}
	ab := serveAPI(t, b, q, 0)
	return &teamBundle{apiBundle: ab, smtp: srv, customer: ab.key(t, "customer:C-0001"), bilal: ab.key(t, "agent:bilal")}
}

// open opens a ticket for C-0001 through the API and returns its id and job.
func (b *teamBundle) open(t *testing.T, subject, body string) (string, int64) {
	t.Helper()
	status, _, resp := b.do(t, b.customer, "POST", "/v1/tickets", mustJSON(map[string]string{"customer_id": "C-0001", "subject": subject, "body": body}), "")
	if status != 202 {
		t.Fatalf("open: %d %v", status, resp)
	}
	return resp["ticket_id"].(string), int64(resp["job_id"].(float64))
}

func (b *teamBundle) ticket(t *testing.T, key, id string) map[string]any {
	t.Helper()
	status, _, resp := b.do(t, key, "GET", "/v1/tickets/"+id, nil, "")
	if status != 200 {
		t.Fatalf("GET %s: %d %v", id, status, resp)
	}
	return resp
}

func (b *teamBundle) patch(t *testing.T, key, id string, change map[string]any) (int, map[string]any) {
	t.Helper()
	status, _, resp := b.do(t, key, "PATCH", "/v1/tickets/"+id, mustJSON(change), "")
	return status, resp
}

// until401 asks until the key is refused, for at most 10 s (a cached key
// lasts a second).
func (b *teamBundle) until401(t *testing.T, key, path string) (int, map[string]any) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, _, resp := b.do(t, key, "GET", path, nil, "")
		if status == 401 || time.Now().After(deadline) {
			return status, resp
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestTicketLifecycle(t *testing.T) {
	t.Parallel()

	t.Run("AnAgentReplySetsPendingAndACustomerMessageReopens", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, true)
		id, job := b.open(t, "Charged twice", "My card was charged twice for invoice 1042.")
		jobstest.WaitFor(t, b.queue, job, jobs.StateSucceeded, 10*time.Second)
		if status, _, resp := b.do(t, b.agent, "POST", "/v1/tickets/"+id+"/replies", []byte(`{"body":"Refunded."}`), ""); status != 202 {
			t.Fatalf("reply: %d %v", status, resp)
		}
		tk := b.ticket(t, b.agent, id)
		if tk["status"] != "pending" || tk["first_response_at"] == nil {
			t.Fatalf("after the reply: status %v, first response %v", tk["status"], tk["first_response_at"])
		}
		status, _, resp := b.do(t, b.customer, "POST", "/v1/tickets/"+id+"/messages", []byte(`{"body":"It is charged a third time now."}`), "follow-1")
		if status != 202 || resp["ticket_id"] != id || resp["follow_up"] != false {
			t.Fatalf("follow-up: %d %v", status, resp)
		}
		tk = b.ticket(t, b.agent, id)
		if tk["status"] != "open" || tk["triage"].(map[string]any)["job_id"] != resp["job_id"] {
			t.Errorf("after the customer wrote: status %v, triage %v; want open and a new triage job %v", tk["status"], tk["triage"], resp["job_id"])
		}
		// The same follow-up again is the same answer, and nothing new.
		if status, h, again := b.do(t, b.customer, "POST", "/v1/tickets/"+id+"/messages", []byte(`{"body":"It is charged a third time now."}`), "follow-1"); status != 202 ||
			h.Get("Idempotent-Replayed") != "true" || fmt.Sprint(again) != fmt.Sprint(resp) {
			t.Errorf("replayed follow-up: %d %v", status, again)
		}
		var events []string
		for _, e := range tk["events"].([]any) {
			ev := e.(map[string]any)
			events = append(events, fmt.Sprintf("%v %v %v→%v", ev["actor"], ev["what"], ev["from"], ev["to"]))
		}
		want := []string{"system assignee <nil>→alice", "agent:alice status open→pending", "customer:C-0001 status pending→open"}
		if strings.Join(events, "; ") != strings.Join(want, "; ") {
			t.Errorf("events %q, want %q", events, want)
		}
	})

	t.Run("TransitionsThatAreNotAllowedAre409AndChangeNothing", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		id, _ := b.open(t, "Hello", "Hi.")
		if status, resp := b.patch(t, b.agent, id, map[string]any{"status": "closed"}); status != 200 || resp["status"] != "closed" {
			t.Fatalf("close: %d %v", status, resp)
		}
		for _, change := range []map[string]any{{"status": "pending"}, {"status": "open"}, {"status": "solved", "priority": 1}} {
			status, resp := b.patch(t, b.agent, id, change)
			requireError(t, status, resp, 409, "invalid_transition")
		}
		if tk := b.ticket(t, b.agent, id); tk["status"] != "closed" || tk["priority"] != nil {
			t.Errorf("a refused change changed the ticket: %v %v", tk["status"], tk["priority"])
		}
	})

	t.Run("AnUnknownAgentOrTeamIs422AndChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		id, _ := b.open(t, "Hello", "Hi.")
		if err := b.Store.DisableAgent(b.Ctx, "chloe"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			change map[string]any
			code   string
		}{
			{map[string]any{"assignee": "nobody", "status": "pending"}, "unknown_agent"},
			{map[string]any{"assignee": "chloe"}, "unknown_agent"}, // disabled
			{map[string]any{"team": "sales", "priority": 1}, "unknown_team"},
			{map[string]any{"priority": 9}, "invalid_priority"},
			{map[string]any{"status": "archived"}, "invalid_status"},
			{map[string]any{}, "empty_change"},
		} {
			status, resp := b.patch(t, b.agent, id, tc.change)
			requireError(t, status, resp, 422, tc.code)
		}
		// A null is no value of a team, a status or a priority: refused,
		// where encoding/json alone would read it as absent.
		for _, field := range []string{"team", "status", "priority"} {
			status, resp := b.patch(t, b.agent, id, map[string]any{field: nil, "assignee": "bilal"})
			requireError(t, status, resp, 400, "invalid_json")
		}
		tk := b.ticket(t, b.agent, id)
		if tk["status"] != "open" || tk["assignee"] != nil || tk["team"] != nil || tk["priority"] != nil || tk["events"] != nil {
			t.Errorf("refused changes changed the ticket: %v", tk)
		}
		status, resp := b.patch(t, b.agent, id, map[string]any{"assignee": "bilal", "team": "billing", "priority": 2})
		if status != 200 || resp["assignee"] != "bilal" || resp["team"] != "billing" || resp["priority"] != float64(2) || len(resp["events"].([]any)) != 3 {
			t.Errorf("a good change: %d %v", status, resp)
		}
		// As in a JSON merge patch (RFC 7396), a null assignee removes
		// the one there is.
		status, resp = b.patch(t, b.agent, id, map[string]any{"assignee": nil})
		if status != 200 || resp["assignee"] != nil || len(resp["events"].([]any)) != 4 {
			t.Errorf("a null assignee: %d %v, want the ticket unassigned", status, resp)
		}
	})

	t.Run("CustomersMayNotChangeAssignOrWriteNotes", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		id, _ := b.open(t, "Hello", "Hi.")
		status, resp := b.patch(t, b.customer, id, map[string]any{"status": "solved"})
		requireError(t, status, resp, 403, "forbidden")
		status, resp = b.patch(t, b.customer, id, map[string]any{"assignee": "alice"})
		requireError(t, status, resp, 403, "forbidden")
		status, _, resp = b.do(t, b.customer, "POST", "/v1/tickets/"+id+"/notes", []byte(`{"body":"psst"}`), "")
		requireError(t, status, resp, 403, "forbidden")
		other := b.key(t, "customer:C-0002")
		if _, err := b.Store.InsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0002", Email: "bram@example.com", Name: "Bram"}); err != nil {
			t.Fatal(err)
		}
		status, _, resp = b.do(t, other, "POST", "/v1/tickets/"+id+"/messages", []byte(`{"body":"me too"}`), "")
		requireError(t, status, resp, 404, "not_found")
		status, _, resp = b.do(t, b.agent, "POST", "/v1/tickets/"+id+"/messages", []byte(`{"body":"as the customer"}`), "")
		requireError(t, status, resp, 403, "forbidden")
		var n int
		_ = b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM messages`).Scan(&n)
		if n != 1 {
			t.Errorf("%d messages after refused requests, want the first one", n)
		}
	})

	t.Run("SolvedTicketsCloseAfterTheAutocloseTime", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		id, _ := b.open(t, "Hello", "Hi.")
		keep, _ := b.open(t, "Still open", "Hi.")
		if status, resp := b.patch(t, b.agent, id, map[string]any{"status": "solved"}); status != 200 {
			t.Fatalf("solve: %d %v", status, resp)
		}
		now := time.Now()
		b.Config.AutocloseAfter = 168 * time.Hour
		b.Config.Now = func() time.Time { return now.Add(167 * time.Hour) }
		early := b.NewWorkers(t, b.NewQueue(t))
		if err := early.Autoclose(b.Ctx); err != nil {
			t.Fatal(err)
		}
		if tk := b.ticket(t, b.agent, id); tk["status"] != "solved" {
			t.Fatalf("closed %s before its time", tk["status"])
		}
		b.Config.Now = func() time.Time { return now.Add(169 * time.Hour) }
		if err := b.NewWorkers(t, b.NewQueue(t)).Autoclose(b.Ctx); err != nil {
			t.Fatal(err)
		}
		tk := b.ticket(t, b.agent, id)
		events := tk["events"].([]any)
		last := events[len(events)-1].(map[string]any)
		if tk["status"] != "closed" || last["actor"] != "system" || last["to"] != "closed" {
			t.Errorf("after 169h: %v, last event %v", tk["status"], last)
		}
		if tk := b.ticket(t, b.agent, keep); tk["status"] != "open" {
			t.Errorf("an open ticket was closed: %v", tk["status"])
		}
	})

	t.Run("ACustomerMessageOnAClosedTicketOpensAFollowUp", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		id, _ := b.open(t, "Broken zipper", "The zipper broke.")
		if status, resp := b.patch(t, b.agent, id, map[string]any{"status": "closed"}); status != 200 {
			t.Fatalf("close: %d %v", status, resp)
		}
		status, _, resp := b.do(t, b.customer, "POST", "/v1/tickets/"+id+"/messages", []byte(`{"body":"It broke again."}`), "")
		if status != 201 || resp["follow_up"] != true || resp["ticket_id"] == id {
			t.Fatalf("follow-up of a closed ticket: %d %v", status, resp)
		}
		followUp := b.ticket(t, b.customer, resp["ticket_id"].(string))
		if followUp["follow_up_of"] != id || followUp["status"] != "open" || followUp["subject"] != "Broken zipper" {
			t.Errorf("follow-up %v", followUp)
		}
		if old := b.ticket(t, b.agent, id); old["status"] != "closed" || len(old["messages"].([]any)) != 1 {
			t.Errorf("the closed ticket changed: %v", old)
		}
	})
}

func TestAssignment(t *testing.T) {
	t.Parallel()

	t.Run("AHundredTicketsSpreadEvenlyOverATeamOfThree", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		b.DeskConfig.AutoAssign = true
		b.Config.TriageWorkers = 10
		for _, name := range []string{"ana", "ben", "cyd"} {
			if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: name, DisplayName: name, Email: name + "@support.example.com",
				Teams: []string{"billing"}}); err != nil {
				t.Fatal(err)
			}
		}
		// One who is off: disabled agents get nothing.
		if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "dee", DisplayName: "dee", Email: "dee@support.example.com", Teams: []string{"billing"}}); err != nil {
			t.Fatal(err)
		}
		if err := b.Store.DisableAgent(b.Ctx, "dee"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Store.InsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "ada@example.com", Name: "Ada"}); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t)
		cases := b.Desk(q)
		var ids []int64
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, id, err := cases.OpenTicket(b.Ctx, &desk.OpenTicketParams{CustomerID: "C-0001", Subject: fmt.Sprintf("Invoice %d", i),
					Body: "I was charged twice for this invoice, please refund."})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}()
		}
		wg.Wait()
		for _, id := range ids {
			jobstest.WaitFor(t, q, id, jobs.StateSucceeded, 30*time.Second)
		}
		rows, err := b.Pool.Query(b.Ctx, `SELECT coalesce(assignee, '-'), count(*) FROM tickets GROUP BY 1 ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for rows.Next() {
			var a string
			var n int
			_ = rows.Scan(&a, &n)
			counts[a] = n
		}
		lo, hi := 100, 0
		for _, a := range []string{"ana", "ben", "cyd"} {
			lo, hi = min(lo, counts[a]), max(hi, counts[a])
		}
		if hi-lo > 1 || counts["-"] != 0 || counts["dee"] != 0 {
			t.Errorf("assignments %v: want 33 or 34 each, nobody unassigned, none for the disabled agent", counts)
		}
	})

	t.Run("AssignmentCanBeTurnedOff", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "ana", DisplayName: "ana", Email: "ana@support.example.com", Teams: []string{"billing"}}); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t) // AutoAssign is off
		ticketID, job := b.OpenTicket(t, q, "Invoice", "Charged twice.")
		jobstest.WaitFor(t, q, job, jobs.StateSucceeded, 10*time.Second)
		if tk, _ := b.Store.GetTicket(b.Ctx, ticketID); tk.Assignee != nil {
			t.Errorf("assigned to %s with assignment off", *tk.Assignee)
		}
	})

	t.Run("TriageChoosesOnlyTeamsThatExist", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "ana", DisplayName: "ana", Email: "ana@support.example.com", Teams: []string{"money", "general"}}); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t)
		ticketID, job := b.OpenTicket(t, q, "Late parcel", "My parcel is late.") // "shipping" by its words, a team nobody has
		jobstest.WaitFor(t, q, job, jobs.StateSucceeded, 10*time.Second)
		if tk, _ := b.Store.GetTicket(b.Ctx, ticketID); tk.Team == nil || *tk.Team != "general" {
			t.Errorf("team %v, want general: the teams there are", tk.Team)
		}
	})
}

func TestTicketFilters(t *testing.T) {
	t.Parallel()
	b := setupTeam(t, false)
	a, _ := b.open(t, "A", "a")
	c, _ := b.open(t, "C", "c")
	if status, resp := b.patch(t, b.agent, a, map[string]any{"assignee": "bilal", "team": "billing", "status": "pending"}); status != 200 {
		t.Fatalf("%d %v", status, resp)
	}
	ids := func(key, query string) string {
		status, _, resp := b.do(t, key, "GET", "/v1/tickets"+query, nil, "")
		if status != 200 {
			t.Fatalf("GET /v1/tickets%s: %d %v", query, status, resp)
		}
		var out []string
		for _, tk := range resp["tickets"].([]any) {
			out = append(out, tk.(map[string]any)["ticket_id"].(string))
		}
		return strings.Join(out, ",")
	}
	for query, want := range map[string]string{
		"?status=pending": a, "?status=open": c, "?team=billing": a, "?team=shipping": "",
		"?assignee=bilal": a, "?customer=C-0001": c + "," + a, "?customer=C-0001&status=open": c,
	} {
		if got := ids(b.agent, query); got != want {
			t.Errorf("%s: %q, want %q", query, got, want)
		}
	}
	if got := ids(b.bilal, "?assignee=me"); got != a {
		t.Errorf("assignee=me as bilal: %q, want %q", got, a)
	}
	for query, code := range map[string]string{
		"?state=open": "unknown_filter", "?status=archived": "invalid_status", "?team=Billing!": "invalid_team",
		"?assignee=Not%20A%20Name": "invalid_assignee", "?customer=22": "invalid_customer", "?status=open&status=pending": "invalid_filter",
	} {
		status, _, resp := b.do(t, b.agent, "GET", "/v1/tickets"+query, nil, "")
		requireError(t, status, resp, 400, code)
	}
	tk := b.ticket(t, b.customer, a)
	if cust := tk["customer"].(map[string]any); cust["name"] != "Ada Lovelace" || cust["email"] != "ada@example.com" || cust["id"] != "C-0001" {
		t.Errorf("customer %v", cust)
	}
	if _, ok := tk["events"]; ok {
		t.Errorf("a customer sees the events")
	}
}

func TestNotesAndDrafts(t *testing.T) {
	t.Parallel()

	t.Run("ANoteIsNeverEmailedShownToTheCustomerOrThreaded", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, true)
		id, job := b.open(t, "Hello", "Hi.")
		jobstest.WaitFor(t, b.queue, job, jobs.StateSucceeded, 10*time.Second)
		reply := func(body string) int64 {
			status, _, resp := b.do(t, b.agent, "POST", "/v1/tickets/"+id+"/replies", mustJSON(map[string]string{"body": body}), "")
			if status != 202 {
				t.Fatalf("reply: %d %v", status, resp)
			}
			job := int64(resp["job_id"].(float64))
			jobstest.WaitFor(t, b.queue, job, jobs.StateSucceeded, 10*time.Second)
			return job
		}
		reply("First answer.")
		status, _, note := b.do(t, b.agent, "POST", "/v1/tickets/"+id+"/notes", []byte(`{"body":"Internal: customer is a VIP."}`), "")
		if status != 201 || note["direction"] != "note" {
			t.Fatalf("note: %d %v", status, note)
		}
		reply("Second answer.")
		for _, d := range b.smtp.Deliveries() {
			if strings.Contains(string(d.Raw), "VIP") {
				t.Errorf("the note was emailed")
			}
		}
		status, _, msgs := b.do(t, b.customer, "GET", "/v1/tickets/"+id+"/messages", nil, "")
		if status != 200 {
			t.Fatal(status)
		}
		for _, m := range msgs["messages"].([]any) {
			mm := m.(map[string]any)
			if mm["direction"] == "note" {
				t.Errorf("the customer sees the note")
			}
			if _, ok := mm["delivery"]; ok {
				t.Errorf("the customer sees delivery internals: %v", mm["delivery"])
			}
		}
		status, _, msgs = b.do(t, b.agent, "GET", "/v1/tickets/"+id+"/messages", nil, "")
		if status != 200 {
			t.Fatal(status)
		}
		var noteID string
		var second map[string]any
		for _, m := range msgs["messages"].([]any) {
			mm := m.(map[string]any)
			if mm["direction"] == "note" {
				noteID = fmt.Sprint(mm["email_message_id"])
			}
			if mm["body"] == "Second answer." {
				second = mm["delivery"].(map[string]any)
			}
		}
		if noteID != "<nil>" || second == nil || strings.Contains(fmt.Sprint(second["references"], second["in_reply_to"]), "note") {
			t.Errorf("note id %s, second reply's delivery %v", noteID, second)
		}
		if n := len(second["references"].([]any)); n != 2 {
			t.Errorf("the second reply cites %d messages (%v), want the root and the first reply", n, second["references"])
		}
	})

	t.Run("TheDraftIsSentFreshAndRefusedWhenStale", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, true)
		// Triage has not written a draft yet: the provider does not answer.
		slow := simulator.DefaultSettings()
		slow.Mode, slow.SlowDelay = simulator.ModeSlow, simulator.Duration(time.Hour)
		if err := b.Sim.Set(slow); err != nil {
			t.Fatal(err)
		}
		id, job := b.open(t, "Late parcel", "Where is order 4711?")
		path := "/v1/tickets/" + id + "/replies"
		status, _, resp := b.do(t, b.agent, "POST", path, []byte(`{"from_draft":true}`), "")
		requireError(t, status, resp, 409, "no_draft")
		if err := b.Sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		jobstest.WaitFor(t, b.queue, job, jobs.StateSucceeded, 30*time.Second)
		draft := b.ticket(t, b.agent, id)["draft_reply"].(string)
		if !strings.Contains(draft, "Dear Ada Lovelace") || !strings.Contains(draft, "order 4711") {
			t.Errorf("draft %q is not grounded in the ticket", draft)
		}

		// The customer writes again; until triage drafts anew, the draft is stale.
		if err := b.Sim.Set(slow); err != nil {
			t.Fatal(err)
		}
		status, _, follow := b.do(t, b.customer, "POST", "/v1/tickets/"+id+"/messages", []byte(`{"body":"Also, order 5150 is missing."}`), "")
		if status != 202 {
			t.Fatalf("follow-up: %d %v", status, follow)
		}
		status, _, resp = b.do(t, b.agent, "POST", path, []byte(`{"from_draft":true}`), "")
		requireError(t, status, resp, 409, "draft_stale")
		if err := b.Sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		jobstest.WaitFor(t, b.queue, int64(follow["job_id"].(float64)), jobs.StateSucceeded, 30*time.Second)
		status, _, resp = b.do(t, b.agent, "POST", path, []byte(`{"from_draft":true}`), "")
		if status != 202 {
			t.Fatalf("fresh draft: %d %v", status, resp)
		}
		jobstest.WaitFor(t, b.queue, int64(resp["job_id"].(float64)), jobs.StateSucceeded, 10*time.Second)
		// The mail to the customer; the agents are notified of each message too.
		var got []smtptest.Delivery
		for _, d := range b.smtp.Deliveries() {
			if slices.Contains(d.To, "ada@example.com") {
				got = append(got, d)
			}
		}
		if len(got) != 1 || !strings.Contains(string(got[0].Raw), "order 5150") {
			t.Errorf("sent %d mails; want the fresh draft about order 5150", len(got))
		}
		// A body of the agent's own replaces the draft.
		status, _, resp = b.do(t, b.agent, "POST", path, []byte(`{"from_draft":true,"body":"My own words.","status":"solved"}`), "")
		if status != 202 {
			t.Fatalf("own words: %d %v", status, resp)
		}
		if tk := b.ticket(t, b.agent, id); tk["status"] != "solved" {
			t.Errorf("status %v after a reply that asked for solved", tk["status"])
		}
	})
}

func TestPeople(t *testing.T) {
	t.Parallel()

	// A key verified lately is believed for up to a second (keyCacheTTL):
	// a change made elsewhere (the CLI, another process) takes effect
	// within it.
	t.Run("DisabledAgentsAndRevokedKeysAre401WithinASecond", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		if status, _, _ := b.do(t, b.bilal, "GET", "/v1/agents", nil, ""); status != 200 {
			t.Fatalf("bilal before: %d", status)
		}
		if err := b.Store.DisableAgent(b.Ctx, "bilal"); err != nil {
			t.Fatal(err)
		}
		status, resp := b.until401(t, b.bilal, "/v1/agents")
		requireError(t, status, resp, 401, "unauthorized")

		keys, err := b.Store.ListAPIKeys(b.Ctx, "customer:C-0001")
		if err != nil || len(keys) != 1 || keys[0].LastUsedAt != nil {
			t.Fatalf("keys %+v (%v)", keys, err)
		}
		if status, _, _ := b.do(t, b.customer, "GET", "/v1/tickets", nil, ""); status != 200 {
			t.Fatalf("customer before: %d", status)
		}
		if keys, _ := b.Store.ListAPIKeys(b.Ctx, "customer:C-0001"); keys[0].LastUsedAt == nil {
			t.Errorf("last use not recorded")
		}
		if err := b.Store.RevokeAPIKey(b.Ctx, keys[0].ID); err != nil {
			t.Fatal(err)
		}
		status, resp = b.until401(t, b.customer, "/v1/tickets")
		requireError(t, status, resp, 401, "unauthorized")
	})

	t.Run("AgentsAndCustomersCanBeListedAndAdded", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		status, _, resp := b.do(t, b.agent, "GET", "/v1/agents", nil, "")
		if status != 200 || len(resp["agents"].([]any)) != 3 {
			t.Fatalf("agents: %d %v", status, resp)
		}
		if teams := resp["agents"].([]any)[1].(map[string]any)["teams"]; fmt.Sprint(teams) != "[billing general]" {
			t.Errorf("bilal's teams %v", teams)
		}
		status, _, resp = b.do(t, b.customer, "GET", "/v1/agents", nil, "")
		requireError(t, status, resp, 403, "forbidden")

		body := []byte(`{"email":"Grace.Hopper@example.com","name":"Grace Hopper"}`)
		s1, _, first := b.do(t, b.agent, "POST", "/v1/customers", body, "cust-1")
		s2, h2, second := b.do(t, b.agent, "POST", "/v1/customers", body, "cust-1")
		if s1 != 201 || s2 != 201 || fmt.Sprint(first) != fmt.Sprint(second) || h2.Get("Idempotent-Replayed") != "true" ||
			!strings.HasPrefix(first["id"].(string), "C-1") {
			t.Fatalf("add customer: %d %v, again %d %v", s1, first, s2, second)
		}
		status, _, resp = b.do(t, b.agent, "POST", "/v1/customers", body, "cust-2")
		requireError(t, status, resp, 409, "customer_exists")
		status, _, resp = b.do(t, b.agent, "POST", "/v1/customers", []byte(`{"email":"x","name":"X"}`), "")
		requireError(t, status, resp, 422, "invalid_email")
		status, _, resp = b.do(t, b.customer, "POST", "/v1/customers", body, "")
		requireError(t, status, resp, 403, "forbidden")

		status, _, resp = b.do(t, b.agent, "GET", "/v1/customers?email=grace.hopper%40example.com", nil, "")
		if status != 200 || len(resp["customers"].([]any)) != 1 {
			t.Errorf("by email: %d %v", status, resp)
		}
		status, _, resp = b.do(t, b.agent, "GET", "/v1/customers/"+first["id"].(string), nil, "")
		if status != 200 || resp["name"] != "Grace Hopper" {
			t.Errorf("by id: %d %v", status, resp)
		}
		status, _, resp = b.do(t, b.customer, "GET", "/v1/customers/"+first["id"].(string), nil, "")
		requireError(t, status, resp, 404, "not_found")
		status, _, resp = b.do(t, b.customer, "GET", "/v1/customers/C-0001", nil, "")
		if status != 200 || resp["email"] != "ada@example.com" {
			t.Errorf("a customer's own record: %d %v", status, resp)
		}
	})
}
