package store

import (
	"context"
	"fmt"
	"helpdesk/vocab"
	"time"

	"github.com/jackc/pgx/v5"
)

// APIKey is what is kept of a key: never the key itself.
type APIKey struct {
	ID         int64       `json:"id"`
	Actor      vocab.Actor `json:"actor"`
	CreatedAt  time.Time   `json:"created_at"`
	LastUsedAt *time.Time  `json:"last_used_at"`
	RevokedAt  *time.Time  `json:"revoked_at"`
}

// InsertAPIKey stores the SHA-256 of a new key for the actor.
func (s *Store) InsertAPIKey(ctx context.Context, actor vocab.Actor, keySHA256 []byte) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO api_keys (actor, key_sha256) VALUES ($1, $2)`, actor, keySHA256); err != nil {
		return fmt.Errorf("insert api key for %s: %w", actor, interpretError(err))
	}
	return nil
}

// APIKeyActor returns the actor of the key with this SHA-256, or
// ErrNotFound when there is no such key, it was revoked, or its agent is
// disabled. It records when the key was last used, at most once a minute.
func (s *Store) APIKeyActor(ctx context.Context, keySHA256 []byte) (vocab.Actor, error) {
	var actor vocab.Actor
	err := s.db.QueryRow(ctx, `WITH k AS (
			SELECT id, actor FROM api_keys
			WHERE key_sha256 = $1 AND revoked_at IS NULL
			  AND NOT EXISTS (SELECT 1 FROM agents a WHERE 'agent:' || a.name = api_keys.actor AND a.disabled_at IS NOT NULL)
		), used AS (
			UPDATE api_keys SET last_used_at = now()
			WHERE id = (SELECT id FROM k) AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
		)
		SELECT actor FROM k`, keySHA256).Scan(&actor)
	if err != nil {
		return "", fmt.Errorf("look up api key: %w", interpretError(err))
	}
	return actor, nil
}

// ListAPIKeys returns the keys, of one actor when actor is set, by id.
func (s *Store) ListAPIKeys(ctx context.Context, actor vocab.Actor) ([]*APIKey, error) {
	rows, err := s.db.Query(ctx, `SELECT id, actor, created_at, last_used_at, revoked_at FROM api_keys
		WHERE $1 = '' OR actor = $1 ORDER BY id`, actor)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[APIKey])
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return list, nil
}

// RevokeAPIKey stops a key from working; ErrNotFound for an unknown id.
func (s *Store) RevokeAPIKey(ctx context.Context, id int64) error {
	tag, err := s.db.Exec(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("revoke api key %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("api key %d: %w", id, ErrNotFound)
	}
	return nil
}
