package api_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
)

// scrape reads /metrics and parses the exposition as Prometheus does.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return families
}

// value is the value of the series of family with these labels, or -1.
func value(families map[string]*dto.MetricFamily, family string, labels map[string]string) float64 {
	f := families[family]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func TestMetricsAndRequestLogs(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	b.WithSMTP(t)
	var logs jobstest.LogBuffer
	logger := logs.Logger()
	q := b.StartQueue(t)
	ab := serveAPIWith(t, b, q, api.Config{Metrics: true})
	// serveAPIWith's server has the test logger; this one logs to logs.
	srv := httptest.NewServer(validated(t, api.New(api.Config{Logger: logger, Pool: b.Pool, Queue: q, Desk: b.Desk(q), Metrics: true,
		RatePerKey: 1e6, BurstPerKey: 1e6})))
	t.Cleanup(srv.Close)

	ticketID, jobID := b.OpenTicket(t, q, "Parcel", "Where is my parcel?")
	jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
	_, replyJob := b.Reply(t, q, ticketID, "It is on its way.")
	jobstest.WaitFor(t, q, replyJob, jobs.StateSucceeded, 10*time.Second)
	if err := q.RefreshGauges(b.Ctx); err != nil {
		t.Fatal(err)
	}

	req, _ := http.NewRequest("GET", srv.URL+"/v1/tickets/"+ticketID, nil)
	req.Header.Set("Authorization", "Bearer "+ab.agent)
	req.Header.Set(api.HeaderRequestID, "trace-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get(api.HeaderRequestID) != "trace-42" {
		t.Errorf("X-Request-Id %q, want the caller's echoed", resp.Header.Get(api.HeaderRequestID))
	}
	resp, err = http.Get(srv.URL + "/v1/tickets/" + ticketID) // no key: 401
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	made := resp.Header.Get(api.HeaderRequestID)
	if len(made) < 16 {
		t.Errorf("X-Request-Id %q, want one made for a request without", made)
	}
	// (On the other server: this one's log lines are counted below.)
	req, _ = http.NewRequest("GET", ab.url+"/healthz", nil)
	req.Header.Set(api.HeaderRequestID, "bad id\twith spaces")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(api.HeaderRequestID); got == "bad id\twith spaces" || len(got) < 16 {
		t.Errorf("X-Request-Id %q for a caller's id with spaces, want one made instead", got)
	}

	t.Run("OneLogLinePerRequest", func(t *testing.T) {
		var got []map[string]any
		for _, l := range logs.Lines() {
			if l["msg"] == "request" {
				got = append(got, l)
			}
		}
		if len(got) != 2 {
			t.Fatalf("%d request lines, want 2: %v", len(got), got)
		}
		first, second := got[0], got[1]
		if first["method"] != "GET" || first["route"] != "/v1/tickets/{id}" || first["status"] != float64(200) ||
			first["actor"] != "agent:alice" || first["request_id"] != "trace-42" || first["duration"] == nil {
			t.Errorf("first line %v", first)
		}
		if second["status"] != float64(401) || second["request_id"] != made || second["actor"] != "" {
			t.Errorf("second line %v", second)
		}
	})

	t.Run("TheExpositionParsesAndPassesPromlint", func(t *testing.T) {
		families := scrape(t, srv.URL)
		list := make([]*dto.MetricFamily, 0, len(families))
		for _, f := range families {
			list = append(list, f)
		}
		problems, err := promlint.NewWithMetricFamilies(list).Lint()
		if err != nil || len(problems) > 0 {
			t.Errorf("promlint: %v %v", problems, err)
		}
		for _, c := range []struct {
			family string
			labels map[string]string
		}{
			{"helpdesk_http_requests_total", map[string]string{"route": "/v1/tickets/{id}", "method": "GET", "code": "200"}},
			{"helpdesk_http_request_duration_seconds", map[string]string{"route": "/v1/tickets/{id}", "method": "GET"}},
			{"helpdesk_jobs", map[string]string{"kind": "triage", "state": "succeeded"}},
			{"helpdesk_jobs", map[string]string{"kind": "email_outbound", "state": "succeeded"}},
			{"helpdesk_job_duration_seconds", map[string]string{"kind": "triage", "outcome": "succeeded"}},
			{"helpdesk_provider_calls_total", map[string]string{"task": "classify", "outcome": "ok"}},
			{"helpdesk_smtp_deliveries_total", map[string]string{"outcome": "sent", "class": "2"}},
		} {
			if v := value(families, c.family, c.labels); v < 1 {
				t.Errorf("%s%v = %v, want at least 1", c.family, c.labels, v)
			}
		}
		for _, gauge := range []string{"helpdesk_smtp_relay_paused", "helpdesk_provider_breaker_open", "helpdesk_jobs_count_duration_seconds"} {
			if value(families, gauge, nil) < 0 {
				t.Errorf("%s is missing", gauge)
			}
		}
		if v := value(families, "helpdesk_jobs", map[string]string{"kind": "triage", "state": "dead_letter"}); v != 0 {
			t.Errorf("helpdesk_jobs{triage,dead_letter} = %v, want a series at 0", v)
		}
	})

	t.Run("WithoutMetricsThereIsNoEndpoint", func(t *testing.T) {
		plain := httptest.NewServer(api.New(api.Config{Logger: jobstest.Logger(), Pool: b.Pool, Queue: q, Desk: b.Desk(q)}))
		defer plain.Close()
		resp, err := http.Get(plain.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("/metrics without Metrics: %d", resp.StatusCode)
		}
	})
}

// A method is any token a client likes; the metrics keep one series a
// label value for the process's life, so a stranger's own methods are
// counted as "other", never one series each.
func TestAStrangersMethodsAddNoSeries(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	ab := serveAPIWith(t, b, b.NewQueue(t), api.Config{Metrics: true})
	for i := range 20 {
		req, _ := http.NewRequest(fmt.Sprintf("PROBE%d", i), ab.url+"/v1/tickets", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	families := scrape(t, ab.url)
	for _, m := range families["helpdesk_http_requests_total"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "method" && strings.HasPrefix(l.GetValue(), "PROBE") {
				t.Fatalf("a series for method %s", l.GetValue())
			}
		}
	}
	if value(families, "helpdesk_http_requests_total", map[string]string{"method": "other"}) < 20 {
		t.Error("the stranger's requests are not counted as method other")
	}
}
