package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
)

// TriageArgs is the triage job of one ticket.
type TriageArgs struct {
	TicketID string `json:"ticket_id"`
	// Quiet: the ticket's agents are not mailed when it is triaged (mail
	// that waited long in its mailbox: desk.TriageResult.Quiet).
	Quiet bool `json:"quiet,omitempty"`
}

// Kind is River's name for the job.
func (TriageArgs) Kind() string { return "triage" }

// triageDesk is what a triage job asks of the use cases.
type triageDesk interface {
	TriageInput(ctx context.Context, jobID int64, ticketID, providerName string) (*desk.TriageInput, error)
	SaveTriageStep(ctx context.Context, r *desk.TriageResult) (free bool, err error)
	DraftExamples(ctx context.Context, ticketID string, vec []float32, team string) ([]provider.Example, []string, error)
}

// TriageWorker classifies a ticket, embeds it and drafts a reply drawing
// on the solved tickets nearest it. A job may
// be delivered more than once (River rescues a job whose worker died), so
// it skips the steps the job has results for, and the desk saves each
// result once (desk.SaveTriageStep). The worker's own part is the
// provider: its calls, through the breaker and the quota's pace, and what
// a failed call means for the job.
type TriageWorker struct {
	river.WorkerDefaults[TriageArgs]

	desk     triageDesk
	provider *provider.Client
	gate     *providerGate
	backoff  backoff.Backoff
	logger   *slog.Logger
	timeout  time.Duration
}

// Timeout bounds one attempt: its provider calls and their saves.
func (w *TriageWorker) Timeout(*river.Job[TriageArgs]) time.Duration { return w.timeout }

// NextRetry spaces the attempts of a triage job that failed.
func (w *TriageWorker) NextRetry(job *river.Job[TriageArgs]) time.Time {
	return w.backoff.After(job.Attempt)
}

// Work runs the steps the job has no result for yet.
func (w *TriageWorker) Work(ctx context.Context, job *river.Job[TriageArgs]) error {
	in, err := w.desk.TriageInput(ctx, job.ID, job.Args.TicketID, w.gate.name)
	if errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("TicketNotFound: ticket %s does not exist", job.Args.TicketID))
	}
	if err != nil {
		return err
	}
	free := in.ProviderFree
	vec := in.Embedding
	for i, task := range desk.TriageTasks {
		if slices.Contains(in.Done, task) {
			continue
		}
		var sources []string
		if task == desk.TaskDraftReply {
			if in.Ticket.Examples, sources, err = w.desk.DraftExamples(ctx, job.Args.TicketID, vec, in.Ticket.Team); err != nil {
				return err
			}
		}
		// The breaker and the quota's pace, shared by every process: a
		// job that may not call now waits without spending an attempt.
		pass, wait, err := w.gate.enter(ctx, free)
		free = false
		if err != nil {
			return err
		}
		if pass == nil {
			w.logger.DebugContext(ctx, "triage: waiting for the provider", slog.Int64("job_id", job.ID), slog.Duration("wait", wait))
			return river.JobSnooze(w.backoff.Jitter(wait))
		}
		result, err := w.runStep(ctx, task, &in.Ticket)
		state, gateErr := w.gate.after(ctx, pass, result.Call, err)
		if gateErr != nil {
			return gateErr
		}
		if err != nil {
			var perr *provider.Error
			if errors.As(err, &perr) && perr.ProviderDown() && state == store.BreakerOpen {
				// The provider is down for everyone: wait for the breaker's
				// probe instead of spending attempts on the outage.
				w.logger.InfoContext(ctx, "triage: provider down, breaker open; waiting without spending an attempt",
					slog.Int64("job_id", job.ID), slog.String("task", task), slog.String("error", perr.Error()))
				return river.JobSnooze(w.backoff.Jitter(w.gate.breaker.ProbeMin))
			}
			return w.failure(ctx, job, task, err)
		}
		result.JobID, result.TicketID, result.Task, result.Input = job.ID, job.Args.TicketID, task, in
		result.DraftSources = sources
		if task == desk.TaskEmbed {
			vec = result.Embedding
		}
		result.Last, result.ProviderName, result.Quiet = i == len(desk.TriageTasks)-1, w.gate.name, job.Args.Quiet
		if free, err = w.desk.SaveTriageStep(ctx, result); err != nil {
			return err
		}
	}
	// Reached with nothing left to do only when the last step was done
	// before this delivery; returning nil lets River complete the job.
	return nil
}

// runStep makes the step's provider call. The call is described even when
// it failed: what the answer said of the quota counts either way.
func (w *TriageWorker) runStep(ctx context.Context, task string, pt *provider.Ticket) (*desk.TriageResult, error) {
	r := &desk.TriageResult{}
	var err error
	switch task {
	case desk.TaskClassify:
		var c provider.Classification
		if c, r.Call, err = w.provider.Classify(ctx, *pt); err != nil {
			return r, err
		}
		pt.Team = c.Team // the draft that follows is written for this team
		out, _ := json.Marshal(c)
		r.Output, r.Classification = string(out), &c
	case desk.TaskDraftReply:
		if r.Draft, r.Call, err = w.provider.DraftReply(ctx, *pt); err != nil {
			return r, err
		}
		r.Output = r.Draft
	case desk.TaskEmbed:
		if r.Embedding, r.Call, err = w.provider.Embed(ctx, *pt); err != nil {
			return r, err
		}
		r.Output = fmt.Sprintf("vector %s, %d dimensions", r.Call.Model, len(r.Embedding))
	default:
		return r, fmt.Errorf("unknown triage task %q", task)
	}
	return r, nil
}

// failure turns a provider error into River's control flow: snooze on "slow
// down", cancel on what will repeat, a plain error (retry with backoff,
// then dead letter) on what may pass.
func (w *TriageWorker) failure(ctx context.Context, job *river.Job[TriageArgs], task string, err error) error {
	var perr *provider.Error
	if !errors.As(err, &perr) {
		return err // our own cancellation: River treats a shutdown on its own
	}
	logAttrs := []any{slog.Int64("job_id", job.ID), slog.String("ticket_id", job.Args.TicketID),
		slog.String("task", task), slog.Int("attempt", job.Attempt), slog.String("error", perr.Error())}
	switch perr.Kind {
	case provider.KindRateLimited:
		n := snoozes(job.Metadata) + 1
		wait := w.backoff.SnoozeWait(min(n, 6), perr.RetryAfter)
		w.logger.InfoContext(ctx, "triage: provider asks to slow down; waiting without spending an attempt",
			append(logAttrs, slog.Duration("wait", wait), slog.Int("refusals", n))...)
		return river.JobSnooze(wait)
	case provider.KindRejected, provider.KindInvalidAnswer:
		w.logger.WarnContext(ctx, "triage: failed; a retry would get the same answer", logAttrs...)
		return river.JobCancel(fmt.Errorf("%w on %s", perr, task))
	default:
		return fmt.Errorf("%w on %s", perr, task)
	}
}

// snoozes is how many times River has snoozed the job so far; River keeps
// the count in the job's metadata.
func snoozes(metadata []byte) int {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m)
	return m.Snoozes
}
