package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
)

func TestTriage(t *testing.T) {
	t.Parallel()

	t.Run("ATicketGetsTeamPriorityDraftAndEmbeddingFromThreeCalls", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		q := b.StartQueue(t)
		ticketID, jobID := b.OpenTicket(t, q, "Charged twice", "My card was charged twice for invoice 1234. Please refund, urgent.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		if s.Attempt != 1 || s.TicketID != ticketID || s.Kind != "triage" {
			t.Errorf("status = %+v, want triage of %s succeeded at attempt 1", s, ticketID)
		}
		b.RequireOneResultPerStep(t, ticketID, jobID)
		ticket, _ := b.Store.GetTicket(b.Ctx, ticketID)
		if *ticket.Team != "billing" || *ticket.Priority != 1 {
			t.Errorf("classified as %s/%d, want billing/1", *ticket.Team, *ticket.Priority)
		}
		if !strings.Contains(*ticket.DraftReply, "Dear Ada Customer") || !strings.Contains(*ticket.DraftReply, "invoice 1234") || !strings.Contains(*ticket.DraftReply, "billing team") {
			t.Errorf("draft %q does not answer the ticket", *ticket.DraftReply)
		}
		if calls := b.Sim.Calls(ticketID); jobstest.TotalCalls(calls) != 3 {
			t.Errorf("provider calls = %v, want one per step", calls)
		}
	})

	t.Run("OutageEndsAsDeadLetterAfterExactlyFiveAttemptsAndRetryGivesAFreshBudget", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		if err := b.Sim.SetMode(simulator.ModeOutage); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t)
		ticketID, jobID := b.OpenTicket(t, q, "Website down", "The website shows an error.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateDeadLetter, 15*time.Second)
		if s.Attempt != 5 || s.MaxAttempts != 5 {
			t.Errorf("dead letter at attempt %d of %d, want 5 of 5", s.Attempt, s.MaxAttempts)
		}
		if want := "ProviderUnavailable: the provider answered 503 on classify"; jobstest.Deref(s.LastError) != want {
			t.Errorf("last_error = %q, want %q", jobstest.Deref(s.LastError), want)
		}
		if calls := b.Sim.Calls(ticketID); calls["classify"] != 5 {
			t.Errorf("provider calls = %v, want classify 5 times", calls)
		}
		dead, err := q.DeadLetters(b.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 1 || dead[0].Count != 1 || dead[0].JobIDs[0] != jobID {
			t.Errorf("dead letters = %+v, want job %d alone", dead, jobID)
		}

		// The outage passes; a person sends the job back.
		if err := b.Sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		back, err := q.Retry(b.Ctx, jobID)
		if err != nil {
			t.Fatal(err)
		}
		if back.Attempt != 0 || back.MaxAttempts != 5 || back.State != jobs.StateQueued {
			t.Errorf("after retry: %+v, want queued at attempt 0 of 5", back)
		}
		s = jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		if s.Attempt != 1 {
			t.Errorf("succeeded at attempt %d, want 1 of a fresh budget", s.Attempt)
		}
		b.RequireOneResultPerStep(t, ticketID, jobID)
	})

	t.Run("SlowProviderTimesOutAndSpendsAttempts", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		settings := simulator.DefaultSettings()
		settings.Mode, settings.SlowDelay = simulator.ModeSlow, simulator.Duration(time.Hour)
		if err := b.Sim.Set(settings); err != nil {
			t.Fatal(err)
		}
		b.ShortTimeoutProvider(t, 200*time.Millisecond)
		b.Config.TriageMaxAttempts = 2
		q := b.StartQueue(t)
		_, jobID := b.OpenTicket(t, q, "Slow", "Anything.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateDeadLetter, 10*time.Second)
		if s.Attempt != 2 || !strings.HasPrefix(jobstest.Deref(s.LastError), "ProviderTimeout: no answer to classify within") {
			t.Errorf("status = %+v (%s), want a timeout dead letter at attempt 2", s, jobstest.Deref(s.LastError))
		}
	})

	t.Run("InvalidAnswerFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		if err := b.Sim.SetMode(simulator.ModeInvalid); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t)
		ticketID, jobID := b.OpenTicket(t, q, "Question", "What are your opening hours?")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateFailed, 10*time.Second)
		if s.Attempt != 1 {
			t.Errorf("failed at attempt %d, want 1", s.Attempt)
		}
		if !strings.HasPrefix(jobstest.Deref(s.LastError), "ProviderInvalidAnswer: classify answered no JSON object") {
			t.Errorf("last_error = %q", jobstest.Deref(s.LastError))
		}
		if calls := b.Sim.Calls(ticketID); jobstest.TotalCalls(calls) != 1 {
			t.Errorf("provider calls = %v, want 1: nothing is retried", calls)
		}
	})

	t.Run("RateLimitSnoozesWithoutSpendingAnAttempt", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		settings := simulator.DefaultSettings()
		settings.Mode, settings.QuotaCalls, settings.QuotaWindow = simulator.ModeQuota, 0, simulator.Duration(time.Second)
		if err := b.Sim.Set(settings); err != nil {
			t.Fatal(err)
		}
		// Two attempts would be spent by the second 429 if 429s counted.
		b.Config.TriageMaxAttempts = 2
		q := b.StartQueue(t)
		ticketID, jobID := b.OpenTicket(t, q, "Refund", "Where is my refund?")

		const refusals = 3
		deadline := time.Now().Add(15 * time.Second)
		for {
			row, err := q.Client.JobGet(b.Ctx, jobID)
			if err != nil {
				t.Fatal(err)
			}
			if row.State != "running" {
				if row.Attempt != 0 || len(row.Errors) != 0 {
					t.Fatalf("after %d snoozes: attempt %d, errors %v; want attempt 0 and no error",
						jobs.Snoozes(row.Metadata), row.Attempt, row.Errors)
				}
				if jobs.Snoozes(row.Metadata) >= refusals {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d snoozes in 15s", jobs.Snoozes(row.Metadata))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if calls := b.Sim.Calls(ticketID); calls["classify"] < refusals {
			t.Errorf("provider calls = %v, want at least %d refused classify calls", calls, refusals)
		}

		if err := b.Sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		s := jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		if s.Attempt != 1 {
			t.Errorf("succeeded at attempt %d, want 1: snoozes spend none", s.Attempt)
		}
	})
}
