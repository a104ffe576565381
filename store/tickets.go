package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Ticket is one customer question and what triage made of it.
type Ticket struct {
	ID          string // T-500001
	CustomerID  string
	Subject     string
	Status      vocab.Status
	Team        *string // set by triage's classify step
	Priority    *int16  // 1 (urgent) … 4 (low), set by classify
	DraftReply  *string // set by triage's draft_reply step
	TriageJobID *int64  // the River job that triages the ticket
	CreatedAt   time.Time
	UpdatedAt   time.Time

	Assignee              *string // the agent's name
	FollowUpOf            *string // the closed ticket this one follows
	FirstResponseAt       *time.Time
	LastCustomerMessageAt *time.Time
	DraftWrittenAt        *time.Time
	DraftJobID            *int64 // the triage job that wrote the draft
	SolvedAt              *time.Time
	// SupportAddress is the address the ticket came in on, whose From its
	// mail carries; nil: the default address.
	SupportAddress *string
	// DraftSources are the similar solved tickets the draft drew on.
	DraftSources []string
	// PossibleDuplicateOf is an open ticket of the same customer about
	// the same thing, found when this one was triaged.
	PossibleDuplicateOf *string
	// MergedInto is the ticket this one was merged into (and closed).
	MergedInto *string
}

// DraftIsCurrent reports whether the draft answers everything the customer
// wrote: the ticket's current triage job wrote it.
func (t *Ticket) DraftIsCurrent() bool {
	return t.DraftReply != nil && t.DraftJobID != nil && t.TriageJobID != nil && *t.DraftJobID == *t.TriageJobID
}

// InsertTicketParams are the fields of a new ticket.
type InsertTicketParams struct {
	ID          string // from NextTicketID, or empty to number it now
	CustomerID  string
	Subject     string
	FollowUpOf  string // the closed ticket this one follows, if any
	TriageJobID *int64 // the job queued to triage it, when known before the ticket is written
	// SupportAddress is the address it came in on; "" for the default.
	SupportAddress string
	// Team is the team of that address, set at once; "" for triage to choose.
	Team string
}

// ErrUnknownCustomer is a ticket for a customer that does not exist.
var ErrUnknownCustomer = fmt.Errorf("unknown customer: %w", ErrConflict)

// ticketColumns are what a Ticket holds, read from tickets.
var ticketColumns = ticketColumnsOf("tickets")

// ticketColumnsOf are what a Ticket holds, read from tickets under the
// name t: its own columns, and the possible duplicate marked on its
// vector's row (migration 031). The vector itself is TicketEmbedding's.
func ticketColumnsOf(t string) string {
	cols := []string{"id", "customer_id", "subject", "status", "team", "priority", "draft_reply", "triage_job_id", "created_at", "updated_at",
		"assignee", "follow_up_of", "first_response_at", "last_customer_message_at", "draft_written_at", "draft_job_id", "solved_at", "support_address",
		"draft_sources"}
	for i, c := range cols {
		cols[i] = t + "." + c
	}
	return strings.Join(cols, ", ") +
		`, (SELECT e.possible_duplicate_of FROM ticket_embeddings e WHERE e.ticket_id = ` + t + `.id), ` + t + `.merged_into`
}

// ticketFields are where ticketColumns are scanned to, in their order.
func ticketFields(t *Ticket) []any {
	return []any{&t.ID, &t.CustomerID, &t.Subject, &t.Status, &t.Team, &t.Priority,
		&t.DraftReply, &t.TriageJobID, &t.CreatedAt, &t.UpdatedAt,
		&t.Assignee, &t.FollowUpOf, &t.FirstResponseAt, &t.LastCustomerMessageAt, &t.DraftWrittenAt, &t.DraftJobID, &t.SolvedAt,
		&t.SupportAddress, &t.DraftSources, &t.PossibleDuplicateOf, &t.MergedInto}
}

func scanTicket(row pgx.Row) (*Ticket, error) {
	var t Ticket
	if err := row.Scan(ticketFields(&t)...); err != nil {
		return nil, interpretError(err)
	}
	return &t, nil
}

// InsertTicket opens a ticket and numbers it, its first message from the
// customer written now; an unknown customer is ErrUnknownCustomer.
func (s *Store) InsertTicket(ctx context.Context, p *InsertTicketParams) (*Ticket, error) {
	return one(ctx, s, func(b *Batch, t *Ticket) { b.InsertTicket(p, t) })
}

// InsertTicket queues InsertTicket; into gets the ticket.
//
// With into nil, nothing reads the row back and nothing checks it, so that
// the commit can go with it (Tx): an unknown customer is still
// ErrUnknownCustomer, from the foreign key.
func (b *Batch) InsertTicket(p *InsertTicketParams, into *Ticket) {
	if into == nil {
		b.b.Queue(insertTicketUnreadSQL, insertTicketArgs(p)...)
		return
	}
	b.b.Queue(insertTicketSQL, insertTicketArgs(p)...).QueryRow(func(row pgx.Row) error {
		t, err := insertedTicket(p, row)
		if err == nil {
			*into = *t
		}
		return err
	})
}

// COALESCE evaluates nextval only when the caller brings no number. The
// unread form returns nothing: a row nobody reads is still built and sent.
const insertTicketUnreadSQL = `INSERT INTO tickets (id, customer_id, subject, follow_up_of, triage_job_id, last_customer_message_at, support_address, team)
	VALUES (COALESCE($1, 'T-' || nextval('ticket_number_seq')), $2, $3, $4, $5, now(), $6, $7)`

var insertTicketSQL = insertTicketUnreadSQL + ` RETURNING ` + ticketColumns

func insertTicketArgs(p *InsertTicketParams) []any {
	return []any{nullIfEmpty(p.ID), p.CustomerID, p.Subject, nullIfEmpty(p.FollowUpOf), p.TriageJobID, nullIfEmpty(p.SupportAddress), nullIfEmpty(p.Team)}
}

func insertedTicket(p *InsertTicketParams, row pgx.Row) (*Ticket, error) {
	t, err := scanTicket(row)
	var ce *constraintError
	switch {
	case errors.As(err, &ce) && ce.constraint == "tickets_customer_id_fkey":
		return nil, fmt.Errorf("insert ticket for %s: %w", p.CustomerID, ErrUnknownCustomer)
	case err != nil:
		return nil, fmt.Errorf("insert ticket for %s: %w", p.CustomerID, err)
	}
	return t, nil
}

// NextTicketID queues the numbering of a ticket not yet written, so that
// the rows that name it can be queued before it exists; now gets the
// transaction's time, which will be the ticket's created_at.
func (b *Batch) NextTicketID(id *string, now *time.Time) {
	b.b.Queue(`SELECT 'T-' || nextval('ticket_number_seq'), now()`).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(id, now); err != nil {
			return fmt.Errorf("number a ticket: %w", err)
		}
		return nil
	})
}

// TicketNumbers are what a ticket not yet written is numbered with.
type TicketNumbers struct {
	TicketID  string
	Now       time.Time // the transaction's time: the ticket's created_at
	MessageID int64     // its first message's (NextMessageID)
	JobID     int64     // its triage job's (NextJobID), when asked for
}

// NextTicketNumbers queues NextTicketID, NextMessageID and, with job,
// NextJobID as one statement: a new ticket's numbers, taken before its
// rows and its job are queued.
func (b *Batch) NextTicketNumbers(job bool, into *TicketNumbers) {
	sql, dest := nextTicketNumbersSQL, []any{&into.TicketID, &into.Now, &into.MessageID}
	if job {
		sql, dest = nextTicketNumbersWithJobSQL, append(dest, &into.JobID)
	}
	b.b.Queue(sql).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(dest...); err != nil {
			return fmt.Errorf("number a ticket: %w", err)
		}
		return nil
	})
}

const (
	nextTicketNumbersSQL        = `SELECT 'T-' || nextval('ticket_number_seq'), now(), ` + nextMessageID
	nextTicketNumbersWithJobSQL = `SELECT 'T-' || nextval('ticket_number_seq'), now(), ` + nextMessageID + `,
		` + nextJobID
)

// GetTicket returns the ticket with the given id, or ErrNotFound.
func (s *Store) GetTicket(ctx context.Context, id string) (*Ticket, error) {
	return one(ctx, s, func(b *Batch, t *Ticket) { b.GetTicket(id, t) })
}

// GetTicket queues GetTicket; into gets the ticket.
func (b *Batch) GetTicket(id string, into *Ticket) {
	queueRow(b, "get ticket", id, scanTicket, into, getTicketSQL, id)
}

var getTicketSQL = `SELECT ` + ticketColumns + ` FROM tickets WHERE id = $1`

// TicketEmbedding returns the ticket's vector, nil before triage writes
// it; ErrNotFound for no such ticket.
func (s *Store) TicketEmbedding(ctx context.Context, id string) ([]float32, error) {
	v, err := one(ctx, s, func(b *Batch, into *[]float32) { b.TicketEmbedding(id, into) })
	if err != nil {
		return nil, err
	}
	return *v, nil
}

// TicketEmbedding queues TicketEmbedding; into gets the vector.
func (b *Batch) TicketEmbedding(id string, into *[]float32) {
	b.b.Queue(`SELECT e.embedding FROM tickets t LEFT JOIN ticket_embeddings e ON e.ticket_id = t.id WHERE t.id = $1`, id).
		QueryRow(func(row pgx.Row) error {
			if err := row.Scan(into); err != nil {
				return fmt.Errorf("embedding of %s: %w", id, interpretError(err))
			}
			return nil
		})
}

// SetTicketTriageJob records which job triages the ticket.
func (s *Store) SetTicketTriageJob(ctx context.Context, id string, jobID int64) error {
	return exec(ctx, s, func(b *Batch) { mustFind(b.SetTicketTriageJob(id, jobID), id) })
}

// SetTicketTriageJob queues SetTicketTriageJob for a ticket the
// transaction holds locked (see writeTicket).
func (b *Batch) SetTicketTriageJob(id string, jobID int64) *pgx.QueuedQuery {
	return b.writeTicket(id, `triage_job_id = $2`, jobID)
}

// ListTicketsParams select a page of tickets, newest first. Each filter
// applies when set; each has an index in this order.
type ListTicketsParams struct {
	CustomerID string
	Status     vocab.Status
	Team       string
	Assignee   string
	// SLABreached keeps the tickets with a breached SLA target; SLADueWithin
	// those with a running clock due within it from now (not yet breached).
	SLABreached  bool
	SLADueWithin time.Duration
	Before       *TicketKey // only tickets older than this one (the previous page's last)
	Limit        int
}

// TicketKey is a ticket's place in the newest-first order.
type TicketKey struct {
	CreatedAt time.Time
	ID        string
}

// ListTickets returns a page of tickets, newest first.
func (s *Store) ListTickets(ctx context.Context, p *ListTicketsParams) ([]*Ticket, error) {
	var beforeAt *time.Time
	var beforeID *string
	if p.Before != nil {
		beforeAt, beforeID = &p.Before.CreatedAt, &p.Before.ID
	}
	// Each filter is written out only when it is set, so that the planner
	// sees a plain equality and picks that filter's index.
	where, args := []string{"true"}, []any{}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	for _, f := range []struct{ column, value string }{{"customer_id", p.CustomerID}, {"status", string(p.Status)}, {"team", p.Team}, {"assignee", p.Assignee}} {
		if f.value != "" {
			add(f.column+" = $%d", f.value)
		}
	}
	if p.SLABreached {
		where = append(where, `id IN (SELECT ticket_id FROM ticket_slas WHERE breached)`)
	}
	if p.SLADueWithin > 0 {
		add(`id IN (SELECT ticket_id FROM ticket_slas
			WHERE least(first_response_due, next_response_due, resolution_due) BETWEEN now() AND now() + $%d::interval)`,
			p.SLADueWithin.String())
	}
	if beforeAt != nil {
		args = append(args, *beforeAt, *beforeID)
		where = append(where, fmt.Sprintf("(created_at, id) < ($%d, $%d)", len(args)-1, len(args)))
	}
	args = append(args, p.Limit)
	rows, err := s.db.Query(ctx, `SELECT `+ticketColumns+` FROM tickets WHERE `+strings.Join(where, " AND ")+`
		ORDER BY created_at DESC, id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	tickets, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Ticket, error) { return scanTicket(row) })
	if err != nil {
		return nil, fmt.Errorf("list tickets: %w", err)
	}
	return tickets, nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// SetTicketClassification queues recording the team and priority that
// triage chose. Like SetTicketEmbedding it does not check that the ticket
// is there (its transaction's triage result names it by foreign key, and
// so holds it), so that the commit can go with it (Tx).
func (b *Batch) SetTicketClassification(id, team string, priority int) {
	b.writeTicket(id, `team = $2, priority = $3`, team, priority)
}

// SetTicketDraftReply records the answer that triage job jobID suggests
// to the agent, if that job is still the ticket's: a job that a newer
// customer message replaced writes nothing over its successor's draft.
func (s *Store) SetTicketDraftReply(ctx context.Context, id, draft string, jobID int64) error {
	if err := exec(ctx, s, func(b *Batch) { b.SetTicketDraftReply(id, draft, jobID, nil) }); err != nil {
		return fmt.Errorf("set draft of %s: %w", id, err)
	}
	return nil
}

// SetTicketDraftReply queues SetTicketDraftReply.
func (b *Batch) SetTicketDraftReply(id, draft string, jobID int64, sources []string) {
	if sources == nil {
		sources = []string{}
	}
	b.b.Queue(`UPDATE tickets SET draft_reply = $2, draft_job_id = $3, draft_written_at = now(), updated_at = now(), draft_sources = $4
		WHERE id = $1 AND triage_job_id = $3`, id, draft, jobID, sources)
}

// SetTicketEmbedding queues recording the ticket's vector, in place of
// any earlier one, and, unless duplicateOf is "", the ticket it may
// duplicate, on the same row (an earlier mark stays otherwise). A ticket
// that is gone gets no vector. Neither writes the ticket's row (migrations
// 027 and 031).
//
// The ticket's row is locked first, as an update of its status or team
// locks it before its trigger names the transaction on the vector's row
// (migration 027): so the two never deadlock, and one waits for the other.
// Without the lock, a status changed while the first vector is written
// would update no vector's row (it sees none yet), and an index that read
// the vector before that change committed would keep the old status.
func (b *Batch) SetTicketEmbedding(id string, embedding []float32, duplicateOf string) {
	var of *string
	if duplicateOf != "" {
		of = &duplicateOf
	}
	b.b.Queue(`INSERT INTO ticket_embeddings (ticket_id, embedding, possible_duplicate_of) SELECT id, $2, $3 FROM tickets WHERE id = $1 FOR NO KEY UPDATE
		ON CONFLICT (ticket_id) DO UPDATE SET embedding = excluded.embedding, changed_xid = pg_current_xact_id(),
			possible_duplicate_of = coalesce(excluded.possible_duplicate_of, ticket_embeddings.possible_duplicate_of)`, id, embedding, of)
}

// writeTicket queues an update of the ticket that nothing checks.
//
// The ticket setters of Batch are for a use case that read the ticket
// FOR UPDATE earlier in its transaction (LockTicket): nothing can delete
// the row before the commit, so they check nothing, and the commit goes in
// the trip that writes them (Tx.Commit), a trip fewer for a reply or a
// customer's message. The Store method of the same name, which has locked
// nothing, checks (mustFind).
func (b *Batch) writeTicket(id, set string, args ...any) *pgx.QueuedQuery {
	return b.b.Queue(`UPDATE tickets SET `+set+`, updated_at = now() WHERE id = $1`, append([]any{id}, args...)...)
}

func (s *Store) updateTicket(ctx context.Context, id, set string, args ...any) error {
	return exec(ctx, s, func(b *Batch) { b.updateTicket(id, set, args...) })
}

// updateTicket queues an update of the ticket; a ticket that is not there
// is ErrNotFound when the batch is sent.
func (b *Batch) updateTicket(id, set string, args ...any) {
	mustFind(b.writeTicket(id, set, args...), id)
}

// mustFind makes q, an update of ticket id, ErrNotFound when it found no
// row.
func mustFind(q *pgx.QueuedQuery, id string) {
	q.Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("update ticket %s: %w", id, ErrNotFound)
		}
		return nil
	})
}

// LockTicket returns the ticket, locked for the rest of the caller's
// transaction so that changes to it do not interleave; or ErrNotFound.
func (s *Store) LockTicket(ctx context.Context, id string) (*Ticket, error) {
	return one(ctx, s, func(b *Batch, t *Ticket) { b.LockTicket(id, t) })
}

// LockTicket queues LockTicket; into gets the ticket.
func (b *Batch) LockTicket(id string, into *Ticket) {
	queueRow(b, "lock ticket", id, scanTicket, into, `SELECT `+ticketColumns+` FROM tickets WHERE id = $1 FOR UPDATE`, id)
}

// SetTicketStatus changes the status; solved_at follows it, for autoclose.
func (s *Store) SetTicketStatus(ctx context.Context, id string, status vocab.Status) error {
	return exec(ctx, s, func(b *Batch) { mustFind(b.SetTicketStatus(id, status), id) })
}

// SetTicketStatus queues SetTicketStatus for a ticket the transaction
// holds locked (see writeTicket).
func (b *Batch) SetTicketStatus(id string, status vocab.Status) *pgx.QueuedQuery {
	return b.writeTicket(id, `status = $2, solved_at = CASE WHEN $2 = 'solved' THEN now() ELSE NULL END`, status)
}

// SetTicketAssignee changes the assignee; "" leaves the ticket unassigned.
func (s *Store) SetTicketAssignee(ctx context.Context, id, agent string) error {
	return exec(ctx, s, func(b *Batch) { mustFind(b.SetTicketAssignee(id, agent), id) })
}

// SetTicketAssignee queues SetTicketAssignee for a ticket the transaction
// holds locked (see writeTicket).
func (b *Batch) SetTicketAssignee(id, agent string) *pgx.QueuedQuery {
	return b.writeTicket(id, `assignee = $2`, nullIfEmpty(agent))
}

// SetTicketTeam changes the team.
func (s *Store) SetTicketTeam(ctx context.Context, id, team string) error {
	return exec(ctx, s, func(b *Batch) { mustFind(b.SetTicketTeam(id, team), id) })
}

// SetTicketTeam queues SetTicketTeam for a ticket the transaction holds
// locked (see writeTicket).
func (b *Batch) SetTicketTeam(id, team string) *pgx.QueuedQuery {
	return b.writeTicket(id, `team = $2`, team)
}

// SetTicketPriority changes the priority.
func (s *Store) SetTicketPriority(ctx context.Context, id string, priority int) error {
	return exec(ctx, s, func(b *Batch) { mustFind(b.SetTicketPriority(id, priority), id) })
}

// SetTicketPriority queues SetTicketPriority for a ticket the transaction
// holds locked (see writeTicket).
func (b *Batch) SetTicketPriority(id string, priority int) *pgx.QueuedQuery {
	return b.writeTicket(id, `priority = $2`, priority)
}

// CustomerWrote queues, for a ticket the transaction holds locked
// (see writeTicket), that the customer wrote on it now and that triage
// job triageJobID, numbered already, triages it: one new version of the
// ticket's row, where the two were written one after the other.
func (b *Batch) CustomerWrote(id string, triageJobID int64) *pgx.QueuedQuery {
	return b.writeTicket(id, `last_customer_message_at = now(), triage_job_id = $2`, triageJobID)
}

// AgentResponded records an agent's reply: the first one is the ticket's
// first response.
func (s *Store) AgentResponded(ctx context.Context, id string) error {
	return exec(ctx, s, func(b *Batch) { mustFind(b.AgentResponded(id), id) })
}

// AgentResponded queues AgentResponded for a ticket the transaction holds
// locked (see writeTicket).
func (b *Batch) AgentResponded(id string) *pgx.QueuedQuery {
	return b.writeTicket(id, `first_response_at = coalesce(first_response_at, now())`)
}

// SolvedBefore returns up to limit solved tickets that were solved before
// the time, oldest first, for autoclose.
func (s *Store) SolvedBefore(ctx context.Context, before time.Time, limit int) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT id FROM tickets WHERE status = 'solved' AND solved_at < $1 ORDER BY solved_at LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("solved tickets: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("solved tickets: %w", err)
	}
	return ids, nil
}
