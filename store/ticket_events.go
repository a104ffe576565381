package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TicketEvent is one change of a ticket: who changed what from what to what.
type TicketEvent struct {
	Actor     vocab.Actor `json:"actor"` // agent:NAME, customer:C-…, or system
	What      string      `json:"what"`  // status, assignee, team, priority, follow_up
	From      *string     `json:"from"`
	To        *string     `json:"to"`
	CreatedAt time.Time   `json:"created_at"`
}

// InsertTicketEvent records a change, in the caller's transaction with it.
func (s *Store) InsertTicketEvent(ctx context.Context, ticketID string, e *TicketEvent) error {
	if err := exec(ctx, s, func(b *Batch) { b.InsertTicketEvent(ticketID, e) }); err != nil {
		return fmt.Errorf("event on %s: %w", ticketID, err)
	}
	return nil
}

// InsertTicketEvent queues InsertTicketEvent.
func (b *Batch) InsertTicketEvent(ticketID string, e *TicketEvent) {
	b.b.Queue(`INSERT INTO ticket_events (ticket_id, actor, what, from_value, to_value) VALUES ($1, $2, $3, $4, $5)`,
		ticketID, e.Actor, e.What, e.From, e.To)
}

// ListTicketEvents returns a ticket's changes, oldest first.
func (s *Store) ListTicketEvents(ctx context.Context, ticketID string) ([]*TicketEvent, error) {
	var list []*TicketEvent
	if err := exec(ctx, s, func(b *Batch) { b.ListTicketEvents(ticketID, &list) }); err != nil {
		return nil, err
	}
	return list, nil
}

// ListTicketEvents queues ListTicketEvents; into gets the events.
func (b *Batch) ListTicketEvents(ticketID string, into *[]*TicketEvent) {
	queueRows(b, "events of "+ticketID, func(row pgx.Row) (*TicketEvent, error) {
		var e TicketEvent
		return &e, row.Scan(&e.Actor, &e.What, &e.From, &e.To, &e.CreatedAt)
	}, func(l []*TicketEvent) { *into = l },
		`SELECT actor, what, from_value, to_value, created_at FROM ticket_events WHERE ticket_id = $1 ORDER BY id`, ticketID)
}
