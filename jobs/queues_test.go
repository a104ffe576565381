package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// triageBacklog opens n tickets of one customer in one transaction, each
// with its triage job.
func triageBacklog(tb testing.TB, b *jobstest.Bundle, q *jobs.Queue, n int) {
	tb.Helper()
	if _, err := b.Store.InsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0900", Email: "backlog@example.com", Name: "Backlog"}); err != nil {
		tb.Fatal(err)
	}
	err := store.Run(b.Ctx, b.Pool, func(tx *store.Tx) error {
		for range n {
			if _, _, err := b.Desk(q).OpenTicketTx(b.Ctx, tx, &desk.OpenTicketParams{CustomerID: "C-0900", Subject: "Waiting", Body: "Slow."}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// slowProvider makes every provider call take d.
func slowProvider(tb testing.TB, b *jobstest.Bundle, d time.Duration) {
	tb.Helper()
	settings := simulator.DefaultSettings()
	settings.Mode, settings.SlowDelay = simulator.ModeSlow, simulator.Duration(d)
	if err := b.Sim.Set(settings); err != nil {
		tb.Fatal(err)
	}
}

func TestQueues(t *testing.T) {
	t.Parallel()

	t.Run("AReplyDoesNotWaitBehindATriageBacklog", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		slowProvider(t, b.Bundle, 3*time.Second)
		q := b.start(t)
		triageBacklog(t, b.Bundle, q, 500)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")

		start := time.Now()
		_, jobID := b.Reply(t, q, ticketID, "Hello back.")
		jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 30*time.Second)
		latency := time.Since(start)
		// A triage job takes three 3s calls: had the reply queued behind
		// the backlog, at least one would have finished before it.
		var triaged int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM river_job WHERE kind = 'triage' AND state = 'completed'`).Scan(&triaged); err != nil {
			t.Fatal(err)
		}
		if triaged != 0 || len(b.smtp.Deliveries()) != 1 {
			t.Errorf("the reply was delivered after %d triage jobs finished (%d deliveries)", triaged, len(b.smtp.Deliveries()))
		}
		t.Logf("reply delivered %s after it was written, with 501 triage jobs waiting on a 3s provider", latency.Round(time.Millisecond))
		// The triage jobs at work each wait on three 3s calls; closing the
		// provider ends them now, so stopping the workers need not wait.
		_ = b.Sim.Close()
	})

	t.Run("EachKindInsertsIntoItsOwnQueue", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		q := b.NewQueue(t)
		ticketID, triageJob := b.OpenTicket(t, q, "Hello", "Hi.")
		_, emailJob := b.Reply(t, q, ticketID, "Hello back.")
		for id, want := range map[int64]string{triageJob: jobs.QueueTriage, emailJob: jobs.QueueEmail} {
			row, err := q.Client.JobGet(b.Ctx, id)
			if err != nil || row.Queue != want {
				t.Errorf("job %d (%v) is on queue %q, want %q", id, err, row.Queue, want)
			}
		}
	})

	// The ticket's job is numbered with the ticket and inserted with the
	// commit (Queue.QueueTriageAtCommit): River must insert it under that
	// number, or the ticket names a job that is not there.
	t.Run("ANewTicketAndItsTriageJobNameEachOther", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		q := b.NewQueue(t)
		ticketID, jobID := b.OpenTicket(t, q, "Hello", "Hi.")
		ticket, err := b.Store.GetTicket(b.Ctx, ticketID)
		if err != nil || ticket.TriageJobID == nil || *ticket.TriageJobID != jobID {
			t.Fatalf("ticket %+v (%v) names job %v, want %d", ticket, err, ticket.TriageJobID, jobID)
		}
		row, err := q.Client.JobGet(b.Ctx, jobID)
		if err != nil || row.Kind != (jobs.TriageArgs{}).Kind() || !strings.Contains(string(row.EncodedArgs), `"`+ticketID+`"`) {
			t.Errorf("job %d: %+v (%v), want the triage of %s", jobID, row, err, ticketID)
		}
	})

	// River tells the queue's workers of an insert after the commit that
	// carried it: should only that fail, the ticket and its job are
	// committed, and the intake says so.
	t.Run("ATicketStaysOpenedWhenOnlyRiversNotificationFails", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		q := b.NewQueue(t)
		if _, err := b.Store.InsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "ada@example.com", Name: "Ada"}); err != nil {
			t.Fatal(err)
		}
		ctx, failed := storetest.FailStatements(b.Ctx, "PGNotifyMany")
		ticket, jobID, err := b.Desk(q).OpenTicket(ctx, &desk.OpenTicketParams{CustomerID: "C-0001", Subject: "Hello", Body: "Hi."})
		if failed.N() == 0 {
			t.Fatalf("River sent no notification of the insert (%v), so this checks nothing", err)
		}
		if err != nil {
			t.Fatalf("open a ticket: %v, want it opened", err)
		}
		if _, err := b.Store.GetTicket(b.Ctx, ticket.ID); err != nil {
			t.Errorf("ticket %s: %v", ticket.ID, err)
		}
		if row, err := q.Client.JobGet(b.Ctx, jobID); err != nil || row.Kind != (jobs.TriageArgs{}).Kind() {
			t.Errorf("job %d: %+v (%v), want the ticket's triage", jobID, row, err)
		}
	})

	t.Run("AJobAnOlderVersionPutInDefaultIsStillWorked", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		q := b.StartQueue(t)
		ticketID, first := b.OpenTicket(t, q, "Hello", "Hi.")
		jobstest.WaitFor(t, q, first, jobs.StateSucceeded, 10*time.Second)
		res, err := q.Client.Insert(b.Ctx, jobs.TriageArgs{TicketID: ticketID}, &river.InsertOpts{Queue: river.QueueDefault})
		if err != nil {
			t.Fatal(err)
		}
		jobstest.WaitFor(t, q, res.Job.ID, jobs.StateSucceeded, 10*time.Second)
	})
}
