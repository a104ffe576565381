package api_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/faulttest"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
)

func TestIDsAndCursorsThatCannotExistNeverReachTheDatabase(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	cursor := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	for _, tc := range []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"TicketIDWithNUL", "GET", "/v1/tickets/T-5%00", 404, "not_found"},
		{"TicketIDWithInvalidUTF8", "GET", "/v1/tickets/T-%FF%FE", 404, "not_found"},
		{"TicketIDOfLetters", "GET", "/v1/tickets/hello", 404, "not_found"},
		{"TicketIDTooLong", "GET", "/v1/tickets/T-" + strings.Repeat("9", 40), 404, "not_found"},
		{"MessagesOfTicketIDWithNUL", "GET", "/v1/tickets/T-5%00/messages", 404, "not_found"},
		{"MessagesOfTicketIDWithInvalidUTF8", "GET", "/v1/tickets/%C3%28/messages", 404, "not_found"},
		{"ReplyToTicketIDWithNUL", "POST", "/v1/tickets/%00/replies", 404, "not_found"},
		{"ReplyToTicketIDWithInvalidUTF8", "POST", "/v1/tickets/T-%FF/replies", 404, "not_found"},
		{"CursorWithNUL", "GET", "/v1/tickets?cursor=" + cursor("1|T-5\x00"), 400, "invalid_cursor"},
		{"CursorWithInvalidUTF8", "GET", "/v1/tickets?cursor=" + cursor("1|T-\xff"), 400, "invalid_cursor"},
		{"CursorWithNULTime", "GET", "/v1/tickets?cursor=" + cursor("\x00|T-1"), 400, "invalid_cursor"},
		{"CursorNotBase64", "GET", "/v1/tickets?cursor=%00%FF", 400, "invalid_cursor"},
		{"CursorOfAnotherShape", "GET", "/v1/tickets?cursor=" + cursor("T-1"), 400, "invalid_cursor"},
		{"StatusWithNUL", "GET", "/v1/tickets?status=open%00", 400, "invalid_status"},
		{"StatusWithInvalidUTF8", "GET", "/v1/tickets?status=%FF", 400, "invalid_status"},
		{"JobIDWithNUL", "GET", "/v1/jobs/1%00", 400, "invalid_job_id"},
		{"JobIDWithInvalidUTF8", "GET", "/v1/jobs/%FF", 400, "invalid_job_id"},
		{"JobListAfterWithNUL", "GET", "/v1/jobs?state=dead_letter&after=1%00", 400, "invalid_after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, _, body := b.do(t, b.agent, tc.method, tc.path, []byte(`{"body":"x"}`), "")
			requireError(t, status, body, tc.status, tc.code)
		})
	}
}

func TestJSONEndpointsTakeOnlyJSON(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	body := ticketBody("C-0022", "Late parcel")
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "nonsense"} {
		t.Run("Refuses"+strings.ReplaceAll(strings.ReplaceAll(ct, "/", "_"), ";", ""), func(t *testing.T) {
			before := b.rows(t)
			status, _, resp := b.doWith(t, b.c22, "POST", "/v1/tickets", body, http.Header{"Content-Type": {ct}})
			requireError(t, status, resp, http.StatusUnsupportedMediaType, "unsupported_media_type")
			if after := b.rows(t); after != before {
				t.Errorf("rows %+v became %+v", before, after)
			}
		})
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/merge-patch+json"} {
		t.Run("Takes"+ct, func(t *testing.T) {
			status, _, resp := b.doWith(t, b.c22, "POST", "/v1/tickets", body, http.Header{"Content-Type": {ct}})
			if status != http.StatusAccepted {
				t.Errorf("Content-Type %q: %d %v, want 202", ct, status, resp)
			}
		})
	}
	t.Run("RefusesNullForAFieldOfAType", func(t *testing.T) {
		// A null would otherwise be read as absent: a saved reply for
		// "team": null would be saved for the agent's own team.
		before := b.rows(t)
		status, _, resp := b.do(t, b.agent, "POST", "/v1/saved-replies", []byte(`{"title":"Refund","body":"Done.","team":null}`), "")
		requireError(t, status, resp, http.StatusBadRequest, "invalid_json")
		if !strings.Contains(fmt.Sprint(resp["message"]), `"team"`) {
			t.Errorf("message %q, want it to name the field", resp["message"])
		}
		status, _, resp = b.do(t, b.c22, "POST", "/v1/tickets", []byte(`{"customer_id":"C-0022","subject":"Late","body":"b","Subject":null}`), "")
		requireError(t, status, resp, http.StatusBadRequest, "invalid_json")
		if after := b.rows(t); after != before {
			t.Errorf("rows %+v became %+v", before, after)
		}
	})
	t.Run("TakesASurrogatePairAsTheCharacterItEncodes", func(t *testing.T) {
		status, _, resp := b.do(t, b.c22, "POST", "/v1/tickets", []byte(`{"customer_id":"C-0022","subject":"Smile \ud83d\ude00","body":"b"}`), "")
		if status != http.StatusAccepted {
			t.Fatalf("%d %v", status, resp)
		}
		ticket, err := b.Store.GetTicket(b.Ctx, resp["ticket_id"].(string))
		if err != nil || ticket.Subject != "Smile 😀" {
			t.Errorf("subject %q (%v)", ticket.Subject, err)
		}
	})
}

func TestAddressesFollowRFC5321Limits(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	for _, tc := range []struct {
		name, cc string
	}{
		{"ALocalPartOf65Octets", strings.Repeat("a", 65) + "@example.com"},
		{"ALocalPartOf5000Octets", strings.Repeat("a", 5000) + "@example.com"},
		{"AnAddressOf255Octets", "a@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + "." + strings.Repeat("e", 59) + ".com"},
	} {
		t.Run(tc.name+"IsRefused", func(t *testing.T) {
			before := b.rows(t)
			status, _, resp := b.do(t, b.agent, "POST", "/v1/tickets/T-500001/replies", []byte(`{"body":"Hi","cc":["`+tc.cc+`"]}`), "")
			requireError(t, status, resp, 422, "invalid_cc")
			if len(resp["message"].(string)) > 200 {
				t.Errorf("the error repeats the address: %d characters", len(resp["message"].(string)))
			}
			if after := b.rows(t); after != before {
				t.Errorf("rows %+v became %+v", before, after)
			}
		})
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()

	t.Run("HealthzAnswersGETAndHEADOnly", func(t *testing.T) {
		t.Parallel()
		b := setupIntake(t, 0)
		for method, want := range map[string]int{"GET": 200, "HEAD": 200, "POST": 405, "DELETE": 405, "FOO": 405} {
			req, _ := http.NewRequest(method, b.url+"/healthz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s /healthz: %d, want %d", method, resp.StatusCode, want)
			}
			if want == 405 && resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s /healthz: Allow %q", method, resp.Header.Get("Allow"))
			}
		}
	})

	t.Run("ReadyzIs503WhenPostgreSQLDoesNotAnswer", func(t *testing.T) {
		t.Parallel()
		b, proxy := serveThroughProxy(t, 0)
		if status := get(t, b.url+"/readyz"); status != 200 {
			t.Fatalf("readyz %d with PostgreSQL up", status)
		}
		proxy.Freeze()
		if status := get(t, b.url+"/readyz"); status != 503 {
			t.Errorf("readyz %d with PostgreSQL frozen, want 503", status)
		}
		if status := get(t, b.url+"/healthz"); status != 200 {
			t.Errorf("healthz %d: the process itself is fine", status)
		}
	})

	t.Run("ARequestThatOutlastsItsDeadlineIs503AndWritesNothing", func(t *testing.T) {
		t.Parallel()
		b, proxy := serveThroughProxy(t, time.Second)
		before := b.rows(t)
		proxy.Freeze()
		start := time.Now()
		status, _, resp := b.do(t, b.c22, "POST", "/v1/tickets", ticketBody("C-0022", "Frozen"), "frozen-1")
		requireError(t, status, resp, http.StatusServiceUnavailable, "timeout")
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Errorf("answered after %s", elapsed)
		}
		if err := proxy.Pass(); err != nil {
			t.Fatal(err)
		}
		if after := b.rows(t); after != before {
			t.Errorf("rows %+v became %+v", before, after)
		}
	})
}

// serveThroughProxy serves the API on a pool whose every connection goes
// through a proxy the test controls; the bundle's own Store and rows read
// PostgreSQL directly.
func serveThroughProxy(t *testing.T, requestTimeout time.Duration) (*intakeBundle, *faulttest.Proxy) {
	t.Helper()
	b := setupIntake(t, 0)
	cfg := b.Pool.Config()
	proxy := faulttest.Start(t, net.JoinHostPort(cfg.ConnConfig.Host, itoa(cfg.ConnConfig.Port)))
	host, port, _ := net.SplitHostPort(proxy.Addr)
	cfg.ConnConfig.Host = host
	cfg.ConnConfig.Port = parsePort(t, port)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	t.Cleanup(proxy.Close) // first: a frozen proxy would hold the pool's goodbyes
	srv := httptest.NewServer(validated(t, api.New(api.Config{Logger: jobstest.Logger(), Pool: pool, Queue: b.queue, Desk: desk.New(pool, b.queue, b.DeskConfig), RequestTimeout: requestTimeout,
		RatePerKey: 1e6, BurstPerKey: 1e6})))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	if err := b.Store.UpsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0022", Email: "c-0022@example.com", Name: "C-0022"}); err != nil {
		t.Fatal(err)
	}
	return b, proxy
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func itoa(n uint16) string { return strconv.Itoa(int(n)) }

func parsePort(t *testing.T, s string) uint16 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

func TestEachKeyHasARequestRate(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	if _, err := b.Store.InsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0022", Email: "c22@example.com", Name: "C-0022"}); err != nil {
		t.Fatal(err)
	}
	// A token every 100s: the test's requests cannot earn a new one.
	ab := serveAPIWith(t, b, b.NewQueue(t), api.Config{RatePerKey: 0.01, BurstPerKey: 3})
	other := ab.key(t, "customer:C-0022")

	// Three requests fit in the burst; a replay of the first counts too.
	for i, idem := range []string{"k1", "k1", "k2"} {
		if status, _, resp := ab.do(t, ab.agent, "POST", "/v1/tickets", ticketBody("C-0022", "Hello"), idem); status != 202 {
			t.Fatalf("request %d: %d %v", i+1, status, resp)
		}
	}
	var tickets int
	count := func() int {
		_ = b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM tickets`).Scan(&tickets)
		return tickets
	}
	before := count()
	status, header, resp := ab.do(t, ab.agent, "POST", "/v1/tickets", ticketBody("C-0022", "One too many"), "k3")
	requireError(t, status, resp, http.StatusTooManyRequests, "rate_limited")
	if ra, err := strconv.Atoi(header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want whole seconds", header.Get("Retry-After"))
	}
	if count() != before {
		t.Errorf("a refused request wrote a ticket")
	}
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/tickets", ticketBody("C-0022", "Hello"), "k1")
	requireError(t, status, resp, http.StatusTooManyRequests, "rate_limited")

	// Another key has a rate of its own.
	if status, _, resp := ab.do(t, other, "GET", "/v1/tickets", nil, ""); status != 200 {
		t.Errorf("another key: %d %v", status, resp)
	}
}

func TestProviderStateIsVisibleToAgents(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	status, body := b.call(t, "GET", "/v1/provider")
	if status != 200 || body["state"] != "closed" || body["provider"] == "" {
		t.Errorf("GET /v1/provider: %d %v", status, body)
	}
	status, _, body = b.do(t, b.c22, "GET", "/v1/provider", nil, "")
	requireError(t, status, body, http.StatusForbidden, "forbidden")
}

func TestSuppressionsAreListedAndCleared(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	if err := b.Store.Suppress(b.Ctx, "Bram@Example.com", "5.1.1 User unknown", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	status, _, resp := b.do(t, b.agent, "GET", "/v1/suppressions", nil, "")
	list, _ := resp["suppressions"].([]any)
	if status != 200 || len(list) != 1 || list[0].(map[string]any)["address"] != "bram@example.com" {
		t.Fatalf("GET /v1/suppressions: %d %v", status, resp)
	}
	status, _, resp = b.do(t, b.c22, "GET", "/v1/suppressions", nil, "")
	requireError(t, status, resp, 403, "forbidden")
	req, _ := http.NewRequest("DELETE", b.url+"/v1/suppressions/bram@example.com", nil)
	req.Header.Set("Authorization", "Bearer "+b.agent)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("DELETE: %v %v", res, err)
	}
	res.Body.Close()
	status, _, resp = b.do(t, b.agent, "DELETE", "/v1/suppressions/bram@example.com", nil, "")
	requireError(t, status, resp, 404, "not_found")
}

func TestFailedSignInsAreThrottledPerAddress(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	q := b.NewQueue(t)
	ab := serveAPIWith(t, b, q, api.Config{AuthFailRate: 5})
	if status, _, _ := ab.do(t, ab.agent, "GET", "/v1/agents", nil, ""); status != 200 {
		t.Fatalf("the agent's key: %d", status)
	}
	var throttled, unauthorized int
	for i := range 20 {
		status, header, body := ab.do(t, fmt.Sprintf("hd_wrong%d", i), "GET", "/v1/tickets", nil, "")
		switch status {
		case 401:
			unauthorized++
		case 429:
			throttled++
			if header.Get("Retry-After") == "" || body["error"] != "too_many_failures" {
				t.Errorf("429 without Retry-After: %v %v", header, body)
			}
		default:
			t.Fatalf("a wrong key: %d", status)
		}
	}
	if unauthorized != 5 || throttled != 15 {
		t.Errorf("%d answered 401 and %d 429, want 5 and then 15", unauthorized, throttled)
	}
	if status, _, _ := ab.do(t, ab.agent, "GET", "/v1/agents", nil, ""); status != 200 {
		t.Errorf("the agent's key, after the flood from its address: %d, want 200", status)
	}
}

func TestMistakesAreAnsweredInTheAPIsOwnWords(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	ab := serveAPI(t, b, b.NewQueue(t), 0)
	status, _, resp := ab.do(t, ab.agent, "GET", "/v1/tickets?assignee=nobody", nil, "")
	requireError(t, status, resp, 400, "unknown_agent")
	status, _, resp = ab.do(t, ab.agent, "GET", "/v1/tickets?team=nowhere", nil, "")
	requireError(t, status, resp, 400, "unknown_team")
	status, _, resp = ab.do(t, ab.agent, "POST", "/v1/tickets/T-999999/replies", []byte(`{"body": "Hello."}`), "")
	requireError(t, status, resp, 404, "not_found")
	if resp["message"] != "ticket T-999999 not found" {
		t.Errorf("message %q, want the API's words", resp["message"])
	}
	status, _, resp = ab.do(t, ab.agent, "GET", "/v1/jobs/999999", nil, "")
	if status != 404 || resp["message"] != "job 999999 not found" {
		t.Errorf("an unknown job: %d %v", status, resp)
	}
	// An answer may quote what the caller sent, markup and all: no browser
	// may take it for a page.
	status, header, resp := ab.do(t, ab.agent, "GET", "/v1/no/%3Cscript%3Ealert(1)%3C%2Fscript%3E", nil, "")
	if status != 404 || header.Get("Content-Type") != "application/json" || header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%d, Content-Type %q, X-Content-Type-Options %q; want 404 JSON, nosniff (%v)", status,
			header.Get("Content-Type"), header.Get("X-Content-Type-Options"), resp)
	}
}

func TestAVerifiedKeyIsReadOnceASecondAndRevokedEverywhereWithinOne(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	q := b.NewQueue(t)
	one, two := serveAPI(t, b, q, 0), serveAPIWith(t, b, q, api.Config{})
	key := one.key(t, "agent:alice")
	began := time.Now()
	for range 20 {
		if status, _, resp := one.do(t, key, "GET", "/v1/agents", nil, ""); status != 200 {
			t.Fatalf("%d %v", status, resp)
		}
	}
	// One read a second at most, however long the requests took on this machine.
	if n, most := api.KeyLookups(one.server), int64(time.Since(began)/time.Second)+1; n > most {
		t.Errorf("20 requests read the key %d times in %v: want one a second at most", n, time.Since(began))
	}
	keys, err := b.Store.ListAPIKeys(b.Ctx, "agent:alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := b.Store.RevokeAPIKey(b.Ctx, k.ID); err != nil {
			t.Fatal(err)
		}
	}
	// The other process (another server over the same database) stops
	// believing the key too.
	for _, srv := range []*apiBundle{one, two} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, _, _ := srv.do(t, key, "GET", "/v1/agents", nil, "")
			if status == 401 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a revoked key still answers %d after 10s", status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
