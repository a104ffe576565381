package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AckLimits bound the acknowledgements: per address in Window, and in
// all per hour (0: no bound of that kind).
type AckLimits struct {
	PerAddress int
	Window     time.Duration
	PerHour    int
}

// ClaimAcknowledgement records an acknowledgement of ticketID to address
// unless that would pass a limit; it reports whether it did. Claims for
// one address wait for each other until the caller's transaction ends, so
// two new tickets at once cannot both pass its count; the count per hour
// is taken without a lock, which would make every new ticket wait for
// every other, so it may be passed by the claims in flight at once.
func (s *Store) ClaimAcknowledgement(ctx context.Context, address, ticketID string, l AckLimits) (claimed bool, err error) {
	err = exec(ctx, s, func(b *Batch) { b.ClaimAcknowledgement(address, ticketID, l, &claimed) })
	return claimed, err
}

// ClaimAcknowledgement queues ClaimAcknowledgement; claimed gets its
// answer. The lock is a statement of its own, run and waited for before
// the counts' snapshot is taken, so the counts see (in their own
// snapshot) what the claim before them committed.
func (b *Batch) ClaimAcknowledgement(address, ticketID string, l AckLimits, claimed *bool) {
	b.b.Queue(lockAcknowledgementsSQL, address)
	b.b.Queue(claimAcknowledgementSQL, address, ticketID, l.PerAddress, l.Window, l.PerHour).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(claimed); err != nil {
			return fmt.Errorf("acknowledgement to %s: %w", address, interpretError(err))
		}
		return nil
	})
}

const lockAcknowledgementsSQL = `SELECT pg_advisory_xact_lock(hashtext('helpdesk.ack.' || lower($1)))`

const claimAcknowledgementSQL = `WITH claim AS (INSERT INTO acknowledgements (address, ticket_id)
		SELECT lower($1), $2
		WHERE ($3 = 0 OR (SELECT count(*) FROM acknowledgements WHERE address = lower($1) AND sent_at > now() - $4::interval) < $3)
		  AND ($5 = 0 OR (SELECT count(*) FROM acknowledgements WHERE sent_at > now() - interval '1 hour') < $5)
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
