package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Message directions.
const (
	DirectionInbound  = "inbound"  // from the customer
	DirectionOutbound = "outbound" // an agent's reply to the customer
	DirectionNote     = "note"     // internal, never sent
)

// Message is one entry of a ticket's conversation.
type Message struct {
	ID             int64
	TicketID       string
	Direction      string
	Author         string
	Body           string
	EmailMessageID *string // the RFC 5322 Message-ID, when the message is or was an email
	CreatedAt      time.Time
}

// InsertMessageParams are the fields of a new message.
type InsertMessageParams struct {
	TicketID       string
	Direction      string
	Author         string
	Body           string
	EmailMessageID *string
}

const messageColumns = `id, ticket_id, direction, author, body, email_message_id, created_at`

func scanMessage(row pgx.Row) (*Message, error) {
	var m Message
	if err := row.Scan(&m.ID, &m.TicketID, &m.Direction, &m.Author, &m.Body, &m.EmailMessageID, &m.CreatedAt); err != nil {
		return nil, interpretError(err)
	}
	return &m, nil
}

// InsertMessage adds a message to a ticket; a Message-ID already stored is ErrConflict.
func (s *Store) InsertMessage(ctx context.Context, p *InsertMessageParams) (*Message, error) {
	m, err := scanMessage(s.db.QueryRow(ctx,
		`INSERT INTO messages (ticket_id, direction, author, body, email_message_id)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+messageColumns,
		p.TicketID, p.Direction, p.Author, p.Body, p.EmailMessageID))
	if err != nil {
		return nil, fmt.Errorf("insert message on %s: %w", p.TicketID, err)
	}
	return m, nil
}

// ListMessages returns a ticket's messages, oldest first.
func (s *Store) ListMessages(ctx context.Context, ticketID string) ([]*Message, error) {
	rows, err := s.db.Query(ctx, `SELECT `+messageColumns+` FROM messages WHERE ticket_id = $1 ORDER BY created_at, id`, ticketID)
	if err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", ticketID, err)
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Message, error) { return scanMessage(row) })
	if err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", ticketID, err)
	}
	return msgs, nil
}

// ThreadIDs are the Message-IDs a reply's thread headers are built from.
type ThreadIDs struct {
	Root    string   // the ticket's first message's, the thread root
	Earlier []string // every earlier message's that has one, oldest first
	Parent  string   // the newest earlier inbound message's, else Root
}

// ReplyThread collects the Message-IDs of the messages before reply on its
// ticket. The reply itself is left out explicitly (id <> reply): its own
// Message-ID is stored before the first send, and a message is never its
// own ancestor, on the first attempt or the tenth.
func (s *Store) ReplyThread(ctx context.Context, reply *Message) (*ThreadIDs, error) {
	rows, err := s.db.Query(ctx, `SELECT email_message_id, direction FROM messages
		WHERE ticket_id = $1
		  AND email_message_id IS NOT NULL
		  AND id <> $2
		  AND created_at <= $3
		ORDER BY created_at, id`, reply.TicketID, reply.ID, reply.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("thread of message %d: %w", reply.ID, err)
	}
	defer rows.Close()
	t := &ThreadIDs{}
	for rows.Next() {
		var id, direction string
		if err := rows.Scan(&id, &direction); err != nil {
			return nil, fmt.Errorf("thread of message %d: %w", reply.ID, err)
		}
		if t.Root == "" {
			t.Root = id
		}
		t.Earlier = append(t.Earlier, id)
		if direction == DirectionInbound {
			t.Parent = id
		}
	}
	if t.Parent == "" {
		t.Parent = t.Root
	}
	return t, rows.Err()
}

// GetMessage returns the message with the given id, or ErrNotFound.
func (s *Store) GetMessage(ctx context.Context, id int64) (*Message, error) {
	m, err := scanMessage(s.db.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("get message %d: %w", id, err)
	}
	return m, nil
}
