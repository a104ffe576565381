package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/store"
)

// hostileValues are what no path, query or form field should choke on.
var hostileValues = []string{
	"", "\x00", "a\x00b", "\xff\xfe", "\xed\xa0\x80", strings.Repeat("x", 5000), "../../etc/passwd", "%00",
	"' OR 1=1 --", "-1", "0", "99999999999999999999", "1e400", "NaN", "<script>alert(1)</script>",
	"a@b\r\nBcc: x@evil.example", "😀", "open\x00", "T-1",
}

// TestEveryConsolePageRefusesWhatItCannotTakeCleanly sends a signed-in
// agent's browser every hostile value in every path parameter, query
// parameter and form field the console reads, and bodies that are no form:
// whatever it is, the answer is never a 5xx, and a refusal is a page that
// says why.
func TestEveryConsolePageRefusesWhatItCannotTakeCleanly(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.client(t)
	c.signIn(w.keys["alice"])
	// The ticket's message to accept as held, and the attachment: ids of
	// the right shape that name nothing.
	routes := []struct {
		method, path string // {id} is the ticket; {x} another id
		fields       []string
	}{
		{"GET", "/ui/", []string{"view", "team", "assignee", "q", "status", "priority", "page", "done"}},
		{"GET", "/ui/tickets/{id}", []string{"saved", "done"}},
		{"GET", "/ui/tickets/{id}/attachments/{x}", nil},
		{"GET", "/ui/saved-replies", []string{"done"}},
		{"GET", "/ui/static/{x}", nil},
		{"POST", "/ui/tickets/{id}/reply", []string{"body", "status", "seen_message"}},
		{"POST", "/ui/tickets/{id}/note", []string{"body", "seen_message"}},
		{"POST", "/ui/tickets/{id}/change", []string{"status", "priority", "assignee", "team"}},
		{"POST", "/ui/tickets/{id}/take", nil},
		{"POST", "/ui/tickets/{id}/held/{x}/accept", []string{"as"}},
		{"POST", "/ui/tickets/{id}/presence", []string{"activity"}},
		{"POST", "/ui/saved-replies", []string{"title", "body", "team"}},
		{"POST", "/ui/saved-replies/{x}/delete", nil},
	}
	sent := 0
	send := func(method, path, contentType, body string) {
		t.Helper()
		sent++
		var status int
		var page string
		if method == "GET" {
			status, page = c.get(path)
		} else {
			status, page = c.postBody(path, contentType, body)
		}
		if status >= 500 || (status >= 400 && strings.TrimSpace(page) == "") {
			t.Errorf("%s %s (%q): %d\n%s", method, path, trimValue(body), status, page)
		}
	}
	for _, r := range routes {
		fill := func(id, x string) string {
			return strings.NewReplacer("{id}", url.PathEscape(id), "{x}", url.PathEscape(x)).Replace(r.path)
		}
		for _, v := range hostileValues {
			send(r.method, fill(v, "1"), "", "")
			send(r.method, fill(w.ticket, v), "", "")
			for _, f := range r.fields {
				form := url.Values{f: {v}}
				if r.method == "GET" {
					send("GET", fill(w.ticket, "1")+"?"+form.Encode(), "", "")
				} else {
					send("POST", fill(w.ticket, "1"), "application/x-www-form-urlencoded", form.Encode())
				}
			}
		}
		if r.method != "POST" {
			continue
		}
		for _, body := range []struct{ contentType, body string }{
			{"application/x-www-form-urlencoded", "body=%zz&status=%"},
			{"application/x-www-form-urlencoded", strings.Repeat("a=1&", 100_000)},
			{"multipart/form-data", "--b\r\n"},
			{"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"body\"\r\n\r\nno end"},
			{"multipart/form-data; boundary=" + strings.Repeat("b", 100), "--x--"},
			{"application/json", `{"body": "hello"}`},
			{"text/plain", "body=hello"},
			{"", "body=hello"},
		} {
			send("POST", fill(w.ticket, "1"), body.contentType, body.body)
		}
	}
	// Nobody signed in: every page but the sign-in's sends the browser
	// there, and no form does anything.
	nobody := w.client(t)
	nobody.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, r := range routes {
		if strings.HasPrefix(r.path, "/ui/static/") {
			continue
		}
		path := strings.NewReplacer("{id}", w.ticket, "{x}", "1").Replace(r.path)
		sent++
		var status int
		if r.method == "GET" {
			status, _ = nobody.get(path)
		} else {
			status, _ = nobody.post(path, url.Values{"body": {"from nobody"}})
		}
		if status != http.StatusSeeOther && status != http.StatusUnauthorized && status != http.StatusForbidden {
			t.Errorf("nobody: %s %s: %d, want to be sent to sign in or refused", r.method, path, status)
		}
	}
	if msgs, err := w.Store.ListMessages(w.Ctx, w.ticket); err != nil || slices.ContainsFunc(msgs, func(m *store.Message) bool { return m.Body == "from nobody" }) {
		t.Errorf("a form posted by nobody was kept (%v)", err)
	}
	// Signing in with what is no key.
	stranger := w.client(t)
	for _, v := range hostileValues {
		sent++
		status, page := stranger.post("/ui/login", url.Values{"key": {v}})
		if status != http.StatusUnauthorized && status != http.StatusBadRequest || strings.Contains(page, "Sign out") {
			t.Errorf("signing in with %q: %d", trimValue(v), status)
		}
	}
	t.Logf("%d requests", sent)
}

func trimValue(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
