package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/console"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// world is a support team with the console served: alice and bilal in
// billing, a customer's triaged ticket, a relay, workers.
type world struct {
	*jobstest.Bundle
	queue  *jobs.Queue
	smtp   *smtptest.Server
	url    string
	keys   map[string]string // agent → API key
	ticket string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	b := jobstest.Setup(t)
	w := &world{Bundle: b, smtp: b.WithSMTP(t), keys: map[string]string{}}
	for _, a := range []store.UpsertAgentParams{
		{Name: "alice", DisplayName: "Alice", Email: "alice@support.example.com", Teams: []string{"billing"}},
		{Name: "bilal", DisplayName: "Bilal", Email: "bilal@support.example.com", Teams: []string{"billing"}},
	} {
		if err := b.Store.UpsertAgent(b.Ctx, &a); err != nil {
			t.Fatal(err)
		}
		key, sha := api.NewAPIKey()
		if err := b.Store.InsertAPIKey(b.Ctx, vocab.Agent(a.Name), sha); err != nil {
			t.Fatal(err)
		}
		w.keys[a.Name] = key
	}
	w.queue = b.StartQueue(t)
	w.url = serve(t, b, w.queue)
	id, job := b.OpenTicket(t, w.queue, "Charged twice for order 4711", "Dear support, my card was charged twice. Please refund one.")
	jobstest.WaitFor(t, w.queue, job, jobs.StateSucceeded, 30*time.Second)
	// Triage's team is the simulator's guess: make it billing's, nobody's.
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE tickets SET team = 'billing', assignee = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	w.ticket = id
	return w
}

// serve serves the API with the console mounted over the bundle's desk and
// q, until the test ends, and returns its URL.
func serve(tb testing.TB, b *jobstest.Bundle, q *jobs.Queue) string {
	tb.Helper()
	cases := b.Desk(q)
	srv := api.New(api.Config{Logger: jobstest.Logger(), Pool: b.Pool, Queue: q, Desk: cases, RatePerKey: 1e6, BurstPerKey: 1e6})
	c, err := console.New(cases, b.Pool, srv, jobstest.Logger())
	if err != nil {
		tb.Fatal(err)
	}
	srv.MountConsole(c)
	hs := httptest.NewServer(srv)
	tb.Cleanup(hs.Close)
	return hs.URL
}

// client is a browser without JavaScript: cookies, no redirects followed
// unless asked.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func (w *world) client(t *testing.T) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: w.url, http: &http.Client{Jar: jar}}
}

// signIn signs in with the agent's key.
func (c *client) signIn(key string) {
	c.t.Helper()
	status, body := c.post("/ui/login", url.Values{"key": {key}})
	if status != 200 || !strings.Contains(body, "Sign out") {
		c.t.Fatalf("sign in: %d %s", status, body)
	}
}

func (c *client) get(path string) (int, string) {
	c.t.Helper()
	resp, err := c.http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post sends a form from this site, as the page's own form does.
func (c *client) post(path string, form url.Values) (int, string) {
	c.t.Helper()
	return c.postBody(path, "application/x-www-form-urlencoded", form.Encode())
}

// postBody sends a body of the given type from this site, as a form with
// files does (multipart/form-data).
func (c *client) postBody(path, contentType, body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Origin", c.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
