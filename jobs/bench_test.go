package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"helpdesk/jobs/jobstest"
	"helpdesk/store"
)

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

// BenchmarkTriageThroughput measures tickets triaged per second end to end
// (three HTTP calls to the simulator, three transactions), next to River's
// own no-op job on the same database, client settings and worker count, so
// the ratio says what triage costs over the queue itself.
func BenchmarkTriageThroughput(b *testing.B) {
	// River fetches at most once per FetchCooldown; with its 100ms default
	// both sides would measure the fetch rate rather than the work.
	const workers, cooldown = 50, time.Millisecond

	b.Run("RiverNoopBaseline", func(b *testing.B) {
		bundle := jobstest.Setup(b)
		ws := river.NewWorkers()
		river.AddWorker(ws, river.WorkFunc(func(ctx context.Context, job *river.Job[noopArgs]) error { return nil }))
		client, err := river.NewClient(riverpgxv5.New(bundle.Pool), &river.Config{
			Logger:            jobstest.Logger(),
			Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
			Workers:           ws,
			FetchPollInterval: 50 * time.Millisecond,
			FetchCooldown:     cooldown,
		})
		if err != nil {
			b.Fatal(err)
		}
		params := make([]river.InsertManyParams, b.N)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := client.InsertMany(bundle.Ctx, params); err != nil {
			b.Fatal(err)
		}
		runUntilCompleted(b, bundle.Pool, b.N, client.Start, client.Stop)
	})

	b.Run("Triage", func(b *testing.B) {
		bundle := jobstest.Setup(b)
		bundle.Config.Workers, bundle.Config.FetchCooldown = workers, cooldown
		q := bundle.NewQueue(b)
		if _, err := bundle.Store.InsertCustomer(bundle.Ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "c1@example.com", Name: "Bench"}); err != nil {
			b.Fatal(err)
		}
		err := pgx.BeginFunc(bundle.Ctx, bundle.Pool, func(tx pgx.Tx) error {
			for i := range b.N {
				ticket, err := store.New(tx).InsertTicket(bundle.Ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: fmt.Sprintf("Charge %d", i)})
				if err != nil {
					return err
				}
				if _, err := store.New(tx).InsertMessage(bundle.Ctx, &store.InsertMessageParams{
					TicketID: ticket.ID, Direction: store.DirectionInbound, Author: "customer:C-0001",
					Body: "My card was charged twice for the same invoice; please refund one of them.",
				}); err != nil {
					return err
				}
				if _, err := q.EnqueueTriageTx(bundle.Ctx, tx, ticket.ID); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		runUntilCompleted(b, bundle.Pool, b.N, q.Start, q.Stop)
		if calls := bundle.Sim.TotalCalls(); calls != 3*b.N {
			b.Errorf("provider calls = %d, want %d", calls, 3*b.N)
		}
	})
}

// runUntilCompleted times from start until n jobs are completed and reports
// the rate as jobs/s.
func runUntilCompleted(b *testing.B, pool *pgxpool.Pool, n int, start, stop func(context.Context) error) {
	ctx := context.Background()
	b.ResetTimer()
	begin := time.Now()
	if err := start(ctx); err != nil {
		b.Fatal(err)
	}
	for {
		var done int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&done); err != nil {
			b.Fatal(err)
		}
		if done == n {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(begin)
	b.StopTimer()
	b.ReportMetric(float64(n)/elapsed.Seconds(), "jobs/s")
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = stop(stopCtx)
}
