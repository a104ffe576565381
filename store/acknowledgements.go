package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClaimAcknowledgement records an acknowledgement of ticketID to address
// unless address had max of them within the window; it reports whether it
// did. Claims for one address wait for each other until the caller's
// transaction ends, so two new tickets at once cannot both pass the count.
func (s *Store) ClaimAcknowledgement(ctx context.Context, address, ticketID string, max int, window time.Duration) (claimed bool, err error) {
	err = exec(ctx, s, func(b *Batch) { b.ClaimAcknowledgement(address, ticketID, max, window, &claimed) })
	return claimed, err
}

// ClaimAcknowledgement queues ClaimAcknowledgement; claimed gets its
// answer. The lock is a statement of its own, run and waited for before
// the count's snapshot is taken, so the count sees (in its own snapshot)
// what the claim before it committed.
func (b *Batch) ClaimAcknowledgement(address, ticketID string, max int, window time.Duration, claimed *bool) {
	b.b.Queue(lockAcknowledgementsSQL, address)
	b.b.Queue(claimAcknowledgementSQL, address, ticketID, max, window).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(claimed); err != nil {
			return fmt.Errorf("acknowledgement to %s: %w", address, interpretError(err))
		}
		return nil
	})
}

const lockAcknowledgementsSQL = `SELECT pg_advisory_xact_lock(hashtext('helpdesk.ack.' || lower($1)))`

const claimAcknowledgementSQL = `WITH claim AS (INSERT INTO acknowledgements (address, ticket_id)
		SELECT lower($1), $2 WHERE (SELECT count(*) FROM acknowledgements
			WHERE address = lower($1) AND sent_at > now() - $4::interval) < $3
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM claim)`

// PruneAcknowledgements forgets acknowledgements older than window, which
// no longer count toward any limit.
func (s *Store) PruneAcknowledgements(ctx context.Context, window time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM acknowledgements WHERE sent_at < now() - $1::interval`, window)
	if err != nil {
		return 0, fmt.Errorf("prune acknowledgements: %w", err)
	}
	return tag.RowsAffected(), nil
}
