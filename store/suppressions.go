package store

import (
	"context"
	"fmt"
	"time"

	"github.com/helpdesk-dev/helpdesk/vocab"

	"github.com/jackc/pgx/v5"
)

// Suppression is an address that bounced for good.
type Suppression struct {
	Address   string    `json:"address"`
	Status    string    `json:"status"`
	TicketID  *string   `json:"ticket_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Suppress puts the address on the suppression list for the duration, or
// renews it there.
func (s *Store) Suppress(ctx context.Context, address, status, ticketID string, d time.Duration) error {
	_, err := s.db.Exec(ctx, `INSERT INTO suppressions (address, status, ticket_id, expires_at) VALUES (lower($1), $2, $3, now() + $4::interval)
		ON CONFLICT (address) DO UPDATE SET status = EXCLUDED.status, ticket_id = EXCLUDED.ticket_id, created_at = now(), expires_at = EXCLUDED.expires_at`,
		address, status, nullIfEmpty(ticketID), d)
	if err != nil {
		return fmt.Errorf("suppress %s: %w", address, interpretError(err))
	}
	return nil
}

// ListSuppressions returns the addresses on the list now, newest first.
func (s *Store) ListSuppressions(ctx context.Context) ([]*Suppression, error) {
	rows, err := s.db.Query(ctx, `SELECT address, status, ticket_id, created_at, expires_at FROM suppressions
		WHERE expires_at > now() ORDER BY created_at DESC, address`)
	if err != nil {
		return nil, fmt.Errorf("list suppressions: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[Suppression])
	if err != nil {
		return nil, fmt.Errorf("list suppressions: %w", err)
	}
	return list, nil
}

// ClearSuppression takes the address off the list; ErrNotFound if it was not on it.
func (s *Store) ClearSuppression(ctx context.Context, address string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM suppressions WHERE address = lower($1)`, address)
	if err != nil {
		return fmt.Errorf("clear suppression of %s: %w", address, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("suppression of %s: %w", address, ErrNotFound)
	}
	return nil
}

// TicketOfEmail returns the ticket and direction of the message with this Message-ID.
func (s *Store) TicketOfEmail(ctx context.Context, emailMessageID string) (ticketID string, direction vocab.Direction, err error) {
	err = s.db.QueryRow(ctx, `SELECT ticket_id, direction FROM messages WHERE email_message_id = $1`, emailMessageID).Scan(&ticketID, &direction)
	if err != nil {
		return "", "", fmt.Errorf("message %s: %w", emailMessageID, interpretError(err))
	}
	return ticketID, direction, nil
}
