package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// seenOn is the seen_message the page's reply form carries.
func seenOn(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`name="seen_message" value="(\d+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no seen_message on the page:\n%s", page)
	}
	return m[1]
}

func TestConsoleWithoutJavaScript(t *testing.T) {
	t.Parallel()
	w := newWorld(t)

	t.Run("StrangersAreSentToSignInAndWrongKeysRefused", func(t *testing.T) {
		c := w.client(t)
		c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		if status, _ := c.get("/ui/tickets/" + w.ticket); status != http.StatusSeeOther {
			t.Errorf("a ticket without a session: %d, want a redirect to sign in", status)
		}
		c.http.CheckRedirect = nil
		if status, body := c.post("/ui/login", url.Values{"key": {"hd_wrong"}}); status != http.StatusUnauthorized || !strings.Contains(body, "not an agent") {
			t.Errorf("a wrong key: %d", status)
		}
	})

	t.Run("EveryPageIsStrictAndUnframed", func(t *testing.T) {
		resp, err := http.Get(w.url + "/ui/login")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			strings.Contains(csp, "unsafe-inline") {
			t.Errorf("CSP %q", csp)
		}
	})

	t.Run("ARequestFromAnotherSiteChangesNothing", func(t *testing.T) {
		c := w.client(t)
		c.signIn(w.keys["alice"])
		req, _ := http.NewRequest(http.MethodPost, w.url+"/ui/tickets/"+w.ticket+"/note", strings.NewReader("body=evil"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site note: %d", resp.StatusCode)
		}
		msgs, _ := w.Store.ListMessages(w.Ctx, w.ticket)
		for _, m := range msgs {
			if m.Body == "evil" {
				t.Error("the cross-site note was written")
			}
		}
	})

	t.Run("TheQueueListsTheTicketAndTheThreadEscapesWhatCustomersWrite", func(t *testing.T) {
		c := w.client(t)
		c.signIn(w.keys["alice"])
		_, body := c.get("/ui/?view=unassigned")
		if !strings.Contains(body, w.ticket) || !strings.Contains(body, "Unassigned") {
			t.Fatalf("unassigned queue lacks %s:\n%s", w.ticket, body)
		}
		if _, err := w.Desk(w.queue).AddCustomerMessage(w.Ctx, &desk.CustomerMessageParams{TicketID: w.ticket,
			Author: vocab.Customer("C-0001"), Body: `<script>alert(1)</script><img src=x onerror=alert(2)>`}); err != nil {
			t.Fatal(err)
		}
		_, page := c.get("/ui/tickets/" + w.ticket)
		if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") {
			t.Error("a customer's markup reached the page unescaped")
		}
		for _, label := range []string{`<label for="reply">Reply</label>`, `>Send reply</button>`, `>Add note</button>`,
			`<label for="assignee">Assignee</label>`, `<label for="status">Status</label>`} {
			if !strings.Contains(page, label) {
				t.Errorf("the ticket page lacks %s", label)
			}
		}
		_, found := c.get("/ui/?view=all&q=" + url.QueryEscape("charged twice"))
		_, none := c.get("/ui/?view=all&q=" + url.QueryEscape("parcel"))
		if !strings.Contains(found, w.ticket) || strings.Contains(none, w.ticket) {
			t.Errorf("search by words of the subject: %v %v\n%s", strings.Contains(found, w.ticket), strings.Contains(none, w.ticket), none)
		}
		_, byMail := c.get("/ui/?view=all&q=c1%40example.com")
		if !strings.Contains(byMail, w.ticket) {
			t.Error("search by the customer's address")
		}
	})

	t.Run("AReplyWrittenBeforeANewerMessageIsRefusedAndKept", func(t *testing.T) {
		alice, bilal := w.client(t), w.client(t)
		alice.signIn(w.keys["alice"])
		bilal.signIn(w.keys["bilal"])
		_, page := alice.get("/ui/tickets/" + w.ticket)
		_, other := bilal.get("/ui/tickets/" + w.ticket)
		status, _ := alice.post("/ui/tickets/"+w.ticket+"/reply", url.Values{"body": {"Alice: refunded."}, "status": {"pending"},
			"seen_message": {seenOn(t, page)}})
		if status != http.StatusOK {
			t.Fatalf("alice's reply: %d", status)
		}
		status, refused := bilal.post("/ui/tickets/"+w.ticket+"/reply", url.Values{"body": {"Bilal: refunded too."}, "status": {"pending"},
			"seen_message": {seenOn(t, other)}})
		if status != http.StatusConflict || !strings.Contains(refused, "Bilal: refunded too.") || !strings.Contains(refused, "Alice: refunded.") {
			t.Errorf("bilal's late reply: %d; want 409 with his text kept and alice's reply shown", status)
		}
		msgs, _ := w.Store.ListMessages(w.Ctx, w.ticket)
		replies := 0
		for _, m := range msgs {
			if m.Direction == vocab.DirectionOutbound && strings.Contains(m.Body, "refunded") {
				replies++
			}
		}
		if replies != 1 {
			t.Errorf("%d replies written, want alice's alone", replies)
		}
	})

	t.Run("AReplysDeliveryAndTheTicketsHistoryAreShown", func(t *testing.T) {
		c := w.client(t)
		c.signIn(w.keys["alice"])
		ticket, err := w.Store.GetTicket(w.Ctx, w.ticket)
		if err != nil {
			t.Fatal(err)
		}
		from, to := ticket.Status, vocab.StatusPending // the reply changes the status, whatever it was
		if from == to {
			to = vocab.StatusOpen
		}
		_, page := c.get("/ui/tickets/" + w.ticket)
		status, _ := c.post("/ui/tickets/"+w.ticket+"/reply", url.Values{"body": {"Alice: sent on its way."}, "status": {string(to)},
			"seen_message": {seenOn(t, page)}})
		if status != http.StatusOK {
			t.Fatalf("reply: %d", status)
		}
		var job int64
		if err := w.Pool.QueryRow(w.Ctx, `SELECT job_id FROM outbound_emails WHERE message_id =
			(SELECT max(id) FROM messages WHERE ticket_id = $1 AND direction = 'outbound')`, w.ticket).Scan(&job); err != nil {
			t.Fatal(err)
		}
		jobstest.WaitFor(t, w.queue, job, jobs.StateSucceeded, 30*time.Second)
		_, page = c.get("/ui/tickets/" + w.ticket)
		if !strings.Contains(page, `<ul class="delivery" aria-label="Delivery"><li>c1@example.com: sent</li></ul>`) {
			t.Error("the ticket page does not show the reply delivered to the customer")
		}
		if !strings.Contains(page, fmt.Sprintf("agent:alice: status from %s to %s</li>", from, to)) {
			t.Error("the ticket page's history does not show alice's change of status")
		}
	})

	t.Run("WhoElseIsThereIsShown", func(t *testing.T) {
		alice, bilal := w.client(t), w.client(t)
		alice.signIn(w.keys["alice"])
		bilal.signIn(w.keys["bilal"])
		alice.post("/ui/tickets/"+w.ticket+"/presence", url.Values{"activity": {"replying"}})
		_, line := bilal.post("/ui/tickets/"+w.ticket+"/presence", url.Values{"activity": {"viewing"}})
		if line != "alice is replying" {
			t.Errorf("presence %q", line)
		}
	})

	t.Run("ASavedReplyIsFilledIn", func(t *testing.T) {
		c := w.client(t)
		c.signIn(w.keys["alice"])
		if status, _ := c.post("/ui/saved-replies", url.Values{"title": {"Refund"}, "body": {"Dear {{customer.name}}, {{ticket.id}} is refunded. {{agent.name}}"},
			"team": {"billing"}}); status != http.StatusOK {
			t.Fatalf("add: %d", status)
		}
		_, page := c.get("/ui/tickets/" + w.ticket)
		m := regexp.MustCompile(`<option value="(\d+)" data-body="([^"]*)">Refund</option>`).FindStringSubmatch(page)
		if m == nil || m[2] != "Dear Ada Customer, "+w.ticket+" is refunded. Alice" {
			t.Fatalf("saved reply option %v", m)
		}
		_, inserted := c.get("/ui/tickets/" + w.ticket + "?saved=" + m[1])
		if !strings.Contains(inserted, ">Dear Ada Customer, "+w.ticket+" is refunded. Alice</textarea>") {
			t.Error("inserting without JavaScript did not fill the reply box")
		}
	})

	t.Run("WhatABrowserCannotMeanIsRefusedInWordsAndChangesNothing", func(t *testing.T) {
		c := w.client(t)
		c.signIn(w.keys["alice"])
		before, _ := w.Store.ListMessages(w.Ctx, w.ticket)
		ticket := func() *store.Ticket {
			t.Helper()
			tk, err := w.Store.GetTicket(w.Ctx, w.ticket)
			if err != nil {
				t.Fatal(err)
			}
			return tk
		}
		was := ticket()
		// Bytes PostgreSQL's text refuses, in the path, the query and the forms.
		// A reply form with a file, its part's header written as given.
		withFile := func(partHeader string) string {
			return "--b\r\nContent-Disposition: form-data; name=\"body\"\r\n\r\nHere it is.\r\n" +
				"--b\r\n" + partHeader + "\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b--\r\n"
		}
		for _, tc := range []struct {
			name, body string
			want       int
			says       string
		}{
			{"AFileNameThatIsNotUTF8", withFile("Content-Disposition: form-data; name=\"attachments\"; filename=\"\xff\xfe.txt\""),
				http.StatusUnprocessableEntity, "The reply was not sent: invalid filename: the name is not UTF-8."},
			{"AFileNameLongerThanAMailHeaderTakes", withFile("Content-Disposition: form-data; name=\"attachments\"; filename=\"" + strings.Repeat("x", 300) + "\""),
				http.StatusUnprocessableEntity, "at most 255"},
			{"AFormThatIsNoForm", withFile("Content-Disposition: form-data; name=\"attachments\"; filename=\"a\x00b.txt\""),
				http.StatusBadRequest, "The form could not be read: nothing was sent."},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body := c.postBody("/ui/tickets/"+w.ticket+"/reply", "multipart/form-data; boundary=b", tc.body)
				if status != tc.want || !strings.Contains(body, tc.says) {
					t.Errorf("%d, want %d saying %q:\n%s", status, tc.want, tc.says, body)
				}
			})
		}
		for _, tc := range []struct {
			name, method, path string
			form               url.Values
			want               int
			says               string
		}{
			{"ATicketIDWithANUL", "GET", "/ui/tickets/T-1%00", nil, http.StatusNotFound, "no such ticket"},
			{"ATicketIDThatIsNotUTF8", "GET", "/ui/tickets/%FF%FE", nil, http.StatusNotFound, "no such ticket"},
			{"ANoteOnATicketIDWithANUL", "POST", "/ui/tickets/%00/note", url.Values{"body": {"hello"}}, http.StatusNotFound, "no such ticket"},
			{"AFileOfATicketIDThatIsNotUTF8", "GET", "/ui/tickets/%FF/attachments/1", nil, http.StatusNotFound, "no such ticket"},
			{"QueueFiltersNoTicketCouldMatch", "GET", "/ui/?view=all&team=%00&assignee=%FF&q=a%00b", nil, http.StatusBadRequest,
				"Left out: the team, which is no team&#39;s name; the assignee, who is no agent; the search"},
			{"ASearchLongerThanTheQueueRuns", "GET", "/ui/?view=all&q=" + strings.Repeat("charged+", 40), nil, http.StatusBadRequest, "at most 200 bytes"},
			{"AReplyWithANUL", "POST", "/ui/tickets/" + w.ticket + "/reply", url.Values{"body": {"refunded\x00"}, "status": {"pending"}},
				http.StatusUnprocessableEntity, "invalid text: it holds a NUL character."},
			{"ANoteThatIsNotUTF8", "POST", "/ui/tickets/" + w.ticket + "/note", url.Values{"body": {"\xff\xfe"}},
				http.StatusUnprocessableEntity, "invalid text: it is not UTF-8."},
			{"AnEmptyNote", "POST", "/ui/tickets/" + w.ticket + "/note", url.Values{"body": {"  "}}, http.StatusUnprocessableEntity, "Write the note first."},
			{"APriorityThatIsNone", "POST", "/ui/tickets/" + w.ticket + "/change", url.Values{"priority": {"-5"}},
				http.StatusUnprocessableEntity, "a priority is 1 (urgent) to 4 (low)"},
			{"ASavedReplyWithANUL", "POST", "/ui/saved-replies", url.Values{"title": {"Re\x00fund"}, "body": {"Refunded."}},
				http.StatusUnprocessableEntity, "it holds a NUL character"},
			{"DeletingASavedReplyThatIsNoNumber", "POST", "/ui/saved-replies/%00/delete", nil, http.StatusNotFound, "No such saved reply."},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body := 0, ""
				if tc.method == "GET" {
					status, body = c.get(tc.path)
				} else {
					status, body = c.post(tc.path, tc.form)
				}
				if status != tc.want || !strings.Contains(body, tc.says) {
					t.Errorf("%s %s: %d, want %d saying %q:\n%s", tc.method, tc.path, status, tc.want, tc.says, body)
				}
			})
		}
		if after, _ := w.Store.ListMessages(w.Ctx, w.ticket); len(after) != len(before) {
			t.Errorf("%d messages after the refusals, want the %d before", len(after), len(before))
		}
		if now := ticket(); *now.Priority != *was.Priority || now.Status != was.Status {
			t.Errorf("the ticket changed: priority %d → %d, status %s → %s", *was.Priority, *now.Priority, was.Status, now.Status)
		}
		if list, err := w.Desk(w.queue).SavedReplies(w.Ctx, &store.Agent{Name: "alice", Teams: []string{"billing"}}); err != nil || len(list) > 1 {
			t.Errorf("saved replies %d (%v), want none new", len(list), err)
		}
	})
}

func TestConsoleShowsSLAClocks(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.client(t)
	c.signIn(w.keys["alice"])
	if _, body := c.get("/ui/?view=open"); strings.Contains(body, "Due soon") {
		t.Error("a Due soon view without any SLA")
	}
	cases := w.Desk(w.queue)
	for p := int16(1); p <= 4; p++ { // whatever priority triage chose
		if _, err := cases.SetSLAPolicy(w.Ctx, vocab.Agent("alice"), &store.SLAPolicy{Priority: p, FirstResponse: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, _ := cases.TicketSLA(w.Ctx, w.ticket); s != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ticket was not timed within 30s")
		}
	}
	_, body := c.get("/ui/?view=due")
	if !strings.Contains(body, "Due soon") || !strings.Contains(body, w.ticket) || !strings.Contains(body, "sla-due") {
		t.Errorf("the Due soon view lacks %s or its due mark", w.ticket)
	}
	if _, page := c.get("/ui/tickets/" + w.ticket); !strings.Contains(page, "First response") {
		t.Error("the ticket page does not show its SLA clock")
	}
}

func TestABigQueueIsCountedUpToTheCap(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// store.CountCap more open tickets of billing's, nobody's: the view holds more than it counts.
	if _, err := w.Pool.Exec(w.Ctx, `INSERT INTO tickets (customer_id, subject, team, last_customer_message_at)
		SELECT customer_id, 'Another question ' || g, 'billing', now() FROM tickets, generate_series(1, $2) g WHERE id = $1`,
		w.ticket, store.CountCap); err != nil {
		t.Fatal(err)
	}
	c := w.client(t)
	c.signIn(w.keys["alice"])

	status, body := c.get("/ui/?view=unassigned")
	if status != http.StatusOK {
		t.Fatalf("queue: %d", status)
	}
	capped := fmt.Sprintf("%d&#43;", store.CountCap) // "1000+", as html/template writes the plus
	if !strings.Contains(body, `<span class="count">`+capped+`</span>`) || !strings.Contains(body, "1–50 of "+capped) {
		t.Errorf("the unassigned view of %d tickets does not say %q in its tab and its range", store.CountCap+1, capped)
	}
	if !strings.Contains(body, "page=2") {
		t.Error("no link to the next page")
	}
	// A page past the cap counts on from where it is: the last one, exactly.
	var n int
	if err := w.Pool.QueryRow(w.Ctx, `SELECT count(*) FROM tickets WHERE status = 'open' AND assignee IS NULL AND team = 'billing'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("%d–%d of %d", 1001, n, n)
	if _, body := c.get("/ui/?view=unassigned&page=21"); !strings.Contains(body, last) || strings.Contains(body, "page=22") {
		t.Errorf("the last page does not say %q, without a next page", last)
	}
}

// A mail fetched from a mailbox days after it reached it says so beside
// its time: its SLA clocks count from then. One fetched seconds after it
// came says nothing more than its time.
func TestAFetchedMailShowsWhenItReachedTheMailbox(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.client(t)
	c.signIn(w.keys["alice"])
	customer, err := w.Store.GetTicket(w.Ctx, w.ticket)
	if err != nil {
		t.Fatal(err)
	}
	arrived := time.Date(2026, 11, 30, 9, 41, 0, 0, time.UTC)
	fetched, _, err := w.Desk(w.queue).OpenTicket(w.Ctx, &desk.OpenTicketParams{CustomerID: customer.CustomerID, Subject: "Old mail",
		Body: "Sent a week ago.", Arrived: arrived})
	if err != nil {
		t.Fatal(err)
	}
	if _, page := c.get("/ui/tickets/" + fetched.ID); !strings.Contains(page, "reached the mailbox <time>2026-11-30 09:41 UTC</time>") {
		t.Errorf("the fetched mail's page does not say when it reached the mailbox")
	}
	// Fetched seconds after it came, at IDLE's pace: nothing to tell.
	prompt, _, err := w.Desk(w.queue).OpenTicket(w.Ctx, &desk.OpenTicketParams{CustomerID: customer.CustomerID, Subject: "New mail",
		Body: "Sent just now.", Arrived: time.Now().Add(-5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{w.ticket, prompt.ID} {
		if _, page := c.get("/ui/tickets/" + id); strings.Contains(page, "reached the mailbox") {
			t.Errorf("%s, a mail filed as it came or seconds after, says when it reached a mailbox", id)
		}
	}
}
