package desk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
)

// The triage steps, in the order they run.
const (
	TaskClassify   = "classify"
	TaskDraftReply = "draft_reply"
	TaskEmbed      = "embed"
)

// TriageTasks are the steps of a triage job, in order: the embedding
// comes before the draft, which draws on the solved tickets nearest it.
var TriageTasks = []string{TaskClassify, TaskEmbed, TaskDraftReply}

// Bounds of what a prompt carries of the conversation: the newest text
// matters most, so the oldest is dropped.
const (
	maxPromptMessages = 16
	maxPromptReplies  = 4
	maxPromptBytes    = 16 << 10
)

// Triage steps saved at once commit together (store.Combiner): up to
// stepGroups transactions at the database, each of up to stepsAGroup
// steps. More transactions at once share fewer commits: on two cores,
// eight cost the most CPU a ticket, and one, two and four were within
// the runs' noise, two of 32 lowest (docs/performance.md, stop 65).
const (
	stepGroups  = 2
	stepsAGroup = 32
)

// TriageInput is what a triage job's steps need.
type TriageInput struct {
	// Ticket is the ticket as the provider is told it: the subject, the
	// customer's name, what the customer wrote (newest last) and what
	// agents answered, each bounded, and the teams there are.
	Ticket provider.Ticket
	// Done are the steps the job has results for: a second delivery of
	// the job skips them.
	Done []string
	// ProviderFree: the provider's row, read with the rest, lets the first
	// call go without a read of its own.
	ProviderFree bool
	// Embedding is the vector of the embed step when it is among Done,
	// for the draft to find similar tickets by.
	Embedding []float32

	row store.Ticket // the ticket as read, for the saves (TriageResult.Input)
}

// TriageInput reads, in one statement (store.TriageRead), what triage job
// jobID of the ticket needs; ErrNotFound for a ticket that is gone.
// providerName is the provider whose gate is read with it.
func (d *Desk) TriageInput(ctx context.Context, jobID int64, ticketID, providerName string) (*TriageInput, error) {
	var (
		read  store.TriageRead
		reads store.Batch
	)
	reads.TriageRead(&store.TriageReadParams{TicketID: ticketID, JobID: jobID, Provider: providerName,
		Inbound: maxPromptMessages, Outbound: maxPromptReplies}, &read)
	if err := store.New(d.pool).Send(ctx, &reads); err != nil {
		return nil, err
	}
	ticket := read.Ticket
	in := TriageInput{Done: read.Done, ProviderFree: read.ProviderFree, Embedding: read.Embedding, row: ticket}
	pt := &in.Ticket
	pt.ID, pt.Subject, pt.CustomerName = ticket.ID, ticket.Subject, read.CustomerName
	pt.Messages, pt.AgentReplies, pt.Teams = read.Inbound, read.Outbound, read.Teams
	if ticket.Team != nil {
		pt.Team = *ticket.Team
	}
	// A ticket that came to a team's address stays that team's: classify
	// chooses among that one only, and sets the priority.
	if ticket.SupportAddress != nil {
		a, err := d.supportAddress(ctx, *ticket.SupportAddress)
		if err != nil {
			return nil, err
		}
		if a != nil && a.Team != nil {
			pt.Teams = []string{*a.Team}
		}
	}
	pt.Messages = keepNewest(pt.Messages, maxPromptBytes)
	pt.AgentReplies = keepNewest(pt.AgentReplies, maxPromptBytes/4)
	return &in, nil
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

// TriageResult is what one step of a triage job found.
type TriageResult struct {
	JobID    int64
	TicketID string
	Task     string // one of TriageTasks
	Output   string // what ai_runs keeps of it
	Call     provider.Call

	// One of them, by Task.
	Classification *provider.Classification
	Draft          string
	DraftSources   []string // the tickets the draft's examples came from
	Embedding      []float32

	// Input is what the job read before its steps, when the caller has
	// it: the duplicate search takes the ticket's customer and time from
	// it instead of reading them again.
	Input *TriageInput
	// Last: no step follows; the ticket is triaged with this one.
	Last bool
	// ProviderName is the provider whose gate is read with the save, so
	// that the next step's call needs no read of its own.
	ProviderName string
	// Quiet: the job was queued quiet (Enqueuer.QueueTriageAtCommit), for
	// mail that waited long in its mailbox; its agents are not mailed.
	Quiet bool
}

// SaveTriageStep records a step's result and applies it to the ticket in
// one transaction: classify sets team and priority (and, with AutoAssign,
// gives the ticket to the team's least busy agent), draft_reply the
// draft (unless a newer job replaced this one), embed the vector. If
// another delivery of the job saved this step first, nothing is written,
// the ticket is left as that delivery set it, and nobody is told
// again: the delivery that saves the last result records ticket.triaged
// and notifies the agents, once. It reports whether the provider is free
// for the next call.
//
// Steps that other workers save at the same moment may share the
// transaction (d.steps, a group commit); a save that fails in a group
// runs again alone, and so do the others, the group rolled back. A
// group whose commit may have gone through although it failed tells each
// step the error: the job's retry finds the results saved. A classify
// step that assigns takes its team's slot before it joins a group
// (classifyAndAssignTx).
//
// River completes the job when the worker returns, with other jobs'
// completions in one statement; completing it in this transaction made
// PostgreSQL plan River's completion query anew for every ticket. A job
// whose worker dies between this commit and River's completion is handed
// back and finds nothing left to do.
func (d *Desk) SaveTriageStep(ctx context.Context, r *TriageResult) (free bool, err error) {
	var dup duplicate
	if r.Task == TaskEmbed {
		if dup, err = d.possibleDuplicate(ctx, r); err != nil {
			return false, fmt.Errorf("save %s of job %d: %w", r.Task, r.JobID, err)
		}
	}
	var slots *assignSlots
	if r.Task == TaskClassify && d.config.AutoAssign {
		// The team's slot is taken before the step joins a group, never
		// in it: the steps of a group could hold every slot until the
		// group commits.
		slots = d.assigning.team(r.Classification.Team)
		release, err := slots.take(ctx)
		if err != nil {
			return false, fmt.Errorf("save %s of job %d: assign %s: %w", r.Task, r.JobID, r.TicketID, err)
		}
		defer release()
	}
	held := func() {} // lets go of the agent assigned, once the transaction has ended
	defer func() { held() }()
	// The result goes first, and everything after it is written only if
	// it is saved: a result the job has already fails the transaction
	// (store.ErrStepSaved). So the step's writes wait for one trip, most
	// often the commit's.
	err = d.steps.Run(ctx, func(tx *store.Tx) error {
		// A group that rolled back runs its steps again, each alone: the
		// agent this step held in it is held no more.
		held()
		held = func() {}
		tx.Later(func(b *store.Batch) {
			b.InsertAIRun(&store.InsertAIRunParams{
				JobID:            r.JobID,
				TicketID:         r.TicketID,
				Task:             r.Task,
				Output:           r.Output,
				Model:            r.Call.Model,
				LatencyMS:        int(r.Call.Latency.Milliseconds()),
				PromptTokens:     r.Call.PromptTokens,
				CompletionTokens: r.Call.CompletionTokens,
			})
			if !r.Last {
				b.ProviderFree(r.ProviderName, &free)
			}
		})
		switch r.Task {
		case TaskClassify:
			c := r.Classification
			d.retimeTx(tx, r.TicketID)
			if slots == nil {
				tx.Later(func(b *store.Batch) { b.SetTicketClassification(r.TicketID, c.Team, c.Priority) })
				break
			}
			var err error
			if _, held, err = d.classifyAndAssignTx(ctx, tx, slots, r.TicketID, c.Team, c.Priority); err != nil {
				return err
			}
		case TaskDraftReply:
			tx.Later(func(b *store.Batch) { b.SetTicketDraftReply(r.TicketID, r.Draft, r.JobID, r.DraftSources) })
		case TaskEmbed:
			of := d.flagDuplicateTx(tx, r.TicketID, dup)
			tx.Later(func(b *store.Batch) { b.SetTicketEmbedding(r.TicketID, r.Embedding, of) })
		default:
			return fmt.Errorf("unknown triage task %q", r.Task)
		}
		if !r.Last {
			return nil
		}
		return d.triagedTx(ctx, tx, r.TicketID, r.JobID, r.Quiet)
	})
	if errors.Is(err, store.ErrStepSaved) {
		return false, nil // saved by another delivery, which applied it and told whom it had to
	}
	if err != nil {
		return false, fmt.Errorf("save %s of job %d: %w", r.Task, r.JobID, err)
	}
	return free, nil
}
