package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Ticket is one customer question and what triage made of it.
type Ticket struct {
	ID          string // T-500001
	CustomerID  string
	Subject     string
	Status      string
	Team        *string // set by triage's classify step
	Priority    *int16  // 1 (urgent) … 4 (low), set by classify
	DraftReply  *string // set by triage's draft_reply step
	Embedding   []float32
	TriageJobID *int64 // the River job that triages the ticket
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// InsertTicketParams are the fields of a new ticket.
type InsertTicketParams struct {
	CustomerID string
	Subject    string
}

// TicketStatuses are the values of Ticket.Status.
var TicketStatuses = []string{"open", "pending", "solved", "closed"}

const ticketColumns = `id, customer_id, subject, status, team, priority, draft_reply, embedding, triage_job_id, created_at, updated_at`

func scanTicket(row pgx.Row) (*Ticket, error) {
	var t Ticket
	if err := row.Scan(&t.ID, &t.CustomerID, &t.Subject, &t.Status, &t.Team, &t.Priority,
		&t.DraftReply, &t.Embedding, &t.TriageJobID, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return nil, interpretError(err)
	}
	return &t, nil
}

// InsertTicket opens a ticket and numbers it; an unknown customer is ErrConflict.
func (s *Store) InsertTicket(ctx context.Context, p *InsertTicketParams) (*Ticket, error) {
	t, err := scanTicket(s.db.QueryRow(ctx,
		`INSERT INTO tickets (customer_id, subject) VALUES ($1, $2) RETURNING `+ticketColumns,
		p.CustomerID, p.Subject))
	if err != nil {
		return nil, fmt.Errorf("insert ticket for %s: %w", p.CustomerID, err)
	}
	return t, nil
}

// GetTicket returns the ticket with the given id, or ErrNotFound.
func (s *Store) GetTicket(ctx context.Context, id string) (*Ticket, error) {
	t, err := scanTicket(s.db.QueryRow(ctx, `SELECT `+ticketColumns+` FROM tickets WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("get ticket %s: %w", id, err)
	}
	return t, nil
}

// SetTicketTriageJob records which job triages the ticket.
func (s *Store) SetTicketTriageJob(ctx context.Context, id string, jobID int64) error {
	return s.updateTicket(ctx, id, `triage_job_id = $2`, jobID)
}

// ListTicketsParams select a page of tickets, newest first.
type ListTicketsParams struct {
	CustomerID string     // only this customer's, when set
	Status     string     // only this status, when set
	Before     *TicketKey // only tickets older than this one (the previous page's last)
	Limit      int
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
	rows, err := s.db.Query(ctx, `SELECT `+ticketColumns+` FROM tickets
		WHERE ($1::text IS NULL OR customer_id = $1)
		  AND ($2::text IS NULL OR status = $2)
		  AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4))
		ORDER BY created_at DESC, id DESC
		LIMIT $5`,
		nullIfEmpty(p.CustomerID), nullIfEmpty(p.Status), beforeAt, beforeID, p.Limit)
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

// SetTicketClassification records the team and priority that triage chose.
func (s *Store) SetTicketClassification(ctx context.Context, id, team string, priority int) error {
	return s.updateTicket(ctx, id, `team = $2, priority = $3`, team, priority)
}

// SetTicketDraftReply records the answer that triage suggests to the agent.
func (s *Store) SetTicketDraftReply(ctx context.Context, id, draft string) error {
	return s.updateTicket(ctx, id, `draft_reply = $2`, draft)
}

// SetTicketEmbedding records the ticket's vector.
func (s *Store) SetTicketEmbedding(ctx context.Context, id string, embedding []float32) error {
	return s.updateTicket(ctx, id, `embedding = $2`, embedding)
}

func (s *Store) updateTicket(ctx context.Context, id, set string, args ...any) error {
	tag, err := s.db.Exec(ctx, `UPDATE tickets SET `+set+`, updated_at = now() WHERE id = $1`, append([]any{id}, args...)...)
	if err != nil {
		return fmt.Errorf("update ticket %s: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("update ticket %s: %w", id, ErrNotFound)
	}
	return nil
}
