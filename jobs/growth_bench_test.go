package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// BenchmarkTriageAtAMillion runs triage with serve's defaults on a
// database that already holds a million tickets and a million messages
// (storetest.Million) and on an empty one, in turns, and reports each
// million turn's rate as a ratio to the empty turn before it. Each turn
// triages the same number of tickets, whatever -benchtime says: make
// bench-growth runs it.
func BenchmarkTriageAtAMillion(b *testing.B) {
	empty := jobstest.Setup(b)
	million := jobstest.SetupOn(b, storetest.NewPoolFrom(b, storetest.Million))
	for _, bundle := range []*jobstest.Bundle{empty, million} {
		bundle.Config.FetchPollInterval = 0 // serve's default: River's
		if _, err := bundle.Store.InsertCustomer(bundle.Ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "c1@example.com", Name: "Bench"}); err != nil {
			b.Fatal(err)
		}
	}
	const tickets = 2000
	kind := jobs.TriageArgs{}.Kind()
	turn := func(b *testing.B, bundle *jobstest.Bundle) float64 {
		var before int
		if err := bundle.Pool.QueryRow(bundle.Ctx, `SELECT count(*) FROM river_job WHERE state = 'completed' AND kind = $1`, kind).Scan(&before); err != nil {
			b.Fatal(err)
		}
		q := bundle.NewQueue(b)
		queueMoreTickets(b, bundle, q, "C-0001", tickets)
		w := bundle.NewWorkers(b, q)
		b.ResetTimer()
		begin := time.Now()
		if err := w.Start(bundle.Ctx); err != nil {
			b.Fatal(err)
		}
		jobstest.AwaitCompleted(b, bundle.Pool, kind, before+tickets)
		elapsed := time.Since(begin)
		b.StopTimer()
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(stopCtx)
		rate := tickets / elapsed.Seconds()
		b.ReportMetric(rate, "tickets/s")
		return rate
	}
	storetest.InTurns(b, func(b *testing.B) float64 { return turn(b, empty) }, func(b *testing.B) float64 { return turn(b, million) })
}
