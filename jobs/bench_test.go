package jobs_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// benchArgs are the jobs of a benchmark's own River client, which do
// whatever work the benchmark gives them.
type benchArgs struct{}

func (benchArgs) Kind() string { return "bench" }

// BenchmarkTriageThroughput measures tickets triaged per second end to end
// (three HTTP calls to the simulator, three transactions), next to River's
// own no-op job on the same database, client settings and worker count, so
// the ratio says what triage costs over the queue itself.
func BenchmarkTriageThroughput(b *testing.B) {
	// River fetches at most once per FetchCooldown; with its 100ms default
	// both sides would measure the fetch rate rather than the work.
	const workers, cooldown = 50, time.Millisecond

	b.Run("RiverNoopBaseline", func(b *testing.B) {
		runNoops(b, river.QueueDefault, workers, cooldown)
	})

	b.Run("Triage", func(b *testing.B) {
		bundle := jobstest.Setup(b)
		bundle.Config.TriageWorkers, bundle.Config.FetchCooldown = workers, cooldown
		q := bundle.NewQueue(b)
		queueTickets(b, bundle, q, "C-0001", b.N)
		w := bundle.NewWorkers(b, q)
		runUntilCompleted(b, bundle.Pool, jobs.TriageArgs{}.Kind(), "ticket", b.N, w.Start, w.Stop)
		if calls := bundle.Sim.TotalCalls(); calls != 3*b.N {
			b.Errorf("provider calls = %d, want %d", calls, 3*b.N)
		}
	})
}

// runNoops works b.N jobs that do nothing on a River client of its own
// with the given queue, workers and fetch cooldown, and returns jobs/s.
func runNoops(b *testing.B, queue string, workers int, cooldown time.Duration) float64 {
	bundle := jobstest.Setup(b)
	client := benchJobs(b, bundle, queue, workers, cooldown, b.N, func(context.Context) error { return nil })
	return runUntilCompleted(b, bundle.Pool, benchArgs{}.Kind(), "job", b.N, client.Start, client.Stop).Rate
}

// benchJobs makes a River client, not started, whose queue works up to
// workers jobs at once with the given fetch cooldown (River's poll
// interval, as serve), and inserts n jobs into it that each call work.
func benchJobs(b *testing.B, bundle *jobstest.Bundle, queue string, workers int, cooldown time.Duration, n int, work func(context.Context) error) *river.Client[pgx.Tx] {
	b.Helper()
	ws := river.NewWorkers()
	river.AddWorker(ws, river.WorkFunc(func(ctx context.Context, _ *river.Job[benchArgs]) error { return work(ctx) }))
	client, err := river.NewClient(riverpgxv5.New(bundle.Pool), &river.Config{
		Logger:        jobstest.Logger(),
		Queues:        map[string]river.QueueConfig{queue: {MaxWorkers: workers}},
		Workers:       ws,
		FetchCooldown: cooldown,
	})
	if err != nil {
		b.Fatal(err)
	}
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: benchArgs{}, InsertOpts: &river.InsertOpts{Queue: queue}}
	}
	if _, err := client.InsertMany(bundle.Ctx, params); err != nil {
		b.Fatal(err)
	}
	return client
}

// runUntilCompleted times from start until n more jobs are completed, each
// one unit of work ("email": the rate in emails/s), and reports the rate
// and what each unit cost (storetest.Cost).
func runUntilCompleted(b *testing.B, pool *pgxpool.Pool, kind, unit string, n int, start, stop func(context.Context) error) storetest.Measured {
	ctx := context.Background()
	before := jobstest.CompletedJobs(b, pool, kind)
	b.ResetTimer()
	cost := storetest.MeasureCost(b, pool)
	begin := time.Now()
	if err := start(ctx); err != nil {
		b.Fatal(err)
	}
	jobstest.AwaitCompleted(b, pool, kind, before+n)
	elapsed := time.Since(begin)
	used := cost()
	b.StopTimer()
	m := storetest.Measure(n, float64(n)/elapsed.Seconds(), used)
	b.ReportMetric(m.Rate, unit+"s/s")
	used.Report(b, n, unit)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = stop(stopCtx)
	return m
}

// warmUpJobs is how many jobs warmUp runs.
const warmUpJobs = 500

// warmUp works warmUpJobs jobs of the kind, queued by the caller, from
// start until they are completed, then stops, before a benchmark times
// its own: what it times is then a service at work, not one starting.
// Each backend that the pool opens plans each statement anew for its
// first five runs before it weighs a generic plan, and loads the catalog
// of every table the statement touches: in a triage of a thousand
// tickets from twenty new backends that was about a third of the
// database's CPU, which a running service pays once, when its
// connections open. The floor is warmed the same way.
func warmUp(b *testing.B, pool *pgxpool.Pool, kind string, start, stop func(context.Context) error) {
	b.Helper()
	before := jobstest.CompletedJobs(b, pool, kind)
	ctx := context.Background()
	if err := start(ctx); err != nil {
		b.Fatal(err)
	}
	jobstest.AwaitCompleted(b, pool, kind, before+warmUpJobs)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := stop(stopCtx); err != nil {
		b.Fatal(err)
	}
}

// benchMail is what bareSend sends when its server has no delivery yet.
var benchMail = []byte("From: support@helpdesk.example.com\r\nTo: c1@example.com\r\nSubject: Re: Hello [#T-500001]\r\n" +
	"Message-Id: <bench@helpdesk.example.com>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello back.\r\n")

// bareSend sends the bytes of the newest mail the server got (a small
// reply when it has none) n times from the given number of goroutines
// with a bare go-smtp client, and returns the mails sent a second.
func bareSend(b *testing.B, srv *smtptest.Server, n, workers int) float64 {
	raw := benchMail
	if got := srv.Deliveries(); len(got) > 0 {
		raw = got[len(got)-1].Raw
	}
	var next atomic.Int64
	begin := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := smtptest.Send(srv.Addr, "support@helpdesk.example.com", "c1@example.com", raw); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(begin).Seconds()
}

// BenchmarkEmailThroughput measures replies delivered per second through
// the whole path (River job, database reads and writes, rendering, SMTP to
// the fake server on loopback), next to a bare go-smtp client sending the
// same bytes to the same kind of server with the same concurrency.
func BenchmarkEmailThroughput(b *testing.B) {
	const workers = 10

	b.Run("BareGoSMTPBaseline", func(b *testing.B) {
		srv := smtptest.Start(b)
		b.ResetTimer()
		b.ReportMetric(bareSend(b, srv, b.N, workers), "emails/s")
		if got := len(srv.Deliveries()); got != b.N {
			b.Errorf("%d deliveries, want %d", got, b.N)
		}
	})

	// The whole path renders what ships: text and HTML with the quoted
	// customer message; WithAttachment also carries a 100 KiB file.
	wholePath := func(b *testing.B, attachment []byte, shipped bool) storetest.Measured {
		bundle := jobstest.Setup(b)
		srv := bundle.WithSMTP(b)
		bundle.Config.EmailWorkers, bundle.Config.FetchCooldown = workers, time.Millisecond
		if shipped { // serve's defaults: 20 email workers, the default cooldown and poll interval
			bundle.Config.EmailWorkers, bundle.Config.FetchCooldown, bundle.Config.FetchPollInterval = 0, 0, 0
		}
		q := bundle.NewQueue(b)
		// The warm-up's replies are on a ticket of their own, so that the
		// replies timed have as many before them in their thread as without.
		replies(b, bundle, q, warmUpJobs, attachment)
		warming := bundle.NewWorkers(b, q)
		warmUp(b, bundle.Pool, jobs.EmailArgs{}.Kind(), warming.Start, warming.Stop)
		replies(b, bundle, q, b.N, attachment)
		w := bundle.NewWorkers(b, q)
		opened := srv.Connections()
		m := runUntilCompleted(b, bundle.Pool, jobs.EmailArgs{}.Kind(), "email", b.N, w.Start, w.Stop)
		if got := len(srv.Deliveries()); got != warmUpJobs+b.N {
			b.Errorf("%d deliveries, want %d", got, warmUpJobs+b.N)
		}
		// Sessions opened for the emails timed: a session per email would
		// be 1 (the floor's).
		b.ReportMetric(float64(srv.Connections()-opened)/float64(b.N), "smtp_sessions/email")
		// The baseline, in the same run: the bytes of the last mail sent
		// again as many times by a bare go-smtp client.
		bare := bareSend(b, srv, b.N, workers)
		b.ReportMetric(bare, "baseline_emails/s")
		b.ReportMetric(m.Rate/bare, "ratio")
		return m
	}
	// River's own ceiling at serve's settings, for scale: the same number
	// of jobs that do nothing, against the same bare sender.
	b.Run("RiverNoopAsShipped", func(b *testing.B) {
		rate := runNoops(b, jobs.QueueEmail, jobs.DefaultEmailWorkers, jobs.DefaultFetchCooldown)
		bare := bareSend(b, smtptest.Start(b), b.N, workers)
		b.ReportMetric(bare, "baseline_emails/s")
		b.ReportMetric(rate/bare, "ratio")
	})
	// The least a delivery that keeps its guarantees does, at serve's
	// settings: a River job that commits once before the send (the bytes
	// kept before the first attempt) and once after it (the outcome),
	// around a bare send of the same bytes. No code doing more gets above
	// its ratio on this machine.
	b.Run("FloorTwoCommitsAroundASendAsShipped", func(b *testing.B) {
		bundle := jobstest.Setup(b)
		srv := smtptest.Start(b)
		commit := storetest.OneRowCommits(b, bundle.Pool)
		work := func(ctx context.Context) error {
			if err := commit(ctx); err != nil {
				return err
			}
			if err := smtptest.Send(srv.Addr, "support@helpdesk.example.com", "c1@example.com", benchMail); err != nil {
				return err
			}
			return commit(ctx)
		}
		warming := benchJobs(b, bundle, jobs.QueueEmail, jobs.DefaultEmailWorkers, jobs.DefaultFetchCooldown, warmUpJobs, work)
		warmUp(b, bundle.Pool, benchArgs{}.Kind(), warming.Start, warming.Stop)
		client := benchJobs(b, bundle, jobs.QueueEmail, jobs.DefaultEmailWorkers, jobs.DefaultFetchCooldown, b.N, work)
		floor := runUntilCompleted(b, bundle.Pool, benchArgs{}.Kind(), "email", b.N, client.Start, client.Stop)
		floors["email"] = floor
		bare := bareSend(b, srv, b.N, workers)
		b.ReportMetric(bare, "baseline_emails/s")
		b.ReportMetric(floor.Rate/bare, "ratio")
	})
	// What ships, and its rate ÷ the floor's just before (of_floor).
	b.Run("WholePathAsShipped", func(b *testing.B) { storetest.ReportOfFloor(b, floors["email"], wholePath(b, nil, true)) })
	b.Run("WholePath", func(b *testing.B) { wholePath(b, nil, false) })
	b.Run("WholePathWithAttachment", func(b *testing.B) { wholePath(b, bytes.Repeat([]byte("%PDF-1.4 \x00\xff"), 100<<10/12), false) })
}

// replies opens a ticket and writes n replies of an agent to it, with
// their email jobs, in one transaction, each reply with a copy of
// attachment when there is one.
func replies(b *testing.B, bundle *jobstest.Bundle, q *jobs.Queue, n int, attachment []byte) {
	b.Helper()
	ticketID, _ := bundle.OpenTicket(b, q, "Hello", "Hi.")
	err := store.Run(bundle.Ctx, bundle.Pool, func(tx *store.Tx) error {
		cases := bundle.Desk(q)
		for range n {
			p := &desk.ReplyParams{TicketID: ticketID, Author: "agent:alice", Body: "Hello back."}
			if attachment != nil {
				a, err := cases.StoreUploadTx(bundle.Ctx, tx, &desk.Upload{Agent: "alice", Filename: "invoice.pdf",
					ContentType: "application/pdf", Content: attachment})
				if err != nil {
					return err
				}
				p.Attachments = []int64{a.ID}
			}
			if _, _, err := cases.CreateReplyTx(bundle.Ctx, tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReplyLatencyUnderTriageBacklog measures how long a reply takes
// from its commit to the fake SMTP server while triage jobs wait on a
// provider that takes 3s a call, with serve's worker counts. OwnQueue is
// what ships: 500 triage jobs wait and replies have a queue of their own.
// SharedQueueAsBefore puts each email job on the triage queue, as the
// single queue did before, behind only 40 triage jobs.
func BenchmarkReplyLatencyUnderTriageBacklog(b *testing.B) {
	run := func(b *testing.B, backlog int, queueOfReplies string) {
		bundle := jobstest.Setup(b)
		srv := bundle.WithSMTP(b)
		slowProvider(b, bundle, 3*time.Second)
		q := bundle.StartQueue(b)
		triageBacklog(b, bundle, q, backlog)
		ticketID, _ := bundle.OpenTicket(b, q, "Hello", "Hi.")
		var total time.Duration
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			var jobID int64
			err := store.Run(bundle.Ctx, bundle.Pool, func(tx *store.Tx) (err error) {
				if _, jobID, err = bundle.Desk(q).CreateReplyTx(bundle.Ctx, tx, &desk.ReplyParams{TicketID: ticketID, Author: "agent:alice", Body: "Hello back."}); err != nil {
					return err
				}
				_, err = tx.Exec(bundle.Ctx, `UPDATE river_job SET queue = $2 WHERE id = $1`, jobID, queueOfReplies)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			jobstest.WaitFor(b, q, jobID, jobs.StateSucceeded, 5*time.Minute)
			total += time.Since(start)
			if got := len(srv.Deliveries()); got != i+1 {
				b.Fatalf("%d deliveries after %d replies", got, i+1)
			}
		}
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/reply")
	}
	b.Run("OwnQueue", func(b *testing.B) { run(b, 500, jobs.QueueEmail) })
	// More tickets than serve's 50 triage workers, so that a reply in
	// their queue waits for one of them.
	b.Run("SharedQueueAsBefore", func(b *testing.B) { run(b, 60, jobs.QueueTriage) })
}

// BenchmarkMetricsOn100kJobs measures what a scrape costs with 100,000
// jobs in River's table: the periodic count by kind and state
// (RefreshGauges, once per HELPDESK_METRICS_INTERVAL) and the exposition
// itself, which reads only memory.
func BenchmarkMetricsOn100kJobs(b *testing.B) {
	bundle := jobstest.Setup(b)
	q := bundle.NewQueue(b)
	if _, err := bundle.Pool.Exec(bundle.Ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, finalized_at)
		SELECT '{}', (ARRAY['triage', 'email_outbound', 'webhook'])[1 + i % 3], 5, 'triage',
			(ARRAY['completed', 'completed', 'completed', 'available', 'discarded'])[1 + i % 5]::river_job_state,
			i % 2, CASE WHEN i % 5 IN (0, 1, 2, 4) THEN now() END
		FROM generate_series(0, 99999) i`); err != nil {
		b.Fatal(err)
	}
	if _, err := bundle.Pool.Exec(bundle.Ctx, `ANALYZE river_job`); err != nil {
		b.Fatal(err)
	}
	b.Run("CountJobs", func(b *testing.B) {
		for b.Loop() {
			if err := q.RefreshGauges(bundle.Ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Scrape", func(b *testing.B) {
		h := metrics.Handler()
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != 200 {
				b.Fatal(rec.Code)
			}
		}
	})
}
