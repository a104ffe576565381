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

// MayAcknowledge queues whether an acknowledgement to the address of
// customer customerID is within the limits now, read without the claim's
// lock; may gets the answer. A no stands: within its window a count only
// grows (but for what leaves the window meanwhile), so a customer at its
// limit, as one who writes often is, waits for no other claim and
// composes nothing. A yes is ClaimAcknowledgement's to confirm, under the
// lock. An unknown customer has nothing counted: yes.
func (b *Batch) MayAcknowledge(customerID string, l AckLimits, may *bool) {
	b.b.Queue(mayAcknowledgeSQL, customerID, l.PerAddress, l.Window, l.PerHour).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(may); err != nil {
			return fmt.Errorf("acknowledgement of %s: %w", customerID, interpretError(err))
		}
		return nil
	})
}

// lockAcknowledgementsSQL takes the claim's lock of an address. Its first
// key is the schema's, as the migrations' lock is: desks that share a
// database, each in its schema, and the tests, hundreds of schemas at
// once with the same customers, do not wait for each other's claims.
const lockAcknowledgementsSQL = `SELECT pg_advisory_xact_lock(hashtext(current_schema()), hashtext('helpdesk.ack.' || lower($1)))`

// withinAckLimits is the condition that the acknowledgements to address
// in the window (perAddress of them at most) and to everyone in the last
// hour (perHour at most) leave room for one more; 0 bounds nothing.
func withinAckLimits(address, perAddress, window, perHour string) string {
	return `(` + perAddress + ` = 0 OR (SELECT count(*) FROM acknowledgements WHERE address = ` + address +
		` AND sent_at > now() - ` + window + `::interval) < ` + perAddress + `)
		AND (` + perHour + ` = 0 OR (SELECT count(*) FROM acknowledgements WHERE sent_at > now() - interval '1 hour') < ` + perHour + `)`
}

var (
	claimAcknowledgementSQL = `WITH claim AS (INSERT INTO acknowledgements (address, ticket_id)
		SELECT lower($1), $2 WHERE ` + withinAckLimits("lower($1)", "$3", "$4", "$5") + `
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM claim)`
	mayAcknowledgeSQL = `SELECT ` + withinAckLimits("(SELECT lower(email) FROM customers WHERE id = $1)", "$2", "$3", "$4")
)

// PruneAcknowledgements forgets acknowledgements older than window, which
// no longer count toward any limit.
func (s *Store) PruneAcknowledgements(ctx context.Context, window time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM acknowledgements WHERE sent_at < now() - $1::interval`, window)
	if err != nil {
		return 0, fmt.Errorf("prune acknowledgements: %w", err)
	}
	return tag.RowsAffected(), nil
}
