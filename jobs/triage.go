package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"helpdesk/desk"
	"helpdesk/jobs/provider"
	"helpdesk/store"
)

// TriageArgs is the triage job of one ticket.
type TriageArgs struct {
	TicketID string `json:"ticket_id"`
}

// Kind is River's name for the job.
func (TriageArgs) Kind() string { return "triage" }

// The triage steps, in the order they run.
const (
	TaskClassify   = "classify"
	TaskDraftReply = "draft_reply"
	TaskEmbed      = "embed"
)

// TriageTasks are the steps of a triage job, in order.
var TriageTasks = []string{TaskClassify, TaskDraftReply, TaskEmbed}

// maxPromptBytes keeps a long conversation from growing every provider call
// without bound; the newest text matters most, so the oldest is cut.
const maxPromptBytes = 16 << 10

// TriageWorker classifies a ticket, drafts a reply and embeds it. A job may
// be delivered more than once (River rescues a job whose worker died), so:
// it skips the steps the job has results for, saves each result under the
// job's id with ON CONFLICT DO NOTHING in the same transaction as the ticket
// update, and tells of the triaged ticket in the transaction that saved
// the last step's result.
type TriageWorker struct {
	river.WorkerDefaults[TriageArgs]

	pool     *pgxpool.Pool
	provider *provider.Client
	gate     *providerGate
	notifier Notifier // nil: nobody is told
	// autoAssign gives the ticket to its team's least busy agent with the classify result.
	autoAssign bool
	backoff    Backoff
	logger     *slog.Logger
	timeout    time.Duration

	// Test seams, nil in production: called after a step's provider call and
	// after its save. Returning an error stops Work there, as a crash would.
	afterCall func(task string) error
	afterSave func(task string) error
}

// Timeout bounds one attempt: its provider calls and their saves.
func (w *TriageWorker) Timeout(*river.Job[TriageArgs]) time.Duration { return w.timeout }

// NextRetry spaces the attempts of a triage job that failed.
func (w *TriageWorker) NextRetry(job *river.Job[TriageArgs]) time.Time {
	return w.backoff.NextRetry(job.JobRow)
}

// stepResult is what a step saves: the ai_runs output and the ticket update.
type stepResult struct {
	output string
	call   provider.Call
	apply  func(ctx context.Context, st *store.Store, ticketID string, jobID int64) error
	// assignTeam, after classify: the team whose least busy agent gets the
	// ticket, in the same transaction, when auto-assignment is on.
	assignTeam string
}

// Work runs the steps the job has no result for yet.
func (w *TriageWorker) Work(ctx context.Context, job *river.Job[TriageArgs]) error {
	// Everything the steps read, in one round trip.
	var (
		done []string
		pt   *provider.Ticket
		free bool // the provider's row, read with the rest, lets the first call go
	)
	pt, err := w.load(ctx, job, &done, &free)
	if errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("TicketNotFound: ticket %s does not exist", job.Args.TicketID))
	}
	if err != nil {
		return err
	}

	for i, task := range TriageTasks {
		if slices.Contains(done, task) {
			continue
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
			return river.JobSnooze(jitter(w.backoff, wait))
		}
		result, call, err := w.runStep(ctx, task, pt)
		state, gateErr := w.gate.after(ctx, pass, call, err)
		if gateErr != nil {
			return gateErr
		}
		if w.afterCall != nil {
			if err := w.afterCall(task); err != nil {
				return err
			}
		}
		if err != nil {
			var perr *provider.Error
			if errors.As(err, &perr) && perr.ProviderDown() && state == store.BreakerOpen {
				// The provider is down for everyone: wait for the breaker's
				// probe instead of spending attempts on the outage.
				w.logger.InfoContext(ctx, "triage: provider down, breaker open; waiting without spending an attempt",
					slog.Int64("job_id", job.ID), slog.String("task", task), slog.String("error", perr.Error()))
				return river.JobSnooze(jitter(w.backoff, w.gate.breaker.ProbeMin))
			}
			return w.failure(ctx, job, task, err)
		}
		last := i == len(TriageTasks)-1
		if free, err = w.save(ctx, job, task, result, last); err != nil {
			return err
		}
		if w.afterSave != nil {
			if err := w.afterSave(task); err != nil {
				return err
			}
		}
	}
	// Reached with nothing left to do only when the last step was done
	// before this delivery; returning nil lets River complete the job.
	return nil
}

// runStep makes the step's provider call. The call is described even when
// it failed: what the answer said of the quota counts either way.
func (w *TriageWorker) runStep(ctx context.Context, task string, pt *provider.Ticket) (stepResult, provider.Call, error) {
	switch task {
	case TaskClassify:
		c, call, err := w.provider.Classify(ctx, *pt)
		if err != nil {
			return stepResult{}, call, err
		}
		pt.Team = c.Team // the draft that follows is written for this team
		out, _ := json.Marshal(c)
		return stepResult{output: string(out), call: call, apply: func(ctx context.Context, st *store.Store, id string, jobID int64) error {
			return st.SetTicketClassification(ctx, id, c.Team, c.Priority)
		}, assignTeam: c.Team}, call, nil
	case TaskDraftReply:
		draft, call, err := w.provider.DraftReply(ctx, *pt)
		if err != nil {
			return stepResult{}, call, err
		}
		return stepResult{output: draft, call: call, apply: func(ctx context.Context, st *store.Store, id string, jobID int64) error {
			return st.SetTicketDraftReply(ctx, id, draft, jobID)
		}}, call, nil
	case TaskEmbed:
		vec, call, err := w.provider.Embed(ctx, *pt)
		if err != nil {
			return stepResult{}, call, err
		}
		return stepResult{output: fmt.Sprintf("vector %s, %d dimensions", call.Model, len(vec)), call: call,
			apply: func(ctx context.Context, st *store.Store, id string, jobID int64) error {
				return st.SetTicketEmbedding(ctx, id, vec)
			}}, call, nil
	}
	return stepResult{}, provider.Call{}, fmt.Errorf("unknown triage task %q", task)
}

// jitter adds up to a tenth at random, so that jobs told to wait the same
// time do not all come back at once.
func jitter(b Backoff, wait time.Duration) time.Duration {
	wait = max(wait, time.Millisecond)
	return wait + time.Duration(b.rand(int64(wait/10)+1))
}

// save records the step's result and applies it to the ticket in one
// transaction. If another delivery saved this step first, the insert adds
// nothing and the ticket is left as that delivery set it, and tells no one
// again: the delivery that saved the last result emits ticket.triaged and
// notifies the agents, once. River completes the job when Work returns,
// with other jobs' completions in one statement; completing it here, in
// this transaction (river.JobCompleteTx), made PostgreSQL plan River's
// completion query anew for every ticket (40 % of PostgreSQL's statement
// time in the triage benchmark). A job whose worker dies between this
// commit and River's completion is handed back by the rescuer and finds
// nothing left to do.
//
// Before the next step, it reads in the same transaction whether the
// provider is free, so that the next call needs no read of its own; that
// read and the result's insert go with BEGIN.
func (w *TriageWorker) save(ctx context.Context, job *river.Job[TriageArgs], task string, r stepResult, last bool) (free bool, err error) {
	var inserted bool
	first := store.BeginBatch()
	first.InsertAIRun(&store.InsertAIRunParams{
		JobID:            job.ID,
		TicketID:         job.Args.TicketID,
		Task:             task,
		Output:           r.output,
		Model:            r.call.Model,
		LatencyMS:        int(r.call.Latency.Milliseconds()),
		PromptTokens:     r.call.PromptTokens,
		CompletionTokens: r.call.CompletionTokens,
	}, &inserted)
	if !last {
		first.ProviderFree(w.gate.name, &free)
	}
	err = store.InTx(ctx, w.pool, first, func(tx pgx.Tx) error {
		if !inserted {
			return nil
		}
		if err := r.apply(ctx, store.New(tx), job.Args.TicketID, job.ID); err != nil {
			return err
		}
		if r.assignTeam != "" && w.autoAssign {
			if _, err := desk.AssignTx(ctx, tx, job.Args.TicketID, r.assignTeam); err != nil {
				return err
			}
		}
		if !last {
			return nil
		}
		if w.notifier != nil {
			if err := w.notifier.NotifyTx(ctx, tx, job.Args.TicketID, job.ID); err != nil {
				return err
			}
		}
		return desk.TriagedTx(ctx, tx, job.Args.TicketID, job.ID)
	})
	if err != nil {
		return false, fmt.Errorf("save %s of job %d: %w", task, job.ID, err)
	}
	return free, nil
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

// Bounds of what a prompt carries of the conversation: the newest text
// matters most, so the oldest is dropped.
const (
	maxPromptMessages = 16
	maxPromptReplies  = 4
)

// load reads in one batch what the steps need: the steps the job has
// results for, whether the provider is free, and the ticket as the
// provider is told it: the subject, the customer's name, what the
// customer wrote (newest last) and what agents answered, each bounded,
// and the teams there are.
func (w *TriageWorker) load(ctx context.Context, job *river.Job[TriageArgs], done *[]string, free *bool) (*provider.Ticket, error) {
	var (
		ticket   store.Ticket
		customer store.Customer
		pt       provider.Ticket
		reads    store.Batch
	)
	id := job.Args.TicketID
	reads.GetTicket(id, &ticket)
	reads.CustomerOfTicket(id, &customer)
	reads.AIRunTasks(job.ID, done)
	reads.NewestBodies(id, store.DirectionInbound, maxPromptMessages, &pt.Messages)
	reads.NewestBodies(id, store.DirectionOutbound, maxPromptReplies, &pt.AgentReplies)
	reads.Teams(&pt.Teams)
	reads.ProviderFree(w.gate.name, free)
	if err := store.New(w.pool).Send(ctx, &reads); err != nil {
		return nil, err
	}
	pt.ID, pt.Subject, pt.CustomerName = ticket.ID, ticket.Subject, customer.Name
	if ticket.Team != nil {
		pt.Team = *ticket.Team
	}
	pt.Messages = keepNewest(pt.Messages, maxPromptBytes)
	pt.AgentReplies = keepNewest(pt.AgentReplies, maxPromptBytes/4)
	return &pt, nil
}

// keepNewest drops the oldest texts, and cuts the oldest one kept from the
// front, so that the texts together fit in limit bytes.
func keepNewest(texts []string, limit int) []string {
	total := 0
	for i := len(texts) - 1; i >= 0; i-- {
		if total+len(texts[i]) > limit {
			cut := texts[i][len(texts[i])-(limit-total):]
			return append([]string{strings.ToValidUTF8(cut, "")}, texts[i+1:]...)
		}
		total += len(texts[i])
	}
	return texts
}
