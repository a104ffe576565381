package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
)

// intakeBundle serves the API over a queue that is not started, so that
// what a request wrote can be counted before any triage runs.
type intakeBundle struct {
	*apiBundle
	c22, c03 string // API keys of customers C-0022 and C-0003
}

func setupIntake(t testing.TB, retention time.Duration) *intakeBundle {
	t.Helper()
	return setupIntakeOn(t, jobstest.Setup(t), retention)
}

// setupIntakeOn is setupIntake over a bundle of the caller's.
func setupIntakeOn(t testing.TB, b *jobstest.Bundle, retention time.Duration) *intakeBundle {
	t.Helper()
	for _, c := range []string{"C-0022", "C-0003"} {
		if _, err := b.Store.InsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: c, Email: strings.ToLower(c) + "@example.com", Name: c}); err != nil {
			t.Fatal(err)
		}
	}
	ib := &intakeBundle{apiBundle: serveAPI(t, b, b.NewQueue(t), retention)}
	ib.c22, ib.c03 = ib.key(t, "customer:C-0022"), ib.key(t, "customer:C-0003")
	return ib
}

// rows are the rows a creating request may write.
type rows struct {
	store.Counts
	Messages, IdempotencyKeys int
}

func (b *intakeBundle) rows(t testing.TB) rows {
	t.Helper()
	c, err := b.Store.CountRows(b.Ctx, jobs.TriageArgs{}.Kind())
	if err != nil {
		t.Fatal(err)
	}
	r := rows{Counts: c}
	if err := b.Pool.QueryRow(b.Ctx, `SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM idempotency_keys)`).
		Scan(&r.Messages, &r.IdempotencyKeys); err != nil {
		t.Fatal(err)
	}
	return r
}

func ticketBody(customer, subject string) []byte {
	return []byte(fmt.Sprintf(`{"customer_id": %q, "subject": %q, "body": "My parcel is late."}`, customer, subject))
}

func TestTheSameIdempotencyKeyGivesTheSameTicket(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	body := ticketBody("C-0022", "Late parcel")

	s1, h1, first := b.do(t, b.c22, "POST", "/v1/tickets", body, "my-first-key-0001")
	// The same request again, written differently: key order and spacing do not count.
	s2, h2, second := b.do(t, b.c22, "POST", "/v1/tickets",
		[]byte(`{"body":"My parcel is late.","subject":"Late parcel","customer_id":"C-0022"}`), "my-first-key-0001")

	if s1 != 202 || first["state"] != "queued" || h1.Get("Idempotent-Replayed") != "" {
		t.Errorf("first: %d %v %v, want 202 queued, not replayed", s1, first, h1)
	}
	if s2 != 202 || fmt.Sprint(second) != fmt.Sprint(first) || h2.Get("Idempotent-Replayed") != "true" {
		t.Errorf("second: %d %v (replayed %q), want the first answer %v replayed", s2, second, h2.Get("Idempotent-Replayed"), first)
	}
	if got, want := b.rows(t), (rows{store.Counts{Tickets: 1, Jobs: 1}, 1, 1}); got != want {
		t.Errorf("rows = %+v, want %+v", got, want)
	}

	t.Run("TheSameKeyFromAnotherCustomerMakesANewTicket", func(t *testing.T) {
		s3, h3, third := b.do(t, b.c03, "POST", "/v1/tickets", ticketBody("C-0003", "Late parcel"), "my-first-key-0001")
		if s3 != 202 || third["ticket_id"] == first["ticket_id"] || h3.Get("Idempotent-Replayed") != "" {
			t.Errorf("other customer: %d %v, want a new ticket", s3, third)
		}
		if got := b.rows(t); got.Tickets != 2 || got.Jobs != 2 {
			t.Errorf("rows = %+v, want 2 tickets and 2 jobs", got)
		}
	})

	t.Run("TheSameKeyWithAnotherBodyIs422AndSavesNothing", func(t *testing.T) {
		before := b.rows(t)
		status, _, resp := b.do(t, b.c22, "POST", "/v1/tickets", ticketBody("C-0022", "Another subject"), "my-first-key-0001")
		requireError(t, status, resp, 422, "idempotency_key_reused")
		if after := b.rows(t); after != before {
			t.Errorf("rows %+v became %+v", before, after)
		}
	})
}

func TestFiftyConcurrentCopiesMakeOneTicket(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	body := ticketBody("C-0022", "Charged twice")

	const n = 50
	var (
		mu       sync.Mutex
		tickets  = map[any]int{}
		replayed int
		statuses = map[int]int{}
	)
	atOnce(n, func() {
		status, h, resp := b.do(t, b.c22, "POST", "/v1/tickets", body, "race-key")
		mu.Lock()
		defer mu.Unlock()
		statuses[status]++
		tickets[resp["ticket_id"]]++
		if h.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	})

	if statuses[202] != n || len(tickets) != 1 || replayed != n-1 {
		t.Errorf("statuses %v, ticket ids %v, %d replayed; want %d × 202 with one ticket id and %d replayed",
			statuses, tickets, replayed, n, n-1)
	}
	if got, want := b.rows(t), (rows{store.Counts{Tickets: 1, Jobs: 1}, 1, 1}); got != want {
		t.Errorf("rows = %+v, want %+v", got, want)
	}
}

// atOnce runs send n times, all released together, and waits for them.
func atOnce(n int, send func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			send()
		}()
	}
	close(start)
	wg.Wait()
}

func TestBadTicketRequestsWriteNothing(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	long := strings.Repeat("é", 201)
	for _, tc := range []struct {
		name    string
		key     string
		body    string
		idemKey string
		status  int
		code    string
	}{
		{"NoAPIKey", "", `{}`, "", 401, "unauthorized"},
		{"UnknownAPIKey", "hd_nope", `{}`, "", 401, "unauthorized"},
		{"EmptyBody", "c22", ``, "", 400, "invalid_json"},
		{"NotJSON", "c22", `customer=C-0022`, "", 400, "invalid_json"},
		{"TrailingData", "c22", `{"customer_id":"C-0022","subject":"a","body":"b"} {}`, "", 400, "invalid_json"},
		{"WrongType", "c22", `{"customer_id":22,"subject":"a","body":"b"}`, "", 400, "invalid_json"},
		{"UnknownField", "c22", `{"customer_id":"C-0022","subject":"a","body":"b","priority":1}`, "", 400, "unknown_field"},
		{"BodyOver1MiB", "c22", `{"customer_id":"C-0022","subject":"a","body":"` + strings.Repeat("x", 1<<20) + `"}`, "", 413, "request_too_large"},
		{"BadCustomerID", "agent", `{"customer_id":"22","subject":"a","body":"b"}`, "", 422, "invalid_customer_id"},
		{"EmptySubject", "c22", `{"customer_id":"C-0022","subject":" ","body":"b"}`, "", 422, "invalid_subject"},
		{"SubjectOver200Characters", "c22", `{"customer_id":"C-0022","subject":"` + long + `","body":"b"}`, "", 422, "invalid_subject"},
		{"SubjectWithCRLF", "c22", `{"customer_id":"C-0022","subject":"Hi\r\nBcc: x@evil.example","body":"b"}`, "", 422, "invalid_subject"},
		{"SubjectWithTab", "c22", `{"customer_id":"C-0022","subject":"a\tb","body":"b"}`, "", 422, "invalid_subject"},
		{"EmptyBodyText", "c22", `{"customer_id":"C-0022","subject":"a","body":""}`, "", 422, "invalid_body"},
		{"BodyOver64KiB", "c22", `{"customer_id":"C-0022","subject":"a","body":"` + strings.Repeat("x", 64<<10+1) + `"}`, "", 422, "invalid_body"},
		{"BodyWithNUL", "c22", `{"customer_id":"C-0022","subject":"a","body":"a\u0000b"}`, "", 422, "invalid_body"},
		{"SubjectWithInvalidUTF8", "c22", "{\"customer_id\":\"C-0022\",\"subject\":\"a\xffb\",\"body\":\"b\"}", "", 400, "invalid_utf8"},
		{"BodyWithInvalidUTF8", "c22", "{\"customer_id\":\"C-0022\",\"subject\":\"a\",\"body\":\"\xc3\x28\"}", "", 400, "invalid_utf8"},
		{"BodyWithALoneHighSurrogate", "c22", `{"customer_id":"C-0022","subject":"a","body":"x\ud800y"}`, "", 400, "invalid_utf8"},
		{"BodyWithALoneLowSurrogate", "c22", `{"customer_id":"C-0022","subject":"a","body":"\udc00"}`, "", 400, "invalid_utf8"},
		{"SubjectWithAHighSurrogateAtTheEnd", "c22", `{"customer_id":"C-0022","subject":"a\ud83d","body":"b"}`, "", 400, "invalid_utf8"},
		{"CustomerNamingAnother", "c22", `{"customer_id":"C-0003","subject":"a","body":"b"}`, "", 403, "forbidden"},
		{"AgentNamingUnknownCustomer", "agent", `{"customer_id":"C-9999","subject":"a","body":"b"}`, "k1", 422, "unknown_customer"},
		{"IdempotencyKeyTooLong", "c22", `{"customer_id":"C-0022","subject":"a","body":"b"}`, strings.Repeat("k", 256), 400, "invalid_idempotency_key"},
		{"IdempotencyKeyWithSpace", "c22", `{"customer_id":"C-0022","subject":"a","body":"b"}`, "my key", 400, "invalid_idempotency_key"},
		{"IdempotencyKeyNotASCII", "c22", `{"customer_id":"C-0022","subject":"a","body":"b"}`, "clé", 400, "invalid_idempotency_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.rows(t)
			key := map[string]string{"": "", "hd_nope": "hd_nope", "c22": b.c22, "agent": b.agent}[tc.key]
			status, _, resp := b.do(t, key, "POST", "/v1/tickets", []byte(tc.body), tc.idemKey)
			requireError(t, status, resp, tc.status, tc.code)
			if after := b.rows(t); after != before {
				t.Errorf("rows %+v became %+v", before, after)
			}
		})
	}

	t.Run("BodyOfExactly64KiBIsAccepted", func(t *testing.T) {
		status, _, resp := b.do(t, b.c22, "POST", "/v1/tickets",
			[]byte(`{"customer_id":"C-0022","subject":"`+strings.Repeat("é", 200)+`","body":"`+strings.Repeat("x", 64<<10)+`"}`), "")
		if status != 202 {
			t.Errorf("got %d %v, want 202", status, resp)
		}
	})
}

func TestCustomersSeeOnlyTheirOwnTickets(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	_, _, mine := b.do(t, b.c22, "POST", "/v1/tickets", ticketBody("C-0022", "Mine"), "")
	_, _, theirs := b.do(t, b.c03, "POST", "/v1/tickets", ticketBody("C-0003", "Theirs"), "")
	theirID, theirJob := theirs["ticket_id"].(string), int64(theirs["job_id"].(float64))

	t.Run("AnotherCustomersTicketIsNotFound", func(t *testing.T) {
		status, _, resp := b.do(t, b.c22, "GET", "/v1/tickets/"+theirID, nil, "")
		requireError(t, status, resp, 404, "not_found")
		missing, _, _ := b.do(t, b.c22, "GET", "/v1/tickets/T-999999", nil, "")
		if missing != status {
			t.Errorf("a missing ticket answers %d, another's %d: existence leaks", missing, status)
		}
	})

	t.Run("TheListHoldsOnlyTheirOwn", func(t *testing.T) {
		_, _, resp := b.do(t, b.c22, "GET", "/v1/tickets", nil, "")
		list := resp["tickets"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["ticket_id"] != mine["ticket_id"] {
			t.Errorf("C-0022 lists %v, want only %v", list, mine["ticket_id"])
		}
	})

	t.Run("JobsAreForAgentsOnly", func(t *testing.T) {
		for _, req := range []struct{ method, path string }{
			{"GET", fmt.Sprintf("/v1/jobs/%d", theirJob)},
			{"GET", "/v1/jobs?state=queued"},
			{"POST", fmt.Sprintf("/v1/jobs/%d/retry", theirJob)},
		} {
			status, _, resp := b.do(t, b.c22, req.method, req.path, nil, "")
			requireError(t, status, resp, 403, "forbidden")
		}
	})

	t.Run("TheirOwnTicketShowsWithoutTheDraft", func(t *testing.T) {
		status, _, resp := b.do(t, b.c22, "GET", "/v1/tickets/"+mine["ticket_id"].(string), nil, "")
		triage, _ := resp["triage"].(map[string]any)
		msgs, _ := resp["messages"].([]any)
		if status != 200 || triage["state"] != "queued" || len(msgs) != 1 {
			t.Errorf("got %d %v", status, resp)
		}
		if _, ok := resp["draft_reply"]; ok {
			t.Errorf("a customer sees draft_reply: %v", resp)
		}
	})
}

func TestAgentsListTicketsNewestFirstAPageAtATime(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	var ids []string
	for i := range 5 {
		_, _, resp := b.do(t, b.agent, "POST", "/v1/tickets", ticketBody("C-0022", fmt.Sprintf("Ticket %d", i)), "")
		ids = append([]string{resp["ticket_id"].(string)}, ids...) // newest first
	}
	var got []string
	path := "/v1/tickets?status=open&limit=2"
	for pages := 0; path != "" && pages < 10; pages++ {
		status, _, resp := b.do(t, b.agent, "GET", path, nil, "")
		if status != 200 {
			t.Fatalf("%s: %d %v", path, status, resp)
		}
		for _, tk := range resp["tickets"].([]any) {
			got = append(got, tk.(map[string]any)["ticket_id"].(string))
		}
		path = ""
		if c, ok := resp["next_cursor"].(string); ok {
			path = "/v1/tickets?status=open&limit=2&cursor=" + c
		}
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("pages gave %v, want %v", got, ids)
	}
	_, _, solved := b.do(t, b.agent, "GET", "/v1/tickets?status=solved", nil, "")
	if len(solved["tickets"].([]any)) != 0 {
		t.Errorf("status filter: %v", solved)
	}
}

func TestIdempotencyKeysExpireAfterTheRetention(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, time.Second)
	body := ticketBody("C-0022", "Late parcel")
	_, _, first := b.do(t, b.c22, "POST", "/v1/tickets", body, "old-key")
	if _, err := b.Pool.Exec(context.Background(), `UPDATE idempotency_keys SET created_at = now() - interval '2 seconds'`); err != nil {
		t.Fatal(err)
	}
	status, h, again := b.do(t, b.c22, "POST", "/v1/tickets", body, "old-key")
	if status != 202 || again["ticket_id"] == first["ticket_id"] || h.Get("Idempotent-Replayed") != "" {
		t.Errorf("after the retention: %d %v, want a new ticket", status, again)
	}

	n, err := b.Store.PruneIdempotencyKeys(b.Ctx, time.Hour)
	if err != nil || n != 0 {
		t.Errorf("pruning keys younger than the retention deleted %d (%v)", n, err)
	}
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE idempotency_keys SET created_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Store.PruneIdempotencyKeys(b.Ctx, time.Hour); err != nil || n != 1 {
		t.Errorf("pruning deleted %d (%v), want the 1 expired key", n, err)
	}
}

// A mail fetched from a mailbox a while after it reached it shows when it
// did (its SLA clocks count from then); a mail filed as it came, or one
// whose server's clock runs ahead of ours, shows nothing of the kind.
func TestAFetchedMailShowsWhenItReachedItsMailbox(t *testing.T) {
	t.Parallel()
	b := setupTeam(t, false)
	arrived := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	fetched, _, err := b.Desk(b.queue).OpenTicket(b.Ctx, &desk.OpenTicketParams{CustomerID: "C-0001", Subject: "Refund",
		Body: "Please refund.", Arrived: arrived})
	if err != nil {
		t.Fatal(err)
	}
	ahead, _, err := b.Desk(b.queue).OpenTicket(b.Ctx, &desk.OpenTicketParams{CustomerID: "C-0001", Subject: "Invoice",
		Body: "Wrong address.", Arrived: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	live, _ := b.open(t, "Parcel", "Where is it?")
	for _, c := range []struct {
		ticketID string
		want     any
	}{{fetched.ID, arrived.UTC().Format(time.RFC3339)}, {ahead.ID, nil}, {live, nil}} {
		status, _, resp := b.do(t, b.customer, "GET", "/v1/tickets/"+c.ticketID, nil, "")
		if status != 200 {
			t.Fatalf("GET %s: %d %v", c.ticketID, status, resp)
		}
		if got := resp["messages"].([]any)[0].(map[string]any)["arrived_at"]; got != c.want {
			t.Errorf("%s: arrived_at %v, want %v", c.ticketID, got, c.want)
		}
	}
}
