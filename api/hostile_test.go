package api_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestEveryRouteRefusesWhatItCannotTakeCleanly sends what an attacker
// would to every operation api/openapi.json describes, as an admin, as a
// customer and as nobody: ids that cannot exist, queries of every shape,
// bodies that are not objects, that nest without end or are not UTF-8,
// and for each property of a body a value of the wrong type or a string
// no field should take. Whatever the answer, it is never a 5xx; a refusal
// is JSON {"error", "message"} that the document describes (serveAPI
// checks every answer against it) and, for the admin, changes no row.
func TestEveryRouteRefusesWhatItCannotTakeCleanly(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	doc, _ := loadSpec(t)
	empty := fingerprint(t, b)
	status, _, opened := b.do(t, b.c22, "POST", "/v1/tickets", ticketBody("C-0022", "Parcel"), "")
	if status != http.StatusAccepted {
		t.Fatalf("opening a ticket: %d %v", status, opened)
	}
	if fingerprint(t, b) == empty {
		t.Fatal("the fingerprint did not change when a ticket was opened: it would not see a refused request's change either")
	}
	ticketID := opened["ticket_id"].(string)

	sent, byClass := 0, map[string]int{}
	defer func() { t.Logf("%d requests; answers by class: %v", sent, byClass) }()
	callers := []struct{ name, key string }{{"Admin", b.agent}, {"Customer", b.c22}, {"Nobody", ""}}
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range doc.Paths.Map() {
			if !yield(p) {
				return
			}
		}
	})
	for _, path := range paths {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			if method == http.MethodHead || path == "/metrics" {
				continue // no body to judge; the metrics are text
			}
			t.Run(method+strings.ReplaceAll(path, "/", "_"), func(t *testing.T) {
				for _, c := range callers {
					for _, p := range hostileRequests(op, path, ticketID) {
						if c.key == "" && (p.body != nil || p.query != "") {
							continue // nobody is refused before a body or a query is read
						}
						check := c.name == "Admin" && method != http.MethodGet
						var before string
						if check {
							before = fingerprint(t, b)
						}
						status, answer := b.hostile(t, c.key, method, p)
						sent++
						byClass[fmt.Sprintf("%dxx", status/100)]++
						switch {
						case status >= 500:
							t.Errorf("%s: %s %s%s (%s): %d %s", c.name, method, p.path, p.query, p.what, status, answer)
						case status >= 400:
							var e map[string]any
							if json.Unmarshal(answer, &e) != nil || e["error"] == "" || e["message"] == "" ||
								fmt.Sprint(e["error"]) == "<nil>" || fmt.Sprint(e["message"]) == "<nil>" {
								t.Errorf("%s: %s %s%s (%s): %d %s, want JSON {error, message}", c.name, method, p.path, p.query, p.what, status, answer)
							}
							if check {
								if after := fingerprint(t, b); after != before {
									t.Errorf("%s: %s %s%s (%s) was refused with %d but changed rows", c.name, method, p.path, p.query, p.what, status)
								}
							}
						}
					}
				}
			})
		}
	}
}

// hostileRequest is one request of the sweep.
type hostileRequest struct {
	what        string
	path, query string
	body        []byte
	contentType string // application/json when empty
	idemKey     string
}

// hostileStrings are what no field, id or query should choke on.
var hostileStrings = []string{
	"", "\x00", "a\x00b", "\xff\xfe", "\xed\xa0\x80", strings.Repeat("x", 70_000), "../../etc/passwd",
	"' OR 1=1 --", "-1", "0", "99999999999999999999", "1e400", "NaN", "<script>alert(1)</script>",
	"a@b\r\nBcc: x@evil.example", "😀",
}

// hostileRequests are the sweep's requests of one operation: its path
// with each parameter given a hostile value (a real ticket for a ticket's
// id otherwise), each query parameter given one, and, when it takes a
// body, bodies of every wrong shape.
func hostileRequests(op *openapi3.Operation, template, ticketID string) []hostileRequest {
	var params []*openapi3.Parameter
	for _, p := range op.Parameters {
		params = append(params, p.Value)
	}
	plausible := func(name string) string {
		switch {
		case name == "id" && strings.HasPrefix(template, "/v1/tickets/"):
			return ticketID
		case name == "priority":
			return "high"
		default:
			return "1"
		}
	}
	fill := func(hostileName, hostileValue string) string {
		p := template
		for _, param := range params {
			if param.In != openapi3.ParameterInPath {
				continue
			}
			v := plausible(param.Name)
			if param.Name == hostileName {
				v = hostileValue
			}
			p = strings.ReplaceAll(p, "{"+param.Name+"}", url.PathEscape(v))
		}
		return p
	}
	plain := fill("", "")
	out := []hostileRequest{{what: "as it is", path: plain}}
	for _, param := range params {
		for _, s := range hostileStrings {
			if len(s) > 1000 {
				s = s[:1000] // a path or query that long is the server's to refuse as a whole
			}
			what := fmt.Sprintf("%s %s=%q", param.In, param.Name, trim(s))
			switch param.In {
			case openapi3.ParameterInPath:
				out = append(out, hostileRequest{what: what, path: fill(param.Name, s)})
			case openapi3.ParameterInQuery:
				out = append(out, hostileRequest{what: what, path: plain, query: "?" + url.QueryEscape(param.Name) + "=" + url.QueryEscape(s)})
			case openapi3.ParameterInHeader:
				if s != "" && !strings.ContainsAny(s, "\x00\r\n") {
					out = append(out, hostileRequest{what: what, path: plain, idemKey: s, body: []byte(`{}`)})
				}
			}
		}
	}
	if op.RequestBody != nil && op.RequestBody.Value.Content.Get("multipart/form-data") != nil {
		return append(out, hostileUploads(plain)...)
	}
	if op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
		return out
	}
	for _, raw := range []string{
		`null`, `[]`, `"x"`, `1`, `{}`, `{"unknown": 1}`, `{`, `{"a":`, `{}{}`, `{} x`,
		strings.Repeat("[", 100_000), strings.Repeat(`{"a":`, 50_000) + "1" + strings.Repeat("}", 50_000),
		"{\"body\": \"\xff\"}", `{"body": "\ud800"}`, `{"subject": 1e400}`, `{"a": 1, "a": 2}`,
	} {
		out = append(out, hostileRequest{what: "body " + trim(raw), path: plain, body: []byte(raw)})
	}
	schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
	// The body the wrong values go into: what it requires, and a text
	// when it takes one (a reply requires none, and without one would be
	// refused before its other fields are read).
	base := map[string]any{}
	for _, name := range append(slices.Clone(schema.Required), "body") {
		if p := schema.Properties[name]; p != nil {
			base[name] = plausibleValue(p.Value, ticketID)
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range schema.Properties {
			if !yield(n) {
				return
			}
		}
	}) {
		var wrong []any
		if prop := schema.Properties[name].Value; prop.Type.Is(openapi3.TypeString) || prop.Type.Includes(openapi3.TypeString) {
			for _, s := range hostileStrings {
				wrong = append(wrong, s)
			}
			wrong = append(wrong, 12345, true, []any{"x"}, map[string]any{})
		} else {
			wrong = append(wrong, "x", -1, 0, 1<<62, 1.5, true, []any{nil}, map[string]any{"a": 1}, strings.Repeat("y", 5000))
		}
		wrong = append(wrong, nil)
		for _, v := range wrong {
			body := map[string]any{}
			for k, x := range base {
				body[k] = x
			}
			body[name] = v
			raw, err := json.Marshal(body)
			if err != nil {
				continue
			}
			out = append(out, hostileRequest{what: fmt.Sprintf("%s=%s", name, trim(fmt.Sprint(v))), path: plain, body: raw})
		}
	}
	return out
}

// hostileUploads are multipart bodies of every wrong shape: file names
// no file should have, parts that are no file, several files, bodies that
// end early or never had a boundary.
func hostileUploads(path string) []hostileRequest {
	part := func(disposition, contentType, content string) string {
		p := "--b\r\nContent-Disposition: " + disposition + "\r\n"
		if contentType != "" {
			p += "Content-Type: " + contentType + "\r\n"
		}
		return p + "\r\n" + content + "\r\n"
	}
	var out []hostileRequest
	add := func(what, contentType, body string) {
		out = append(out, hostileRequest{what: what, path: path, body: []byte(body), contentType: contentType})
	}
	for _, name := range append(slices.Clone(hostileStrings), "a/b.txt", "..", ".", "CON", "a\\b.txt") {
		add("file name "+trim(name), "multipart/form-data; boundary=b", part(`form-data; name="file"; filename="`+name+`"`, "text/plain", "hello")+"--b--\r\n")
	}
	for _, disposition := range []string{`form-data; name="file"; filename*=utf-8''%00evil.exe`, `form-data; name="file"; filename*=x-unknown''a`,
		`form-data; name="file"`, `form-data; name="other"; filename="a.txt"`, `form-data`, `attachment; filename="a.txt"`, ""} {
		add("disposition "+trim(disposition), "multipart/form-data; boundary=b", part(disposition, "text/plain", "hello")+"--b--\r\n")
	}
	for _, contentType := range []string{"", "text/html", "application/x-msdownload", "image/svg+xml", "text/plain; charset=\"", "\xff/\xfe", strings.Repeat("a", 2000)} {
		add("part type "+trim(contentType), "multipart/form-data; boundary=b", part(`form-data; name="file"; filename="a.txt"`, contentType, "hello")+"--b--\r\n")
	}
	two := part(`form-data; name="file"; filename="a.txt"`, "text/plain", "a") + part(`form-data; name="file"; filename="b.txt"`, "text/plain", "b") + "--b--\r\n"
	add("two files", "multipart/form-data; boundary=b", two)
	add("an empty file", "multipart/form-data; boundary=b", part(`form-data; name="file"; filename="a.txt"`, "text/plain", "")+"--b--\r\n")
	add("no end", "multipart/form-data; boundary=b", part(`form-data; name="file"; filename="a.txt"`, "text/plain", "hello"))
	add("no parts", "multipart/form-data; boundary=b", "--b--\r\n")
	add("nothing", "multipart/form-data; boundary=b", "")
	add("no boundary", "multipart/form-data", "--b--\r\n")
	add("another boundary", "multipart/form-data; boundary=c", two)
	add("JSON", "application/json", `{"file": "hello"}`)
	return out
}

// plausibleValue is a value a property could take, for the properties a
// body needs while another is made wrong: the first of its enum, an id of
// its pattern, an address for an email.
func plausibleValue(s *openapi3.Schema, ticketID string) any {
	switch {
	case len(s.Enum) > 0:
		return s.Enum[0]
	case strings.HasPrefix(s.Pattern, "^C-"):
		return "C-0022"
	case strings.HasPrefix(s.Pattern, "^T-"):
		return ticketID
	case s.Format == "email":
		return "someone@example.com"
	case s.Type.Includes(openapi3.TypeString):
		return "plausible"
	case s.Type.Includes(openapi3.TypeInteger), s.Type.Includes(openapi3.TypeNumber):
		return 1
	case s.Type.Includes(openapi3.TypeBoolean):
		return true
	case s.Type.Includes(openapi3.TypeArray):
		return []any{}
	default:
		return map[string]any{}
	}
}

func trim(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s… (%d bytes)", s[:40], len(s))
	}
	return s
}

// hostile sends one request of the sweep and returns its status and body.
func (b *apiBundle) hostile(t *testing.T, key, method string, p hostileRequest) (int, []byte) {
	t.Helper()
	var body io.Reader
	if p.body != nil {
		body = strings.NewReader(string(p.body))
	}
	req, err := http.NewRequest(method, b.url+p.path+p.query, body)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, p.path, p.query, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if p.body != nil {
		req.Header.Set("Content-Type", cmp.Or(p.contentType, "application/json"))
	}
	if p.idemKey != "" {
		req.Header.Set("Idempotency-Key", p.idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s (%s): %v", method, p.path, p.query, p.what, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// fingerprint digests every row of the tables a request may write, to
// tell whether a request changed anything.
func fingerprint(t *testing.T, b *intakeBundle) string {
	t.Helper()
	var parts []string
	for _, table := range []string{"tickets", "messages", "customers", "agents", "agent_teams", "api_keys", "idempotency_keys",
		"attachments", "mailboxes", "webhooks", "saved_replies", "sla_policies", "calendars", "suppressions",
		"ticket_events", "ticket_participants", "outbound_emails", "river_job"} {
		parts = append(parts, fmt.Sprintf(`(SELECT md5(coalesce(string_agg(r::text, '|' ORDER BY r::text), '')) FROM %s r)`, table))
	}
	var sums []string
	if err := b.Pool.QueryRow(b.Ctx, `SELECT ARRAY[`+strings.Join(parts, ", ")+`]`).Scan(&sums); err != nil {
		t.Fatal(err)
	}
	return strings.Join(sums, ",")
}
