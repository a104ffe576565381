package jobs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
)

// deadLetters counts the triage jobs given up.
func deadLetters(t *testing.T, b *jobstest.Bundle) int {
	t.Helper()
	var n int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM river_job WHERE kind = 'triage' AND state IN ('discarded', 'cancelled')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCircuitBreaker(t *testing.T) {
	t.Parallel()

	t.Run("AnOutageDuringAStreamOfTicketsEndsWithNoDeadLetterAndFewCalls", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		// The test's settings, about a 1:300 scale of the defaults' story:
		// the breaker opens after 5 failures within 2s (a window wide
		// enough for a busy machine) and probes from 100ms to 400ms; the
		// outage lasts 2s (10 minutes in the story).
		b.Config.Breaker = jobs.BreakerConfig{Failures: 5, Window: 2 * time.Second, ProbeMin: 100 * time.Millisecond, ProbeMax: 400 * time.Millisecond}
		// More attempts than the failures that open the breaker: the
		// first ticket's own failures open it before it can spend them
		// all, however the machine spaces its retries (with 3, the first
		// ticket, alone for its first 100ms and retried within 10-50ms,
		// could spend all three before five failures were counted).
		b.Config.TriageMaxAttempts = 6
		if err := b.Sim.SetMode(simulator.ModeOutage); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t)
		var jobIDs []int64
		for i := range 20 { // a steady stream: one ticket every 100ms
			_, id := b.OpenTicket(t, q, fmt.Sprintf("Ticket %d", i), "Where is my parcel?")
			jobIDs = append(jobIDs, id)
			time.Sleep(100 * time.Millisecond)
		}
		callsDuringOutage := b.Sim.TotalCalls()
		state, err := q.ProviderState(b.Ctx)
		if err != nil || state.State != store.BreakerOpen {
			t.Fatalf("breaker %+v (%v) during the outage, want open", state, err)
		}
		if err := b.Sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		for _, id := range jobIDs {
			jobstest.WaitFor(t, q, id, jobs.StateSucceeded, 30*time.Second)
		}
		// The next probe comes within ProbeMax (400ms) of the return, and
		// the waiting jobs within ProbeMin after it; 10s only guards
		// against a hang on a loaded machine.
		drained := time.Since(back)
		if drained > 10*time.Second {
			t.Errorf("every ticket triaged %s after the provider came back", drained)
		}
		if n := deadLetters(t, b); n != 0 {
			t.Errorf("%d dead letters", n)
		}
		// Without the breaker every ticket would spend its 6 attempts: 120
		// calls. With it: the failures that open it, the calls that were
		// under way, and a probe every 100–400ms.
		if callsDuringOutage > 30 {
			t.Errorf("%d provider calls during a 2s outage; want the breaker to stop them", callsDuringOutage)
		}
		if state, _ := q.ProviderState(b.Ctx); state.State != store.BreakerClosed {
			t.Errorf("breaker %s after the provider came back", state.State)
		}
		t.Logf("%d calls during the outage, for 20 tickets; all triaged %s after the provider came back", callsDuringOutage, drained.Round(time.Millisecond))
	})

	t.Run("UnusableAnswersNeverOpenIt", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		b.Config.Breaker = jobs.BreakerConfig{Failures: 2, Window: time.Minute}
		if err := b.Sim.SetMode(simulator.ModeInvalid); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t)
		for i := range 4 {
			_, id := b.OpenTicket(t, q, fmt.Sprintf("Ticket %d", i), "Hi.")
			jobstest.WaitFor(t, q, id, jobs.StateFailed, 10*time.Second)
		}
		if state, err := q.ProviderState(b.Ctx); err != nil || state.State != store.BreakerClosed || state.Failures != 0 {
			t.Errorf("breaker %+v (%v), want closed with no failures", state, err)
		}
	})
}

func TestQuotaPacing(t *testing.T) {
	t.Parallel()

	t.Run("CallsFollowTheQuotaSo429sAreRare", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		settings := simulator.DefaultSettings()
		settings.Mode, settings.QuotaCalls, settings.QuotaWindow = simulator.ModeQuota, 20, simulator.Duration(time.Second)
		if err := b.Sim.Set(settings); err != nil {
			t.Fatal(err)
		}
		// Before the first answers tell the quota, every worker may call at
		// once: 10 of them, as the test's 10% allows for that first wave.
		b.Config.TriageWorkers = 10
		q := b.StartQueue(t)
		var jobIDs []int64
		for i := range 30 {
			_, id := b.OpenTicket(t, q, fmt.Sprintf("Ticket %d", i), "Hi.")
			jobIDs = append(jobIDs, id)
		}
		for _, id := range jobIDs {
			jobstest.WaitFor(t, q, id, jobs.StateSucceeded, 60*time.Second)
		}
		total, refused := b.Sim.TotalCalls(), b.Sim.Refused()
		// Unpaced, 10 workers would send all 90 calls into 20-call windows.
		if share := float64(refused) / float64(total); share > 0.10 {
			t.Errorf("%d of %d calls answered 429 (%.0f%%), want at most 10%%", refused, total, 100*share)
		}
		if n := deadLetters(t, b); n != 0 {
			t.Errorf("%d dead letters", n)
		}
		t.Logf("%d calls, %d answered 429", total, refused)
	})
}
