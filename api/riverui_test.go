package api_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"helpdesk/api"
	"helpdesk/jobs"
	"helpdesk/jobs/jobstest"
	"helpdesk/provider/simulator"
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

func TestRiverUIIsForAgentsOnly(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	b.Config.TriageMaxAttempts = 1
	if err := b.Sim.SetMode(simulator.ModeOutage); err != nil {
		t.Fatal(err)
	}
	q := b.StartQueue(t)
	ab := serveAPI(t, b, q, 0)
	srv := api.New(api.Config{Logger: jobstest.Logger(), Pool: b.Pool, Queue: q, Desk: b.Desk(q), RatePerKey: 1e6, BurstPerKey: 1e6})
	if err := srv.MountUI(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(b.Ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
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
		} {
			for _, path := range []string{"/riverui/api/queues", "/riverui/api/states", "/riverui/api/jobs?state=completed"} {
				if resp := uiRequest(t, "GET", ts.URL+path, "", c.set); resp.StatusCode != c.want {
					t.Errorf("%s GET %s: %d, want %d", c.name, path, resp.StatusCode, c.want)
				}
			}
		}
		if resp := uiRequest(t, "GET", ts.URL+"/riverui/", "", nil); resp.StatusCode != 303 || resp.Header.Get("Location") != "/riverui/login" {
			t.Errorf("the UI's page without a session: %d to %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
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
