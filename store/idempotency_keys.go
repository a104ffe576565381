package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// IdempotencyKey is a caller's name for one creating request, and the answer
// it got.
type IdempotencyKey struct {
	Actor       string
	Key         string
	Fingerprint []byte // SHA-256 of the request's method, path and canonical body
	Status      int    // 0 until the request's transaction commits its answer
	Response    []byte
	CreatedAt   time.Time
}

// Matches reports whether a request with this fingerprint repeats the one
// that claimed the key.
func (k *IdempotencyKey) Matches(fingerprint []byte) bool {
	return bytes.Equal(k.Fingerprint, fingerprint)
}

// ErrKeyTaken is an Idempotency-Key that an earlier request claimed
// within the retention: its claim fails, and the statements queued after
// it in the same trip are not run.
var ErrKeyTaken = fmt.Errorf("idempotency key taken: %w", ErrConflict)

// Claim is the answer of a queued ClaimIdempotencyKey.
type Claim struct {
	Sent    bool // the claim went to the database
	Claimed bool // and took the key: the request is the first
	// Prior is the key as an earlier request left it, read with the
	// claim: that request's answer, when it had one then.
	Prior *IdempotencyKey
}

// ClaimIdempotencyKey queues the claim of (actor, key) for a request, as
// the first statements of its transaction: a read of the key's answer, and
// the key's insert, which takes over a key older than retention as if new.
// A key taken makes the insert fail with ErrKeyTaken, which
// aborts the transaction before anything queued after the claim runs: a
// repeated request writes nothing and takes no ticket number, and its
// answer came with the claim (c.Prior). A concurrent claim waits on the
// unique index until the first transaction ends, and then fails if it
// committed; the read, done before the wait, has no answer for it then.
func (b *Batch) ClaimIdempotencyKey(actor, key string, fingerprint []byte, retention time.Duration, c *Claim) {
	b.b.Queue(getIdempotencyKeySQL, actor, key, retention).QueryRow(func(row pgx.Row) error {
		c.Sent = true
		k, err := scanIdempotencyKey(row, actor, key)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		c.Prior = k
		return err
	})
	b.b.Queue(claimIdempotencyKeySQL, actor, key, fingerprint, retention).Exec(func(pgconn.CommandTag) error {
		c.Claimed = true
		return nil
	})
}

// claimIdempotencyKeySQL inserts the key; a key there already is taken
// over if older than the retention, or fails as a plain insert of a key
// taken would (migration 030), without writing a row version. A new key,
// the case of every new request, costs the insert alone.
const claimIdempotencyKeySQL = `WITH claimed AS (
		INSERT INTO idempotency_keys (actor, key, fingerprint) VALUES ($1, $2, $3)
		ON CONFLICT ON CONSTRAINT idempotency_keys_actor_key DO NOTHING RETURNING 1)
	SELECT helpdesk_idempotency_key_taken($1, $2, $3, $4::interval) WHERE NOT EXISTS (SELECT FROM claimed)`

// GetIdempotencyKey returns the key if it was claimed within retention, or ErrNotFound.
func (s *Store) GetIdempotencyKey(ctx context.Context, actor, key string, retention time.Duration) (*IdempotencyKey, error) {
	k, err := scanIdempotencyKey(s.db.QueryRow(ctx, getIdempotencyKeySQL, actor, key, retention), actor, key)
	if err != nil {
		return nil, fmt.Errorf("get idempotency key: %w", interpretError(err))
	}
	return k, nil
}

const getIdempotencyKeySQL = `SELECT fingerprint, status, response, created_at FROM idempotency_keys
	WHERE actor = $1 AND key = $2 AND created_at >= now() - $3::interval`

func scanIdempotencyKey(row pgx.Row, actor, key string) (*IdempotencyKey, error) {
	k := IdempotencyKey{Actor: actor, Key: key}
	var status *int
	if err := row.Scan(&k.Fingerprint, &status, &k.Response, &k.CreatedAt); err != nil {
		return nil, err
	}
	if status != nil {
		k.Status = *status
	}
	return &k, nil
}

// SaveIdempotentResponse records the answer of the request that claimed the key.
func (s *Store) SaveIdempotentResponse(ctx context.Context, actor, key string, status int, response []byte) error {
	if err := exec(ctx, s, func(b *Batch) { b.SaveIdempotentResponse(actor, key, status, response) }); err != nil {
		return fmt.Errorf("save idempotent response: %w", err)
	}
	return nil
}

// SaveIdempotentResponse queues SaveIdempotentResponse.
func (b *Batch) SaveIdempotentResponse(actor, key string, status int, response []byte) {
	b.b.Queue(saveIdempotentResponseSQL, actor, key, status, response)
}

const saveIdempotentResponseSQL = `UPDATE idempotency_keys SET status = $3, response = $4 WHERE actor = $1 AND key = $2`

// PruneIdempotencyKeys deletes keys older than retention and returns how many.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, retention time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < now() - $1::interval`, retention)
	if err != nil {
		return 0, fmt.Errorf("prune idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}
