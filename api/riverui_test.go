package api_test

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
)

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func uiRequest(t *testing.T, method, url, body string, set func(*http.Request)) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(req)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// serveUI serves the API with River UI mounted, with config's settings.
func serveUI(t *testing.T, b *jobstest.Bundle, q *jobs.Queue, config api.Config) *httptest.Server {
	t.Helper()
	config.Logger, config.Pool, config.Queue, config.Desk = jobstest.Logger(), b.Pool, q, b.Desk(q)
	config.RatePerKey, config.BurstPerKey = 1e6, 1e6
	srv := api.New(config)
	if err := srv.MountUI(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(b.Ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

func TestRiverUIIsForAgentsOnly(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	b.Config.TriageMaxAttempts = 1
	if err := b.Sim.SetMode(simulator.ModeOutage); err != nil {
		t.Fatal(err)
	}
	q := b.StartQueue(t)
	ab := serveAPI(t, b, q, 0)
	ts := serveUI(t, b, q, api.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}) // the test plays the proxy too
	customer := ab.key(t, "customer:C-0001")
	bearer := func(key string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key) }
	}
	basic := func(user, key string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth(user, key) }
	}

	t.Run("CallersWithoutAnAgentsKeyAreRefused", func(t *testing.T) {
		for _, c := range []struct {
			name string
			set  func(*http.Request)
			want int
		}{
			{"Anonymous", nil, 401},
			{"ACustomersBearerKey", bearer(customer), 403},
			{"ACustomersKeyAsBasic", basic("C-0001", customer), 403},
			{"AnAgentsKeyUnderAnotherName", basic("bob", ab.agent), 401},
			{"AnUnknownKey", bearer("nope"), 401},
			{"AnAgentsBearerKey", bearer(ab.agent), 200},
			{"AnAgentsKeyAsBasic", basic("alice", ab.agent), 200},
			{"ASessionCookieThatIsTheKeysHash", func(r *http.Request) {
				r.AddCookie(&http.Cookie{Name: "helpdesk_ui", Value: hex.EncodeToString(api.HashAPIKey(ab.agent))})
			}, 401},
		} {
			for _, path := range []string{"/riverui/api/queues", "/riverui/api/states", "/riverui/api/jobs?state=completed"} {
				if resp := uiRequest(t, "GET", ts.URL+path, "", c.set); resp.StatusCode != c.want {
					t.Errorf("%s GET %s: %d, want %d", c.name, path, resp.StatusCode, c.want)
				}
			}
		}
		for _, set := range []func(*http.Request){nil, basic("alice", ab.agent)} {
			// A browser sends a cached Basic login to every page: pages take
			// none, only a session.
			if resp := uiRequest(t, "GET", ts.URL+"/riverui/", "", set); resp.StatusCode != 303 || resp.Header.Get("Location") != "/riverui/login" {
				t.Errorf("the UI's page without a session: %d to %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
			}
		}
	})

	t.Run("WhatTheURLNamesIsTextOrRefused", func(t *testing.T) {
		for _, path := range []string{"/riverui/api/queues/%00", "/riverui/api/queues/%FF%FE", "/riverui/api/jobs?kinds=%00",
			"/riverui/api/jobs?queues=%FF", "/riverui/api/workflows/%FF%FE"} {
			if resp := uiRequest(t, "GET", ts.URL+path, "", bearer(ab.agent)); resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("GET %s: %d %s, want 400 JSON", path, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		}
		if resp := uiRequest(t, "GET", ts.URL+"/riverui/api/jobs?kinds=triage&queues=triage", "", bearer(ab.agent)); resp.StatusCode != 200 {
			t.Errorf("a filter of text: %d", resp.StatusCode)
		}
	})

	t.Run("ItsOwnRefusalsAreInTheAPIsShape", func(t *testing.T) {
		for _, tc := range []struct{ path, code string }{
			{"/riverui/api/jobs?limit=-1", "invalid_request"},
			{"/riverui/api/jobs/99999999999999999999", "invalid_request"},
			{"/riverui/api/jobs/123456789", "not_found"},
			{"/riverui/api/no-such-endpoint", "not_found"}, // River UI's router gives its page for it
		} {
			req, _ := http.NewRequest("GET", ts.URL+tc.path, nil)
			bearer(ab.agent)(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var answer map[string]any
			err = json.NewDecoder(resp.Body).Decode(&answer)
			resp.Body.Close()
			if err != nil || resp.StatusCode >= 500 || resp.StatusCode < 400 || answer["error"] != tc.code || answer["message"] == "" {
				t.Errorf("GET %s: %d %v (%v), want a refusal {error: %s, message}", tc.path, resp.StatusCode, answer, err, tc.code)
			}
		}
	})

	t.Run("TheLoginPageSetsAStrictHttpOnlyCookie", func(t *testing.T) {
		form := func(key string) func(*http.Request) {
			return func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }
		}
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/login", url.Values{"key": {customer}}.Encode(), form(customer)); resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
			t.Errorf("a customer's key: %d with cookies %v", resp.StatusCode, resp.Cookies())
		}
		resp := uiRequest(t, "POST", ts.URL+"/riverui/login", url.Values{"key": {ab.agent}}.Encode(), form(ab.agent))
		cookies := resp.Cookies()
		if resp.StatusCode != 303 || len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode ||
			cookies[0].Path != "/riverui" || cookies[0].Secure || strings.Contains(cookies[0].Value, ab.agent) {
			t.Fatalf("login: %d, cookies %+v", resp.StatusCode, cookies)
		}
		behindTLS := uiRequest(t, "POST", ts.URL+"/riverui/login", url.Values{"key": {ab.agent}}.Encode(), func(r *http.Request) {
			form(ab.agent)(r)
			r.Header.Set("X-Forwarded-Proto", "https") // a proxy that ends TLS
		})
		if c := behindTLS.Cookies(); len(c) != 1 || !c[0].Secure {
			t.Errorf("behind a TLS proxy the cookie is %+v, want Secure", c)
		}
		withCookie := func(r *http.Request) { r.AddCookie(cookies[0]) }
		if resp := uiRequest(t, "GET", ts.URL+"/riverui/api/queues", "", withCookie); resp.StatusCode != 200 {
			t.Errorf("with the session: %d", resp.StatusCode)
		}
		if resp := uiRequest(t, "GET", ts.URL+"/riverui/", "", withCookie); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("the UI's page with the session: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})

	t.Run("ARetryFromTheUIGivesTheWholeBudget", func(t *testing.T) {
		_, jobID := b.OpenTicket(t, q, "Parcel", "Where is my parcel?")
		jobstest.WaitFor(t, q, jobID, jobs.StateDeadLetter, 10*time.Second)
		body := `{"ids": ["` + strconv.FormatInt(jobID, 10) + `"]}`
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/retry", body, bearer(customer)); resp.StatusCode != 403 {
			t.Errorf("a customer's retry: %d", resp.StatusCode)
		}
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/retry", body, bearer(ab.agent)); resp.StatusCode != 200 {
			t.Fatalf("retry: %d", resp.StatusCode)
		}
		// River's own retry would leave attempt 1 and raise max_attempts to
		// 2: one more try. The service's gives the budget again: 1 of 1.
		s := jobstest.WaitFor(t, q, jobID, jobs.StateDeadLetter, 10*time.Second)
		if s.MaxAttempts != 1 || s.Attempt != 1 || len(s.Errors) != 2 {
			t.Errorf("after the UI's retry: attempt %d of %d, %d errors; want 1 of 1 and 2 errors", s.Attempt, s.MaxAttempts, len(s.Errors))
		}
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/retry", `{"ids": ["999999"]}`, bearer(ab.agent)); resp.StatusCode != 404 {
			t.Errorf("retry of an unknown job: %d", resp.StatusCode)
		}
	})
}

func TestRiverUICannotBeDrivenFromElsewhere(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	b.WithSMTP(t)
	q := b.NewQueue(t) // nothing works the jobs: they stay queued
	ab := serveAPI(t, b, q, 0)
	ts := serveUI(t, b, q, api.Config{UISessionTTL: time.Hour})
	if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "bilal", DisplayName: "Bilal", Email: "bilal@support.example.com"}); err != nil {
		t.Fatal(err)
	}
	bilal := ab.key(t, "agent:bilal") // an agent, not an admin
	basic := func(user, key string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth(user, key); r.Header.Set("Content-Type", "application/json") }
	}
	ids := func(id int64) string { return `{"ids": ["` + strconv.FormatInt(id, 10) + `"]}` }
	reply := func(t *testing.T) (msgID, jobID int64) {
		t.Helper()
		ticketID, _ := b.OpenTicket(t, q, "Parcel", "Where is my parcel?")
		msg, jobID := b.Reply(t, q, ticketID, "On its way.")
		return msg.ID, jobID
	}

	t.Run("ACrossSiteRequestChangesNothing", func(t *testing.T) {
		_, jobID := reply(t)
		resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/delete", ids(jobID), func(r *http.Request) {
			basic("alice", ab.agent)(r)
			r.Header.Set("Content-Type", "text/plain")
			r.Header.Set("Origin", "https://evil.example")
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		})
		if resp.StatusCode != 403 {
			t.Errorf("a cross-site delete: %d, want 403", resp.StatusCode)
		}
		if _, err := q.Get(b.Ctx, jobID); err != nil {
			t.Errorf("the job is gone: %v", err)
		}
		login := uiRequest(t, "POST", ts.URL+"/riverui/login", url.Values{"key": {ab.agent}}.Encode(), func(r *http.Request) {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		})
		if login.StatusCode != 403 || len(login.Cookies()) != 0 {
			t.Errorf("a cross-site login: %d with %v, want 403 and no session", login.StatusCode, login.Cookies())
		}
	})

	t.Run("NoPageMayBeFramedAndBodiesAreBounded", func(t *testing.T) {
		for _, path := range []string{"/riverui/login", "/riverui/api/queues"} {
			resp := uiRequest(t, "GET", ts.URL+path, "", basic("alice", ab.agent))
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s: Content-Security-Policy %q", path, csp)
			}
		}
		big := `{"ids": ["` + strings.Repeat("1", 2<<20) + `"]}`
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/retry", big, basic("alice", ab.agent)); resp.StatusCode != 400 && resp.StatusCode != 413 {
			t.Errorf("a 2 MiB body: %d, want it refused", resp.StatusCode)
		}
	})

	t.Run("ACancelledEmailFailsItsMailAndOnlyAdminsCancelOrPause", func(t *testing.T) {
		msgID, jobID := reply(t)
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/cancel", ids(jobID), basic("bilal", bilal)); resp.StatusCode != 403 {
			t.Errorf("a cancel by an agent who is no admin: %d, want 403", resp.StatusCode)
		}
		if resp := uiRequest(t, "PUT", ts.URL+"/riverui/api/queues/email/pause", "{}", basic("bilal", bilal)); resp.StatusCode != 403 {
			t.Errorf("pausing the email queue as no admin: %d, want 403", resp.StatusCode)
		}
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/delete", ids(jobID), basic("alice", ab.agent)); resp.StatusCode != 409 {
			t.Errorf("deleting the job of unsent mail: %d, want 409", resp.StatusCode)
		}
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/cancel", ids(jobID), basic("alice", ab.agent)); resp.StatusCode != 200 {
			t.Fatalf("an admin's cancel: %d", resp.StatusCode)
		}
		em, _ := b.Store.GetOutboundEmail(b.Ctx, msgID)
		msg, _ := b.Store.GetMessage(b.Ctx, msgID)
		notes := 0
		msgs, _ := b.Store.ListMessages(b.Ctx, msg.TicketID)
		for _, m := range msgs {
			if m.Direction == "note" && strings.Contains(m.Body, "cancelled by agent:alice") {
				notes++
			}
		}
		if em.State != store.DeliveryFailed || notes != 1 {
			t.Errorf("after the cancel: email %s, %d notes; want failed with a note", em.State, notes)
		}
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/api/jobs/delete", ids(jobID), basic("alice", ab.agent)); resp.StatusCode != 409 {
			t.Errorf("deleting a delivery's job: %d, want 409: it is the mail's history", resp.StatusCode)
		}
	})

	t.Run("ASessionIsOursEndsOnLogoutRevocationOrDisabling", func(t *testing.T) {
		signIn := func(key string) *http.Cookie {
			t.Helper()
			resp := uiRequest(t, "POST", ts.URL+"/riverui/login", url.Values{"key": {key}}.Encode(), func(r *http.Request) {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			})
			if resp.StatusCode != 303 || len(resp.Cookies()) != 1 {
				t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
			}
			return resp.Cookies()[0]
		}
		page := func(c *http.Cookie) int {
			return uiRequest(t, "GET", ts.URL+"/riverui/api/queues", "", func(r *http.Request) { r.AddCookie(c) }).StatusCode
		}
		c := signIn(ab.agent)
		var expires time.Time
		_ = b.Pool.QueryRow(b.Ctx, `SELECT expires_at FROM ui_sessions WHERE id_sha256 = $1`, api.HashAPIKey(c.Value)).Scan(&expires)
		if page(c) != 200 || time.Until(expires) > time.Hour || time.Until(expires) < 50*time.Minute || c.MaxAge != 3600 {
			t.Errorf("a new session: expires in %s, Max-Age %d, want the TTL of 1h", time.Until(expires).Round(time.Minute), c.MaxAge)
		}
		if resp := uiRequest(t, "POST", ts.URL+"/riverui/logout", "", func(r *http.Request) { r.AddCookie(c) }); resp.StatusCode != 303 {
			t.Errorf("logout: %d", resp.StatusCode)
		}
		if page(c) != 401 {
			t.Error("the session works after logout")
		}

		c = signIn(bilal)
		keys, _ := b.Store.ListAPIKeys(b.Ctx, "agent:bilal")
		if err := b.Store.RevokeAPIKey(b.Ctx, keys[0].ID); err != nil {
			t.Fatal(err)
		}
		if page(c) != 401 {
			t.Error("the session works after its key was revoked")
		}
		other := ab.key(t, "agent:bilal")
		c = signIn(other)
		if err := b.Store.DisableAgent(b.Ctx, "bilal"); err != nil {
			t.Fatal(err)
		}
		if page(c) != 401 {
			t.Error("the session works after its agent was disabled")
		}
	})
}
