//go:build demo

package jobs_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
)

// rescueAndFinish starts worker 2 once the crashed job counts as stuck, so
// River's rescuer hands it back and worker 2 finishes it.
func rescueAndFinish(t *testing.T, b *jobstest.Bundle, job *river.Job[jobs.TriageArgs]) jobs.Status {
	t.Helper()
	// The timeouts stay long enough for a loaded machine; the rescue comes
	// just after them.
	const rescueAfter = 6 * time.Second
	b.Config.RescueStuckJobsAfter = rescueAfter
	b.Config.TriageTimeout, b.Config.EmailTimeout = 5*time.Second, 5*time.Second
	// The crashed attempt is made older than that, not waited for: the
	// rescuer reads the time from the job's attempted_at.
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE river_job SET attempted_at = $2 WHERE id = $1`,
		job.ID, job.AttemptedAt.Add(-rescueAfter-100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	q := b.StartQueue(t) // its rescuer runs at start; its scheduler re-queues the job within 5s
	return jobstest.WaitFor(t, q, job.ID, jobs.StateSucceeded, 30*time.Second)
}

// TestTriageAfterACrash plays a worker that dies mid-job
// (jobs.SimulateCrash, in binaries built with -tags demo) and the one that
// finishes the job after River's rescuer hands it back.
func TestTriageAfterACrash(t *testing.T) {
	t.Parallel()

	t.Run("JobDeliveredTwiceHasOneEffect", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		ticketID, jobID := b.OpenTicket(t, b.NewQueue(t), "Late parcel", "My parcel is late.")

		// Worker 1 saves classify and embed, then dies before draft_reply.
		job, err := b.NewWorkers(t, b.NewQueue(t)).SimulateCrash(b.Ctx, jobs.CrashPoint{Task: desk.TaskEmbed})
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := b.NewQueue(t).Get(b.Ctx, jobID); s.State != jobs.StateRunning || s.Attempt != 1 {
			t.Fatalf("after the crash the job is %s at attempt %d, want running at attempt 1", s.State, s.Attempt)
		}

		s := rescueAndFinish(t, b, job)
		if s.Attempt != 2 {
			t.Errorf("worker 2 finished at attempt %d, want 2", s.Attempt)
		}
		b.RequireOneResultPerStep(t, ticketID, jobID)
		if calls := b.Sim.Calls(ticketID); jobstest.TotalCalls(calls) != 3 {
			t.Errorf("provider calls = %v, want 3: worker 2 skips the saved steps", calls)
		}
	})

	t.Run("CrashBetweenCallAndSaveRepeatsOnlyThatCall", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		ticketID, jobID := b.OpenTicket(t, b.NewQueue(t), "Login fails", "I cannot log in to my account.")

		// Worker 1 gets classify's answer and dies before saving it.
		job, err := b.NewWorkers(t, b.NewQueue(t)).SimulateCrash(b.Ctx, jobs.CrashPoint{Task: desk.TaskClassify, BeforeSave: true})
		if err != nil {
			t.Fatal(err)
		}

		rescueAndFinish(t, b, job)
		b.RequireOneResultPerStep(t, ticketID, jobID)
		calls := b.Sim.Calls(ticketID)
		if calls["classify"] != 2 || calls["draft_reply"] != 1 || calls["embed"] != 1 {
			t.Errorf("provider calls = %v, want classify twice and the others once", calls)
		}
	})

	t.Run("CrashAfterTheLastSaveEndsWithoutACallOrASecondEvent", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		t.Cleanup(hook.Close)
		if _, err := b.Store.InsertWebhook(b.Ctx, &store.Webhook{URL: hook.URL, Events: []string{desk.EventTicketTriaged},
			Secret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=", CreatedBy: "agent:alice"}); err != nil {
			t.Fatal(err)
		}
		ticketID, jobID := b.OpenTicket(t, b.NewQueue(t), "Refund", "Please refund my last order.")

		// Worker 1 saves all three results and dies before River hears
		// that the job is done.
		job, err := b.NewWorkers(t, b.NewQueue(t)).SimulateCrash(b.Ctx, jobs.CrashPoint{Task: desk.TaskDraftReply})
		if err != nil {
			t.Fatal(err)
		}
		b.RequireOneResultPerStep(t, ticketID, jobID)
		if s, _ := b.NewQueue(t).Get(b.Ctx, jobID); s.State != jobs.StateRunning {
			t.Fatalf("after the crash the job is %s, want running until it is rescued", s.State)
		}
		// A second delivery that raced the first to the last step saves
		// nothing, changes nothing and tells no one.
		saved, _ := b.Store.GetTicket(b.Ctx, ticketID)
		if _, err := b.Desk(b.NewQueue(t)).SaveTriageStep(b.Ctx, &desk.TriageResult{JobID: job.ID, TicketID: job.Args.TicketID,
			Task: desk.TaskDraftReply, Output: "a second answer", Draft: "a second answer", Last: true}); err != nil {
			t.Fatal(err)
		}
		if again, _ := b.Store.GetTicket(b.Ctx, ticketID); jobstest.Deref(again.DraftReply) != jobstest.Deref(saved.DraftReply) {
			t.Errorf("the racing delivery changed the draft to %q", jobstest.Deref(again.DraftReply))
		}

		if s := rescueAndFinish(t, b, job); s.Attempt != 2 {
			t.Errorf("worker 2 finished at attempt %d, want 2", s.Attempt)
		}
		b.RequireOneResultPerStep(t, ticketID, jobID)
		if calls := b.Sim.Calls(ticketID); jobstest.TotalCalls(calls) != 3 {
			t.Errorf("provider calls = %v, want 3: worker 2 has nothing left to call", calls)
		}
		var events int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM webhook_events WHERE type = $1`, desk.EventTicketTriaged).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if events != 1 {
			t.Errorf("%d %s events, want 1", events, desk.EventTicketTriaged)
		}
	})

	// A crash between embed and draft_reply leaves a saved vector that
	// worker 2 reads back rather than asks for again, and grounds the
	// draft on it all the same.
	t.Run("DraftAfterACrashAfterEmbedStillDrawsOnTheSavedVector", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		b.WithSMTP(t)
		refund, _ := solvedHistory(t, b)
		ticketID, jobID := openAs(t, b, b.NewQueue(t), "Pia Lund", "pia@example.com", "Refund please",
			"I sent my kettle back but I was charged for it. Can I get a refund?")

		job, err := b.NewWorkers(t, b.NewQueue(t)).SimulateCrash(b.Ctx, jobs.CrashPoint{Task: desk.TaskEmbed})
		if err != nil {
			t.Fatal(err)
		}
		rescueAndFinish(t, b, job)
		b.RequireOneResultPerStep(t, ticketID, jobID)
		if calls := b.Sim.Calls(ticketID); calls["embed"] != 1 || calls["draft_reply"] != 1 {
			t.Errorf("provider calls = %v, want embed and draft_reply once each", calls)
		}
		if got, _ := b.Store.GetTicket(b.Ctx, ticketID); len(got.DraftSources) != 1 || got.DraftSources[0] != refund {
			t.Errorf("draft_sources %v, want [%s]", got.DraftSources, refund)
		}
	})
}
