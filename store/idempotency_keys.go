package store

import (
	"bytes"
	"context"
	"fmt"
	"time"

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

// ClaimIdempotencyKey claims (actor, key) for a request inside the caller's
// transaction. It returns claimed = false when the key is taken: a
// concurrent claim waits here on the unique index until the first
// transaction ends, so it then sees the first answer. A key older than
// retention is taken over as if new.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, actor, key string, fingerprint []byte, retention time.Duration) (claimed bool, err error) {
	var c Claim
	if err := exec(ctx, s, func(b *Batch) { b.ClaimIdempotencyKey(actor, key, fingerprint, retention, &c) }); err != nil {
		return false, fmt.Errorf("claim idempotency key: %w", err)
	}
	return c.Claimed, nil
}

// Claim is the answer of a queued ClaimIdempotencyKey.
type Claim struct {
	Sent    bool // the claim went to the database
	Claimed bool // and took the key: the request is the first
}

// ClaimIdempotencyKey queues ClaimIdempotencyKey; c gets its answer.
func (b *Batch) ClaimIdempotencyKey(actor, key string, fingerprint []byte, retention time.Duration, c *Claim) {
	b.b.Queue(claimIdempotencyKeySQL, actor, key, fingerprint, retention).Exec(func(tag pgconn.CommandTag) error {
		c.Sent, c.Claimed = true, tag.RowsAffected() == 1
		return nil
	})
}

const claimIdempotencyKeySQL = `INSERT INTO idempotency_keys (actor, key, fingerprint) VALUES ($1, $2, $3)
	ON CONFLICT ON CONSTRAINT idempotency_keys_actor_key DO UPDATE
		SET fingerprint = EXCLUDED.fingerprint, status = NULL, response = NULL, created_at = now()
		WHERE idempotency_keys.created_at < now() - $4::interval`

// GetIdempotencyKey returns the key if it was claimed within retention, or ErrNotFound.
func (s *Store) GetIdempotencyKey(ctx context.Context, actor, key string, retention time.Duration) (*IdempotencyKey, error) {
	k := IdempotencyKey{Actor: actor, Key: key}
	var status *int
	err := s.db.QueryRow(ctx,
		`SELECT fingerprint, status, response, created_at FROM idempotency_keys
		WHERE actor = $1 AND key = $2 AND created_at >= now() - $3::interval`,
		actor, key, retention).Scan(&k.Fingerprint, &status, &k.Response, &k.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("get idempotency key: %w", interpretError(err))
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
