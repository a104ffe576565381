package faulttest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// BenchmarkServeEndToEnd measures the whole service as it ships: one
// `helpdesk serve` at its defaults (acknowledgements, auto-assignment to
// the least busy agent, the agents' notifications, mail through a relay),
// a provider that answers at once, and 16 clients POSTing 2,000 tickets
// of one customer to one team of three, once 1,000 of another customer's
// have been triaged and mailed, untimed. It reports the tickets triaged a
// second (from the first request to the last triage job done), the
// transactions committed a ticket (pg_stat_database), the commit-bound
// ceiling of the same run (one-row commits a second from 16 connections
// ÷ the transactions a ticket), the ratio of the two, the sessions
// waiting on a lock (pg_stat_activity every 20 ms) and serve's peak
// resident memory. Each ticket's notification is mailed, not awaited.
func BenchmarkServeEndToEnd(b *testing.B) {
	const (
		tickets = 2000
		warmUp  = 1000
		clients = 16
	)
	w := newWorldWith(b, simulator.DefaultSettings())
	ctx := context.Background()
	st := store.New(w.pool)
	for _, name := range []string{"alice", "bilal", "chloe"} {
		if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: name, DisplayName: name,
			Email: name + "@support.example.com", Teams: []string{"billing"}}); err != nil {
			b.Fatal(err)
		}
	}
	key, sha := api.NewAPIKey()
	if err := st.InsertAPIKey(ctx, "customer:C-0001", sha); err != nil {
		b.Fatal(err)
	}
	warmKey, warmSHA := api.NewAPIKey()
	if err := st.InsertAPIKey(ctx, "customer:C-0002", warmSHA); err != nil {
		b.Fatal(err)
	}
	// serve's own pool, not the fault suite's cap of ten connections.
	serve := w.start(b, "serve", map[string]string{"DATABASE_URL": w.dbURL})
	// What is timed is a service at work, not one starting: each of its
	// connections has planned its statements for the values of its first
	// five runs before it keeps a plan, 200 plans of each statement with
	// 40 connections, which a run of 2,000 tickets would count as its own.
	// The warm-up's tickets are another customer's, so that the duplicate
	// search of the tickets timed scores as many as without, and all of
	// their work, mail included, is done before the clock starts.
	postTickets(b, serve.url, warmKey, "C-0002", warmUp, clients)
	jobstest.AwaitCompleted(b, w.pool, jobs.TriageArgs{}.Kind(), warmUp)
	jobstest.AwaitIdle(b, w.pool)

	before := storetest.SettledCommits(b, w.pool)
	waiting := storetest.SampleLockWaits(w.pool)
	b.ResetTimer()
	begin := time.Now()
	postTickets(b, serve.url, key, "C-0001", tickets, clients)
	polls := jobstest.AwaitCompleted(b, w.pool, jobs.TriageArgs{}.Kind(), warmUp+tickets)
	elapsed := time.Since(begin)
	b.StopTimer()
	meanWaiting, samples := waiting()
	// The polls and the samples commit too, and so does the read of the
	// count before: leave them out.
	perTicket := float64(storetest.SettledCommits(b, w.pool)-before-int64(polls+samples)-1) / tickets
	rate := tickets / elapsed.Seconds()
	ceiling := storetest.OneRowCommitRate(b, w.pool, 4000, clients) / perTicket
	b.ReportMetric(rate, "tickets/s")
	b.ReportMetric(perTicket, "tx/ticket")
	b.ReportMetric(ceiling, "ceiling_tickets/s")
	b.ReportMetric(rate/ceiling, "ratio")
	b.ReportMetric(meanWaiting, "lock_waiting")
	if rss, ok := peakRSS(serve.cmd.Process.Pid); ok {
		b.ReportMetric(float64(rss)/(1<<20), "serve_peak_MiB")
	}
}

// postTickets opens n tickets of the customer through the API with key,
// from clients at once, each with an Idempotency-Key of its own.
func postTickets(b *testing.B, baseURL, key, customerID string, n, clients int) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				body := fmt.Sprintf(`{"customer_id": %q, "subject": "Charge %d", "body": "My card was charged twice for the same invoice; please refund one of them."}`, customerID, i)
				req, _ := http.NewRequest(http.MethodPost, baseURL+"/v1/tickets", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", customerID+"-"+strconv.FormatInt(i, 10))
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("ticket %d: %d %s", i, resp.StatusCode, bytes.TrimSpace(raw))
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// peakRSS is a process's peak resident memory (VmHWM) in bytes; false
// where /proc does not say.
func peakRSS(pid int) (int64, bool) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
