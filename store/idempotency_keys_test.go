package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestClaimIdempotencyKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := withAda(t)
	const actor = "customer:C-0001"
	ticketNumber := func(t *testing.T) (n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value('ticket_number_seq'), 0)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// claim runs a request's first trip: the claim, then a ticket's
	// number; answer, when the claim took the key, saves the answer.
	claim := func(ctx context.Context, key, fp string, retention time.Duration, answer int) (c store.Claim, ticketID string, err error) {
		err = store.Run(ctx, pool, func(tx *store.Tx) error {
			var first store.Batch
			var now time.Time
			first.ClaimIdempotencyKey(actor, key, []byte(fp), retention, &c)
			first.NextTicketID(&ticketID, &now)
			if err := tx.Store().Send(ctx, &first); err != nil {
				return err
			}
			tx.Later(func(b *store.Batch) { b.SaveIdempotentResponse(actor, key, answer, []byte(`{"n": 1}`)) })
			return nil
		})
		return c, ticketID, err
	}

	c, ticketID, err := claim(ctx, "k1", "fp", time.Hour, 201)
	if err != nil || !c.Sent || !c.Claimed || c.Prior != nil || ticketID == "" {
		t.Fatalf("a new key: claim %+v, ticket %q, err %v; want it claimed and numbered", c, ticketID, err)
	}

	t.Run("AKeyTakenStopsTheTripWithTheFirstAnswer", func(t *testing.T) {
		before := ticketNumber(t)
		c, ticketID, err := claim(ctx, "k1", "fp2", time.Hour, 500)
		if !errors.Is(err, store.ErrKeyTaken) || !errors.Is(err, store.ErrConflict) {
			t.Errorf("err = %v, want ErrKeyTaken, an ErrConflict", err)
		}
		if !c.Sent || c.Claimed || c.Prior == nil || c.Prior.Status != 201 || string(c.Prior.Fingerprint) != "fp" {
			t.Errorf("claim %+v (prior %+v), want not claimed, with the first answer (201, fp)", c, c.Prior)
		}
		if ticketID != "" || ticketNumber(t) != before {
			t.Errorf("ticket %q, sequence %d → %d: the statements after the claim ran", ticketID, before, ticketNumber(t))
		}
	})

	t.Run("AKeyOlderThanTheRetentionIsTakenOver", func(t *testing.T) {
		if _, err := pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '2 hours' WHERE key = 'k1'`); err != nil {
			t.Fatal(err)
		}
		c, ticketID, err := claim(ctx, "k1", "fp3", time.Hour, 202)
		if err != nil || !c.Claimed || c.Prior != nil || ticketID == "" {
			t.Errorf("claim %+v, ticket %q, err %v; want the old key taken over", c, ticketID, err)
		}
		k, err := store.New(pool).GetIdempotencyKey(ctx, actor, "k1", time.Hour)
		if err != nil || k.Status != 202 || string(k.Fingerprint) != "fp3" {
			t.Errorf("key %+v (%v), want the new request's", k, err)
		}
	})

	// A copy waits on a claim in flight, of a new key or a takeover of an
	// old one, and fails once it commits.
	for name, key := range map[string]string{"AClaimInFlightMakesACopyWaitAndFail": "k2", "ATakeoverInFlightMakesACopyWaitAndFail": "k1"} {
		t.Run(name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '2 hours' WHERE key = 'k1'`); err != nil {
				t.Fatal(err)
			}
			tx := store.Begin(pool)
			defer tx.Rollback(ctx)
			var first store.Claim
			tx.Later(func(b *store.Batch) { b.ClaimIdempotencyKey(actor, key, []byte("fp"), time.Hour, &first) })
			ptx, err := tx.Pgx(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !first.Claimed {
				t.Fatalf("first claim %+v", first)
			}
			done := make(chan error, 1)
			var copyClaim store.Claim
			go func() {
				c, _, err := claim(ctx, key, "fp", time.Hour, 500)
				copyClaim = c
				done <- err
			}()
			storetest.AwaitBlockedBy(t, pool, ptx.Conn().PgConn().PID(), done)
			tx.Later(func(b *store.Batch) { b.SaveIdempotentResponse(actor, key, 201, []byte(`{}`)) })
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			copyErr := <-done
			// Its read came before the first committed: it has no answer yet.
			if !errors.Is(copyErr, store.ErrKeyTaken) || copyClaim.Claimed || copyClaim.Prior != nil {
				t.Errorf("copy: claim %+v, err %v; want ErrKeyTaken with no answer read", copyClaim, copyErr)
			}
		})
	}
}
