package store

import (
	"context"
	"fmt"
)

// InsertAPIKey stores the SHA-256 of a new key for the actor.
func (s *Store) InsertAPIKey(ctx context.Context, actor string, keySHA256 []byte) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO api_keys (actor, key_sha256) VALUES ($1, $2)`, actor, keySHA256); err != nil {
		return fmt.Errorf("insert api key for %s: %w", actor, interpretError(err))
	}
	return nil
}

// APIKeyActor returns the actor of the unrevoked key with this SHA-256, or ErrNotFound.
func (s *Store) APIKeyActor(ctx context.Context, keySHA256 []byte) (string, error) {
	var actor string
	err := s.db.QueryRow(ctx, `SELECT actor FROM api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL`, keySHA256).Scan(&actor)
	if err != nil {
		return "", fmt.Errorf("look up api key: %w", interpretError(err))
	}
	return actor, nil
}
