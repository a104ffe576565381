package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SettledCommits reads the database's committed transactions so far
// (pg_stat_database.xact_commit), after PostgreSQL 15's backends had the
// time to flush their counts: an idle backend flushes within 10 s.
func SettledCommits(tb testing.TB, pool *pgxpool.Pool) int64 {
	tb.Helper()
	time.Sleep(11 * time.Second)
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// OneRowCommits returns a function that commits one row into a table of
// the benchmark's own: the least a transaction that writes does.
func OneRowCommits(tb testing.TB, pool *pgxpool.Pool) func(context.Context) error {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS bench_commits (id bigserial PRIMARY KEY, n int NOT NULL)`); err != nil {
		tb.Fatal(err)
	}
	return func(ctx context.Context) error {
		_, err := pool.Exec(ctx, `INSERT INTO bench_commits (n) VALUES (1)`)
		return err
	}
}

// OneRowCommitRate is the commit-bound baseline: n one-row INSERTs
// (OneRowCommits), each its own transaction, from clients connections at
// once, a second.
func OneRowCommitRate(tb testing.TB, pool *pgxpool.Pool, n, clients int) float64 {
	tb.Helper()
	commit := OneRowCommits(tb, pool)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	begin := time.Now()
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := commit(context.Background()); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(begin).Seconds()
}
