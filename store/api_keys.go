package store

import (
	"context"
	"fmt"
	"time"

	"github.com/helpdesk-dev/helpdesk/vocab"

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

// Caller is whom a key or a session stands for.
type Caller struct {
	Actor vocab.Actor
	Admin bool // an agent with the admin flag
	KeyID int64
}

// callerSQL finds the caller of the keys k: not revoked, not of a
// disabled agent; it records when the key was last used, at most once a
// minute.
const callerSQL = `, used AS (
			UPDATE api_keys SET last_used_at = now()
			WHERE id = (SELECT id FROM k) AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
		)
		SELECT k.actor, coalesce(a.admin, false), k.id FROM k LEFT JOIN agents a ON 'agent:' || a.name = k.actor
		WHERE a.disabled_at IS NULL`

// APIKeyCaller returns the caller of the key with this SHA-256, or
// ErrNotFound when there is no such key, it was revoked, or its agent is
// disabled.
func (s *Store) APIKeyCaller(ctx context.Context, keySHA256 []byte) (*Caller, error) {
	var c Caller
	err := s.db.QueryRow(ctx, `WITH k AS (SELECT id, actor FROM api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL)`+callerSQL,
		keySHA256).Scan(&c.Actor, &c.Admin, &c.KeyID)
	if err != nil {
		return nil, fmt.Errorf("look up api key: %w", interpretError(err))
	}
	return &c, nil
}

// APIKeyActor is APIKeyCaller's actor.
func (s *Store) APIKeyActor(ctx context.Context, keySHA256 []byte) (vocab.Actor, error) {
	c, err := s.APIKeyCaller(ctx, keySHA256)
	if err != nil {
		return "", err
	}
	return c.Actor, nil
}

// InsertUISession opens a session for the key, until ttl from now.
func (s *Store) InsertUISession(ctx context.Context, idSHA256 []byte, keyID int64, ttl time.Duration) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO ui_sessions (id_sha256, key_id, expires_at) VALUES ($1, $2, now() + $3::interval)`,
		idSHA256, keyID, ttl); err != nil {
		return fmt.Errorf("open ui session: %w", interpretError(err))
	}
	return nil
}

// UISessionCaller returns the caller of an open session: ErrNotFound when
// there is none, it expired, or its key was revoked or its agent disabled.
// It records when the session was last used, at most once a minute.
func (s *Store) UISessionCaller(ctx context.Context, idSHA256 []byte) (*Caller, error) {
	var c Caller
	err := s.db.QueryRow(ctx, `WITH sess AS (
			UPDATE ui_sessions SET last_used_at = CASE WHEN last_used_at < now() - interval '1 minute' THEN now() ELSE last_used_at END
			WHERE id_sha256 = $1 AND expires_at > now() RETURNING key_id
		), k AS (SELECT id, actor FROM api_keys WHERE id = (SELECT key_id FROM sess) AND revoked_at IS NULL)`+callerSQL,
		idSHA256).Scan(&c.Actor, &c.Admin, &c.KeyID)
	if err != nil {
		return nil, fmt.Errorf("look up ui session: %w", interpretError(err))
	}
	return &c, nil
}

// DeleteUISession ends a session; one that is not there is no error.
func (s *Store) DeleteUISession(ctx context.Context, idSHA256 []byte) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM ui_sessions WHERE id_sha256 = $1`, idSHA256); err != nil {
		return fmt.Errorf("end ui session: %w", err)
	}
	return nil
}

// PruneUISessions forgets the sessions that expired.
func (s *Store) PruneUISessions(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM ui_sessions WHERE expires_at <= now()`)
	if err != nil {
		return 0, fmt.Errorf("prune ui sessions: %w", err)
	}
	return tag.RowsAffected(), nil
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
	tag, err := s.db.Exec(ctx, `WITH ended AS (DELETE FROM ui_sessions WHERE key_id = $1)
		UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("revoke api key %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("api key %d: %w", id, ErrNotFound)
	}
	return nil
}
