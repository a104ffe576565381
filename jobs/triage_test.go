package jobs

import (
	"strings"
	"testing"
	"time"

	"helpdesk/jobs/provider/simulator"
)

func TestTriage(t *testing.T) {
	t.Parallel()

	t.Run("ATicketGetsTeamPriorityDraftAndEmbeddingFromThreeCalls", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		q := b.startQueue(t)
		ticketID, jobID := b.openTicket(t, q, "Charged twice", "My card was charged twice for invoice 1234. Please refund, urgent.")

		s := waitFor(t, q, jobID, StateSucceeded, 10*time.Second)
		if s.Attempt != 1 || s.TicketID != ticketID || s.Kind != "triage" {
			t.Errorf("status = %+v, want triage of %s succeeded at attempt 1", s, ticketID)
		}
		b.requireOneResultPerStep(t, ticketID, jobID)
		ticket, _ := b.store.GetTicket(b.ctx, ticketID)
		if *ticket.Team != "billing" || *ticket.Priority != 1 {
			t.Errorf("classified as %s/%d, want billing/1", *ticket.Team, *ticket.Priority)
		}
		if !strings.Contains(*ticket.DraftReply, `"Charged twice"`) || !strings.Contains(*ticket.DraftReply, "billing team") {
			t.Errorf("draft %q does not answer the ticket", *ticket.DraftReply)
		}
		if calls := b.sim.Calls(ticketID); totalCalls(calls) != 3 {
			t.Errorf("provider calls = %v, want one per step", calls)
		}
	})

	t.Run("JobDeliveredTwiceHasOneEffect", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID, jobID := b.openTicket(t, b.newQueue(t), "Late parcel", "My parcel is late.")

		// Worker 1 saves classify and draft_reply, then dies before embed.
		job := b.crashWorker(t, func(w *TriageWorker) {
			w.afterSave = func(task string) error {
				if task == TaskDraftReply {
					return errCrash
				}
				return nil
			}
		})
		if s, _ := b.newQueue(t).Get(b.ctx, jobID); s.State != StateRunning || s.Attempt != 1 {
			t.Fatalf("after the crash the job is %s at attempt %d, want running at attempt 1", s.State, s.Attempt)
		}

		_, s := b.rescueAndFinish(t, job)
		if s.Attempt != 2 {
			t.Errorf("worker 2 finished at attempt %d, want 2", s.Attempt)
		}
		b.requireOneResultPerStep(t, ticketID, jobID)
		if calls := b.sim.Calls(ticketID); totalCalls(calls) != 3 {
			t.Errorf("provider calls = %v, want 3: worker 2 skips the saved steps", calls)
		}
	})

	t.Run("CrashBetweenCallAndSaveRepeatsOnlyThatCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID, jobID := b.openTicket(t, b.newQueue(t), "Login fails", "I cannot log in to my account.")

		// Worker 1 gets classify's answer and dies before saving it.
		job := b.crashWorker(t, func(w *TriageWorker) {
			w.afterCall = func(task string) error {
				if task == TaskClassify {
					return errCrash
				}
				return nil
			}
		})

		b.rescueAndFinish(t, job)
		b.requireOneResultPerStep(t, ticketID, jobID)
		calls := b.sim.Calls(ticketID)
		if calls["classify"] != 2 || calls["draft_reply"] != 1 || calls["embed"] != 1 {
			t.Errorf("provider calls = %v, want classify twice and the others once", calls)
		}
	})

	t.Run("OutageEndsAsDeadLetterAfterExactlyFiveAttemptsAndRetryGivesAFreshBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.sim.SetMode(simulator.ModeOutage); err != nil {
			t.Fatal(err)
		}
		q := b.startQueue(t)
		ticketID, jobID := b.openTicket(t, q, "Website down", "The website shows an error.")

		s := waitFor(t, q, jobID, StateDeadLetter, 15*time.Second)
		if s.Attempt != 5 || s.MaxAttempts != 5 {
			t.Errorf("dead letter at attempt %d of %d, want 5 of 5", s.Attempt, s.MaxAttempts)
		}
		if want := "ProviderUnavailable: the provider answered 503 on classify"; deref(s.LastError) != want {
			t.Errorf("last_error = %q, want %q", deref(s.LastError), want)
		}
		if calls := b.sim.Calls(ticketID); calls["classify"] != 5 {
			t.Errorf("provider calls = %v, want classify 5 times", calls)
		}
		dead, err := q.DeadLetters(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 1 || dead[0].Count != 1 || dead[0].JobIDs[0] != jobID {
			t.Errorf("dead letters = %+v, want job %d alone", dead, jobID)
		}

		// The outage passes; a person sends the job back.
		if err := b.sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		back, err := q.Retry(b.ctx, jobID)
		if err != nil {
			t.Fatal(err)
		}
		if back.Attempt != 0 || back.MaxAttempts != 5 || back.State != StateQueued {
			t.Errorf("after retry: %+v, want queued at attempt 0 of 5", back)
		}
		s = waitFor(t, q, jobID, StateSucceeded, 10*time.Second)
		if s.Attempt != 1 {
			t.Errorf("succeeded at attempt %d, want 1 of a fresh budget", s.Attempt)
		}
		b.requireOneResultPerStep(t, ticketID, jobID)
	})

	t.Run("SlowProviderTimesOutAndSpendsAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		settings := simulator.DefaultSettings()
		settings.Mode, settings.SlowDelay = simulator.ModeSlow, simulator.Duration(5*time.Second)
		if err := b.sim.Set(settings); err != nil {
			t.Fatal(err)
		}
		b.config.TriageMaxAttempts = 2
		q := b.startQueue(t)
		_, jobID := b.openTicket(t, q, "Slow", "Anything.")

		s := waitFor(t, q, jobID, StateDeadLetter, 10*time.Second)
		if s.Attempt != 2 || !strings.HasPrefix(deref(s.LastError), "ProviderTimeout: no answer to classify within") {
			t.Errorf("status = %+v (%s), want a timeout dead letter at attempt 2", s, deref(s.LastError))
		}
	})

	t.Run("InvalidAnswerFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.sim.SetMode(simulator.ModeInvalid); err != nil {
			t.Fatal(err)
		}
		q := b.startQueue(t)
		ticketID, jobID := b.openTicket(t, q, "Question", "What are your opening hours?")

		s := waitFor(t, q, jobID, StateFailed, 10*time.Second)
		if s.Attempt != 1 {
			t.Errorf("failed at attempt %d, want 1", s.Attempt)
		}
		if !strings.HasPrefix(deref(s.LastError), "ProviderInvalidAnswer: classify answered no JSON object") {
			t.Errorf("last_error = %q", deref(s.LastError))
		}
		if calls := b.sim.Calls(ticketID); totalCalls(calls) != 1 {
			t.Errorf("provider calls = %v, want 1: nothing is retried", calls)
		}
	})

	t.Run("RateLimitSnoozesWithoutSpendingAnAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		settings := simulator.DefaultSettings()
		settings.Mode, settings.QuotaCalls, settings.QuotaWindow = simulator.ModeQuota, 0, simulator.Duration(time.Second)
		if err := b.sim.Set(settings); err != nil {
			t.Fatal(err)
		}
		// Two attempts would be spent by the second 429 if 429s counted.
		b.config.TriageMaxAttempts = 2
		q := b.startQueue(t)
		ticketID, jobID := b.openTicket(t, q, "Refund", "Where is my refund?")

		const refusals = 3
		deadline := time.Now().Add(15 * time.Second)
		for {
			row, err := q.Client.JobGet(b.ctx, jobID)
			if err != nil {
				t.Fatal(err)
			}
			if row.State != "running" {
				if row.Attempt != 0 || len(row.Errors) != 0 {
					t.Fatalf("after %d snoozes: attempt %d, errors %v; want attempt 0 and no error",
						snoozes(row.Metadata), row.Attempt, row.Errors)
				}
				if snoozes(row.Metadata) >= refusals {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d snoozes in 15s", snoozes(row.Metadata))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if calls := b.sim.Calls(ticketID); calls["classify"] < refusals {
			t.Errorf("provider calls = %v, want at least %d refused classify calls", calls, refusals)
		}

		if err := b.sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		s := waitFor(t, q, jobID, StateSucceeded, 10*time.Second)
		if s.Attempt != 1 {
			t.Errorf("succeeded at attempt %d, want 1: snoozes spend none", s.Attempt)
		}
	})
}
