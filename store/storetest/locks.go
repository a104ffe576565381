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
// ends the wait by ending. Only the sessions of pool's own schema count
// (its application_name, openPool's): another test's session, blocked
// on an advisory lock that is not the schema's, is none of this test's.
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
			`SELECT EXISTS (SELECT FROM pg_stat_activity
				WHERE application_name = current_setting('application_name') AND $1 = ANY (pg_blocking_pids(pid)))`, int32(holder)).Scan(&blocked); err != nil {
			tb.Fatal(err)
		}
		if blocked {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SampleLockWaits counts, every 20 ms until the returned function is
// called, the database's sessions waiting on a lock (pg_stat_activity,
// wait_event_type Lock: row locks, advisory locks, …), and returns their
// mean and the number of samples taken (each a transaction).
func SampleLockWaits(pool *pgxpool.Pool) func() (mean float64, samples int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var total, count int
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
				return
			}
			total, count = total+n, count+1
		}
	}()
	return func() (float64, int) {
		cancel()
		<-done
		if count == 0 {
			return 0, 0
		}
		return float64(total) / float64(count), count
	}
}
