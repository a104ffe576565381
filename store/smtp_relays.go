package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RelayNotBefore returns when the relay may be used again; the zero time if
// it never asked us to slow down.
func (s *Store) RelayNotBefore(ctx context.Context, relay string) (time.Time, error) {
	var t time.Time
	err := s.db.QueryRow(ctx, `SELECT not_before FROM smtp_relays WHERE relay = $1`, relay).Scan(&t)
	if err = interpretError(err); errors.Is(err, ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("relay %s: %w", relay, err)
	}
	return t, nil
}

// RecordSlowDown keeps every job away from the relay for a while that
// doubles with each consecutive request to slow down (from base up to cap,
// the second half drawn at random), and returns until when.
func (s *Store) RecordSlowDown(ctx context.Context, relay, reply string, base, cap time.Duration) (time.Time, error) {
	var t time.Time
	err := s.db.QueryRow(ctx, `INSERT INTO smtp_relays (relay, not_before, slowdowns, last_reply)
		VALUES ($1, now() + $2::interval * (0.5 + random() / 2), 1, $4)
		ON CONFLICT (relay) DO UPDATE SET
			slowdowns  = smtp_relays.slowdowns + 1,
			not_before = greatest(smtp_relays.not_before,
			             now() + least($3::interval, $2::interval * power(2, least(smtp_relays.slowdowns, 30))) * (0.5 + random() / 2)),
			last_reply = $4,
			updated_at = now()
		RETURNING not_before`, relay, base, cap, reply).Scan(&t)
	if err != nil {
		return time.Time{}, fmt.Errorf("record slow down of %s: %w", relay, err)
	}
	return t, nil
}

// RelayRecovered resets the relay's count of slow-downs after a delivery went through.
func (s *Store) RelayRecovered(ctx context.Context, relay string) error {
	_, err := s.db.Exec(ctx, `UPDATE smtp_relays SET slowdowns = 0, updated_at = now() WHERE relay = $1 AND slowdowns > 0`, relay)
	if err != nil {
		return fmt.Errorf("relay %s recovered: %w", relay, err)
	}
	return nil
}
