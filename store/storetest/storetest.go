// Package storetest gives each test a freshly migrated schema of its own in a real PostgreSQL.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/store"
)

// DefaultURL is the database tests use when DATABASE_URL is not set: the
// local PostgreSQL that River's own tests expect too.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// URL returns DATABASE_URL, or DefaultURL when it is not set.
func URL() string {
	if url := os.Getenv("DATABASE_URL"); url != "" {
		return url
	}
	return DefaultURL
}

// NewPool creates a schema of its own for the test, migrates it (River's
// tables and ours) and returns a pool whose connections use it. The schema is
// dropped when the test ends. A database that cannot be reached fails the
// test: these tests are about real PostgreSQL and never skip.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	config, err := pgxpool.ParseConfig(NewURL(tb))
	if err != nil {
		tb.Fatalf("parse test database URL: %v", err)
	}
	config.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		tb.Fatalf("open test pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	if _, err := store.MigrateUp(ctx, pool); err != nil {
		tb.Fatalf("migrate test schema: %v", err)
	}
	return pool
}

// NewURL creates an empty schema of its own for the test and returns a
// database URL whose connections use it (search_path), for code under test
// that opens its own pool. The schema is dropped when the test ends.
func NewURL(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dbURL := URL()
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Fatalf("PostgreSQL is not reachable at %s: %v\n"+
			"Set DATABASE_URL, or run the README's test command (make test), which finds or starts one.", dbURL, err)
	}
	defer admin.Close(ctx)

	schema := "test_" + randomHex(8)
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		tb.Fatalf("create schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})

	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatalf("parse DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema) // pgx sends unknown parameters as run-time settings
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
