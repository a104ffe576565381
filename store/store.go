// Package store keeps helpdesk's data in PostgreSQL: each query defined once, as a batch method, in its table's file.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBTX is what a query needs: a pool, a connection or a transaction, so the
// same method runs alone or inside a caller's transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store runs helpdesk's queries against one DBTX.
type Store struct {
	db DBTX
}

// New returns a Store that runs its queries on db.
func New(db DBTX) *Store {
	return &Store{db: db}
}

// DefaultMaxConns is the pool's size unless DATABASE_URL names one.
const DefaultMaxConns = 40

// DefaultConnectTimeout bounds a connection to PostgreSQL when the caller
// names no other bound.
const DefaultConnectTimeout = 10 * time.Second

// Open connects a pool to the database at url and checks that it answers.
// Every connection the pool makes, its startup and authentication
// included, must be made within connectTimeout (DefaultConnectTimeout if
// zero): a server that takes connections and never answers is an error
// that names it, not a hang.
func Open(ctx context.Context, url string, connectTimeout time.Duration) (*pgxpool.Pool, error) {
	if connectTimeout <= 0 {
		connectTimeout = DefaultConnectTimeout
	}
	config, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	config.ConnConfig.ConnectTimeout = connectTimeout
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default, the number of CPUs (at least 4), starves 50
		// triage and 20 email workers and the API; ?pool_max_conns=N sets it.
		config.MaxConns = DefaultMaxConns
	}
	name := fmt.Sprintf("%s@%s:%d/%s", config.ConnConfig.User, config.ConnConfig.Host, config.ConnConfig.Port, config.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", name, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		if ctx.Err() == nil && (pingCtx.Err() != nil || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded)) {
			return nil, fmt.Errorf("database %s did not answer within %s: %w", name, connectTimeout, err)
		}
		return nil, fmt.Errorf("reach database %s: %w", name, err)
	}
	return pool, nil
}

// prefixed qualifies each of a comma-separated column list with a table
// alias ("a." + "id, name" is "a.id, a.name"), for queries that join.
func prefixed(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = alias + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}
