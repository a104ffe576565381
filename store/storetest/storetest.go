// Package storetest gives each test a freshly migrated schema of its own in a real PostgreSQL, and counts its round trips.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
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

// NewPool gives the test a migrated schema of its own (River's tables and
// ours) and returns a pool whose connections use it. The schema is dropped
// when the test ends, or, under Main, emptied for another test when only
// its rows changed. A database that cannot be reached fails the test:
// these tests are about real PostgreSQL and never skip.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := takeSchema()
	reused := schema != ""
	if !reused {
		schema = createSchema(ctx, tb)
	}
	// Registered before the pool's Close, so it runs after it: no
	// connection of the test's is left on the schema.
	tb.Cleanup(func() {
		if err := release(schema); err != nil {
			tb.Errorf("end schema %s: %v", schema, err)
		}
	})
	pool := openPool(ctx, tb, schemaURL(tb, schema))
	if !reused {
		if _, err := store.MigrateUp(ctx, pool); err != nil {
			tb.Fatalf("migrate test schema: %v", err)
		}
		if err := keepSchema(ctx, schema); err != nil {
			tb.Fatalf("keep test schema: %v", err)
		}
	}
	return pool
}

// openPool opens the tests' kind of pool on dbURL (20 connections, trips
// counted) and closes it when the test ends.
func openPool(ctx context.Context, tb testing.TB, dbURL string) *pgxpool.Pool {
	tb.Helper()
	config, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		tb.Fatalf("parse test database URL: %v", err)
	}
	config.MaxConns = 20
	config.ConnConfig.Tracer = tripTracer{}
	// The test's schema (or database, a template's copy) names the pool's
	// backends in pg_stat_activity: which test a session is, and whose CPU
	// MeasureCost counts.
	name := config.ConnConfig.RuntimeParams["search_path"]
	if name == "" {
		name = config.ConnConfig.Database
	}
	config.ConnConfig.RuntimeParams["application_name"] = name
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		tb.Fatalf("open test pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// NewURL creates an empty schema of its own for the test and returns a
// database URL whose connections use it (search_path), for code under test
// that opens its own pool. The schema is dropped when the test ends.
func NewURL(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := createSchema(ctx, tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dropSchema(ctx, schema); err != nil {
			tb.Error(err)
		}
	})
	return schemaURL(tb, schema)
}

// createSchema creates an empty schema with a name of its own.
func createSchema(ctx context.Context, tb testing.TB) string {
	tb.Helper()
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
	return schema
}

// schemaURL is the database URL whose connections use the schema.
func schemaURL(tb testing.TB, schema string) string {
	tb.Helper()
	u, err := url.Parse(URL())
	if err != nil {
		tb.Fatalf("parse DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema) // pgx sends unknown parameters as run-time settings
	u.RawQuery = q.Encode()
	return u.String()
}

// Trips counts the round trips to PostgreSQL that queries made with one
// context: each query or statement sent alone is one, each batch one
// however many statements it holds. Tests hold a use case to its budget
// with it.
type Trips struct {
	mu    sync.Mutex
	trips [][]string // the statements of each trip
	stmts []Statement
}

// Statement is one statement a counted context sent, whole, with its
// arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Statements lists every statement sent so far (since Reset).
func (t *Trips) Statements() []Statement {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Statement(nil), t.stmts...)
}

type tripsKey struct{}

// CountTrips returns a context whose queries, on a pool from NewPool, are
// counted in the returned Trips. Queries made with other contexts (River's,
// another test's) are not.
func CountTrips(ctx context.Context) (context.Context, *Trips) {
	t := &Trips{}
	return context.WithValue(ctx, tripsKey{}, t), t
}

// N is the number of trips so far.
func (t *Trips) N() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.trips)
}

// NWithout is the number of trips so far that held no statement
// containing text (matched within a statement's first 60 characters):
// the trips of a use case without another's that may ride along.
func (t *Trips) NWithout(text string) (n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, trip := range t.trips {
		if !slices.ContainsFunc(trip, func(s string) bool { return strings.Contains(s, text) }) {
			n++
		}
	}
	return n
}

// Together reports whether one trip held a statement containing each of
// the texts (matched within a statement's first 60 characters).
func (t *Trips) Together(texts ...string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, trip := range t.trips {
		all := true
		for _, text := range texts {
			all = all && slices.ContainsFunc(trip, func(s string) bool { return strings.Contains(s, text) })
		}
		if all {
			return true
		}
	}
	return false
}

// Reset forgets the trips and statements so far.
func (t *Trips) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.trips, t.stmts = nil, nil
}

// String lists the trips, one a line, each with its statements' first words.
func (t *Trips) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for i, trip := range t.trips {
		fmt.Fprintf(&b, "%d: %s\n", i+1, strings.Join(trip, " | "))
	}
	return b.String()
}

func (t *Trips) add(sqls ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	short := make([]string, len(sqls))
	for i, s := range sqls {
		s = strings.Join(strings.Fields(s), " ")
		if len(s) > 60 {
			s = s[:60] + "…"
		}
		short[i] = s
	}
	t.trips = append(t.trips, short)
}

// Failing counts the statements that a context from FailStatements made fail.
type Failing struct {
	sql string
	n   atomic.Int64
}

// N is how many statements have failed so far.
func (f *Failing) N() int { return int(f.n.Load()) }

type failingKey struct{}

// FailStatements returns a context whose statements that contain sql, on
// a pool from NewPool, fail before they are sent, as if the context had
// ended (pgx then leaves the connection usable): a fault where no server
// would give one, such as after a commit.
func FailStatements(ctx context.Context, sql string) (context.Context, *Failing) {
	f := &Failing{sql: sql}
	return context.WithValue(ctx, failingKey{}, f), f
}

// failing returns an ended context in place of ctx for a statement that
// FailStatements names.
func failing(ctx context.Context, sqls ...string) context.Context {
	f, ok := ctx.Value(failingKey{}).(*Failing)
	if !ok || !slices.ContainsFunc(sqls, func(sql string) bool { return strings.Contains(sql, f.sql) }) {
		return ctx
	}
	f.n.Add(1)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	return ended
}

// tripTracer tells Trips of the queries made with their contexts, and
// makes fail those that FailStatements names.
type tripTracer struct{}

func (tripTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if t, ok := ctx.Value(tripsKey{}).(*Trips); ok {
		t.add(data.SQL)
		t.mu.Lock()
		t.stmts = append(t.stmts, Statement{SQL: data.SQL, Args: data.Args})
		t.mu.Unlock()
	}
	return failing(ctx, data.SQL)
}

func (tripTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (tripTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	sqls := make([]string, len(data.Batch.QueuedQueries))
	for i, q := range data.Batch.QueuedQueries {
		sqls[i] = q.SQL
	}
	if t, ok := ctx.Value(tripsKey{}).(*Trips); ok {
		t.add(sqls...)
		t.mu.Lock()
		for _, q := range data.Batch.QueuedQueries {
			t.stmts = append(t.stmts, Statement{SQL: q.SQL, Args: q.Arguments})
		}
		t.mu.Unlock()
	}
	return failing(ctx, sqls...)
}

func (tripTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (tripTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
