package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// AwaitBlockedBy returns once a session waits on a lock that the session
// holder (a backend's pid) holds, or the statement meant to wait has
// sent its outcome on done, which it puts back for the caller: what the
// test does next then happens while that statement waits, or after it.
// It waits on that state, not on a clock: a statement that never blocks
// ends the wait by ending.
func AwaitBlockedBy(tb testing.TB, pool *pgxpool.Pool, holder uint32, done chan error) {
	tb.Helper()
	for {
		select {
		case err := <-done:
			done <- err
			return
		default:
		}
		var blocked bool
		if err := pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`, int32(holder)).Scan(&blocked); err != nil {
			tb.Fatal(err)
		}
		if blocked {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
