package storetest

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/helpdesk-dev/helpdesk/store"
)

// A Template is a migrated database filled once, by Build, and copied for
// each test or benchmark that asks for it: filling a million rows takes a
// minute and a half here, a copy of the files about five seconds.
type Template struct {
	// Name tells templates apart.
	Name string
	// Build fills the freshly migrated template.
	Build func(ctx context.Context, pool *pgxpool.Pool) error
	// Source is what Build does, as text (its SQL): it counts in the
	// template's digest with the schema, so that a change to it makes a new
	// template and drops the old one.
	Source string
}

//go:embed million.sql
var millionSQL string

// Million is a help desk with a history: 100,000 customers, 1,000,000
// tickets (1 % open, 1 % pending, a third of the last three days' solved,
// the rest closed, over three teams) and 1,000,000 messages with their
// Message-IDs, and a status event for each ticket that is no longer open. The tickets carry no
// embeddings: the vector index's growth is BenchmarkSimilar's.
var Million = Template{Name: "million", Source: millionSQL, Build: func(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, millionSQL)
	return err
}}

// InTurns runs a growth benchmark's turn on the empty desk and on the
// million, three times in turn, and reports each million turn's rate (what
// turn returns) as a ratio to the empty turn before it: turns side by side
// share the machine's state, which drifts over minutes.
func InTurns(b *testing.B, empty, million func(b *testing.B) float64) {
	for i := 1; i <= 3; i++ {
		var emptyRate float64
		b.Run(fmt.Sprintf("Empty%d", i), func(b *testing.B) { emptyRate = empty(b) })
		b.Run(fmt.Sprintf("Million%d", i), func(b *testing.B) {
			b.ReportMetric(million(b)/emptyRate, "ratio_to_empty")
		})
	}
}

// NewPoolFrom returns a pool on a database of the test's own, copied from
// the template, which is migrated and built first when no process has built
// it yet for this schema (the database helpdesk_tmpl_<name>_<digest>, kept
// between runs; one of an older schema is dropped). The copy is dropped when
// the test ends.
func NewPoolFrom(tb testing.TB, tmpl Template) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	baseURL := URL()
	admin, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		tb.Fatalf("PostgreSQL is not reachable at %s: %v\n"+
			"Set DATABASE_URL, or run the README's test command (make test), which finds or starts one.", baseURL, err)
	}
	defer admin.Close(ctx)

	source, err := ensureTemplate(ctx, admin, baseURL, tmpl)
	if err != nil {
		tb.Fatalf("template %s: %v", tmpl.Name, err)
	}
	copyName := "helpdesk_copy_" + randomHex(8)
	// FILE_COPY copies the files instead of writing every block to the WAL
	// (PostgreSQL 15's default), the faster of the two for a big template.
	strategy := ""
	if serverVersion(ctx, admin) >= 150000 {
		strategy = " STRATEGY FILE_COPY"
	}
	started := time.Now()
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+copyName+` TEMPLATE `+pgx.Identifier{source}.Sanitize()+strategy); err != nil {
		tb.Fatalf("copy template %s: %v", source, err)
	}
	tb.Logf("copied %s in %v", source, time.Since(started).Round(time.Millisecond))
	tb.Cleanup(func() {
		conn, err := pgx.Connect(ctx, baseURL)
		if err != nil {
			tb.Errorf("drop %s: %v", copyName, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE `+copyName+` WITH (FORCE)`); err != nil {
			tb.Errorf("drop %s: %v", copyName, err)
		}
	})
	copyURL, err := databaseURL(baseURL, copyName)
	if err != nil {
		tb.Fatal(err)
	}
	return openPool(ctx, tb, copyURL)
}

// ensureTemplate builds the template under a session lock, so that two
// test processes build it once between them, and under a name of its own
// until it is whole: a build cut short leaves nothing a copy would use.
func ensureTemplate(ctx context.Context, admin *pgx.Conn, baseURL string, tmpl Template) (string, error) {
	digest, err := schemaDigest(tmpl.Source)
	if err != nil {
		return "", err
	}
	// Unquoted names are folded to lower case; these are quoted, and lower case for psql's sake.
	prefix := "helpdesk_tmpl_" + strings.ToLower(tmpl.Name) + "_"
	name := prefix + digest
	lock := fnv.New64a()
	_, _ = lock.Write([]byte(prefix))
	key := int64(lock.Sum64())
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, key) }()

	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database WHERE starts_with(datname, $1)`, prefix)
	if err != nil {
		return "", fmt.Errorf("list templates: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("list templates: %w", err)
	}
	built := false
	for _, n := range names {
		if n == name {
			built = true
			continue
		}
		// Of an older schema or fill, or a build cut short.
		if _, err := admin.Exec(ctx, `DROP DATABASE `+pgx.Identifier{n}.Sanitize()+` WITH (FORCE)`); err != nil {
			return "", fmt.Errorf("drop %s: %w", n, err)
		}
	}
	if built {
		return name, nil
	}

	building := prefix + "building"
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	buildURL, err := databaseURL(baseURL, building)
	if err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, buildURL)
	if err != nil {
		return "", fmt.Errorf("open: %w", err)
	}
	if _, err := store.MigrateUp(ctx, pool); err != nil {
		pool.Close()
		return "", fmt.Errorf("migrate: %w", err)
	}
	if err := tmpl.Build(ctx, pool); err != nil {
		pool.Close()
		return "", fmt.Errorf("build: %w", err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		pool.Close()
		return "", fmt.Errorf("vacuum: %w", err)
	}
	pool.Close()
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{building}.Sanitize()+` RENAME TO `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("rename: %w", err)
	}
	return name, nil
}

// schemaDigest names the schema a template was migrated to (our
// migrations and River's, by their SQL: River's version in the build
// information is missing from a test binary of package main, which would
// then name the same schema otherwise and drop the other's template as an
// older one) and what filled it.
func schemaDigest(source string) (string, error) {
	migrations, err := store.Migrations()
	if err != nil {
		return "", err
	}
	river, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", source)
	for _, m := range migrations {
		fmt.Fprintf(h, "%d %s\n", m.Version, m.Up)
	}
	for _, m := range river.AllVersions() {
		fmt.Fprintf(h, "river %d %s\n", m.Version, m.SQLUp)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func serverVersion(ctx context.Context, conn *pgx.Conn) int {
	var v int
	_ = conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&v)
	return v
}

// databaseURL is baseURL naming another database.
func databaseURL(baseURL, database string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("DATABASE_URL must be a postgres:// URL to copy a template database")
	}
	u.Path = "/" + database
	return u.String(), nil
}
