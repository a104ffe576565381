package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// BenchmarkQueuePageAtAMillion serves the console's queue pages to a
// signed-in agent of billing on a desk that holds a million tickets and a
// million messages (storetest.Million: 10,000 of them open) and on one of
// 1,000 open tickets, and reports each page's p50 and p95 time (the
// server's whole answer, read to the end) and the million's p95 as a
// ratio to the small desk's. Each page is asked for 200 times, whatever
// -benchtime says: make bench-growth runs it.
func BenchmarkQueuePageAtAMillion(b *testing.B) {
	small := storetest.NewPool(b)
	if _, err := small.Exec(b.Context(), `
		INSERT INTO customers (id, email, name)
		SELECT 'C-' || lpad(g::text, 7, '0'), 'customer' || g || '@example.net', 'Customer ' || g FROM generate_series(1, 100) g;
		INSERT INTO tickets (customer_id, subject, team, priority, last_customer_message_at)
		SELECT 'C-' || lpad((1 + g % 100)::text, 7, '0'), 'Stored question ' || g, (ARRAY['billing', 'shipping', 'technical'])[1 + g % 3],
		       1 + g % 4, now() - make_interval(secs => g)
		FROM generate_series(1, 1000) g;
		ANALYZE`); err != nil {
		b.Fatal(err)
	}
	desks := []struct {
		name string
		url  string
		jar  http.CookieJar
	}{{name: "Thousand"}, {name: "Million"}}
	for i, pool := range []*jobstest.Bundle{jobstest.SetupOn(b, small), jobstest.SetupOn(b, storetest.NewPoolFrom(b, storetest.Million))} {
		desks[i].url, desks[i].jar = serveConsole(b, pool)
	}
	pages := []string{"/ui/?view=all", "/ui/?view=unassigned", "/ui/?view=all&page=20", "/ui/?view=all&q=question+stored", "/ui/?view=pending"}
	for _, page := range pages {
		var smallP95 time.Duration
		for _, d := range desks {
			name := d.name + "/" + strings.NewReplacer("/ui/?", "", "&", ",", "=", ":", "+", " ").Replace(page)
			b.Run(name, func(b *testing.B) {
				client := &http.Client{Jar: d.jar}
				var took []time.Duration
				for range 200 {
					start := time.Now()
					resp, err := client.Get(d.url + page)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("%s: status %d", page, resp.StatusCode)
					}
					took = append(took, time.Since(start))
				}
				slices.Sort(took)
				p95 := took[len(took)*95/100]
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(p95.Microseconds())/1000, "p95-ms")
				if d.name == "Thousand" {
					smallP95 = p95
				} else {
					b.ReportMetric(float64(p95)/float64(smallP95), "p95_ratio_to_thousand")
				}
			})
		}
	}
}

// serveConsole serves the API and the console over the bundle's database
// and signs in alice of billing, returning the server's URL and her cookies.
func serveConsole(b *testing.B, bundle *jobstest.Bundle) (string, http.CookieJar) {
	b.Helper()
	if err := bundle.Store.UpsertAgent(bundle.Ctx, &store.UpsertAgentParams{Name: "alice", DisplayName: "Alice",
		Email: "alice@support.example.com", Teams: []string{"billing"}}); err != nil {
		b.Fatal(err)
	}
	key, sha := api.NewAPIKey()
	if err := bundle.Store.InsertAPIKey(bundle.Ctx, vocab.Agent("alice"), sha); err != nil {
		b.Fatal(err)
	}
	base := serve(b, bundle, bundle.NewQueue(b))
	jar, _ := cookiejar.New(nil)
	req, _ := http.NewRequest(http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := (&http.Client{Jar: jar}).Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("sign in: status %d", resp.StatusCode)
	}
	return base, jar
}
