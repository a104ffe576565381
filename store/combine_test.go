package store_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestCombiner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE combined (unit int PRIMARY KEY, xact xid8 NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	// unit writes its number and its transaction's id.
	unit := func(n int, runs *atomic.Int32) func(tx *store.Tx) error {
		return func(tx *store.Tx) error {
			if runs != nil {
				runs.Add(1)
			}
			_, err := tx.Exec(ctx, `INSERT INTO combined VALUES ($1, pg_current_xact_id())`, n)
			return err
		}
	}
	xacts := func(t *testing.T, units ...int) map[int]string {
		t.Helper()
		got := map[int]string{}
		rows, err := pool.Query(ctx, `SELECT unit, xact::text FROM combined WHERE unit = ANY($1)`, units)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				n int
				x string
			)
			if err := rows.Scan(&n, &x); err != nil {
				t.Fatal(err)
			}
			got[n] = x
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// busy starts a unit that holds c's one group at the database until
	// release is closed, then queues the units, and returns once they all
	// wait; wait gives each one's answer, by unit.
	busy := func(t *testing.T, c *store.Combiner, first int, units map[int]func(*store.Tx) error, ctxs map[int]context.Context) (release func(), wait func() map[int]error) {
		t.Helper()
		var (
			held     = make(chan struct{})
			released = make(chan struct{})
			wg       sync.WaitGroup
			mu       sync.Mutex
			errs     = map[int]error{}
		)
		answer := func(n int, err error) {
			mu.Lock()
			defer mu.Unlock()
			errs[n] = err
		}
		wg.Go(func() {
			answer(first, c.Run(ctx, func(tx *store.Tx) error {
				close(held)
				<-released
				return unit(first, nil)(tx)
			}))
		})
		<-held
		for n, fn := range units {
			unitCtx := ctx
			if ctxs[n] != nil {
				unitCtx = ctxs[n]
			}
			wg.Go(func() {
				// A panic is the answer of the unit whose goroutine it reached.
				defer func() {
					if p := recover(); p != nil {
						answer(n, fmt.Errorf("%w: %v", errPanicked, p))
					}
				}()
				answer(n, c.Run(unitCtx, fn))
			})
		}
		for c.Waiting() < len(units) {
			runtime.Gosched()
		}
		return func() { close(released) }, func() map[int]error { wg.Wait(); return errs }
	}

	t.Run("AUnitAloneRunsAtOnceInATransactionOfItsOwn", func(t *testing.T) {
		t.Parallel()
		c := store.NewCombiner(pool, 1, 16)
		combined, combinedTrips := storetest.CountTrips(ctx)
		if err := c.Run(combined, unit(1, nil)); err != nil {
			t.Fatal(err)
		}
		alone, aloneTrips := storetest.CountTrips(ctx)
		if err := store.Run(alone, pool, unit(2, nil)); err != nil {
			t.Fatal(err)
		}
		got := xacts(t, 1, 2)
		if len(got) != 2 || got[1] == got[2] {
			t.Errorf("transactions %v, want one each", got)
		}
		if combinedTrips.String() != aloneTrips.String() {
			t.Errorf("trips through the combiner:\n%s\nwant Run's:\n%s", combinedTrips, aloneTrips)
		}
	})

	t.Run("UnitsThatWaitedCommitInOneTransaction", func(t *testing.T) {
		t.Parallel()
		c := store.NewCombiner(pool, 1, 16)
		release, wait := busy(t, c, 10, map[int]func(*store.Tx) error{11: unit(11, nil), 12: unit(12, nil), 13: unit(13, nil)}, nil)
		release()
		noErrors(t, wait())
		got := xacts(t, 10, 11, 12, 13)
		if len(got) != 4 || got[11] != got[12] || got[12] != got[13] || got[10] == got[11] {
			t.Errorf("transactions %v: want 10's alone and the three that waited in one", got)
		}
	})

	t.Run("AGroupTakesNoMoreThanItsBound", func(t *testing.T) {
		t.Parallel()
		c := store.NewCombiner(pool, 1, 2)
		release, wait := busy(t, c, 20, map[int]func(*store.Tx) error{21: unit(21, nil), 22: unit(22, nil), 23: unit(23, nil)}, nil)
		release()
		noErrors(t, wait())
		got := xacts(t, 21, 22, 23)
		distinct := map[string]bool{}
		for _, x := range got {
			distinct[x] = true
		}
		if len(got) != 3 || len(distinct) != 2 {
			t.Errorf("transactions %v: want the three that waited in two", got)
		}
	})

	t.Run("AUnitThatFailsFailsAloneAndTheOthersCommit", func(t *testing.T) {
		t.Parallel()
		c := store.NewCombiner(pool, 1, 16)
		var runs31, runs33 atomic.Int32
		refused := errors.New("refused")
		release, wait := busy(t, c, 30, map[int]func(*store.Tx) error{
			31: unit(31, &runs31),
			32: func(tx *store.Tx) error { return refused },
			33: unit(33, &runs33),
			// A statement that fails at the database, as a step saved twice does.
			34: unit(30, nil),
		}, nil)
		release()
		errs := wait()
		if errs[30] != nil || errs[31] != nil || errs[33] != nil {
			t.Errorf("answers %v: 30, 31 and 33 should have committed", errs)
		}
		if !errors.Is(errs[32], refused) {
			t.Errorf("unit 32: %v, want its own error", errs[32])
		}
		if pgErr := (*pgconn.PgError)(nil); !errors.As(errs[34], &pgErr) || pgErr.Code != "23505" {
			t.Errorf("unit 34: %v, want its key's conflict", errs[34])
		}
		if got := xacts(t, 31, 33); len(got) != 2 || got[31] == got[33] {
			t.Errorf("transactions %v: 31 and 33 should have run again alone", got)
		}
		// Once in the group, unless a failure before them stopped it, and
		// once alone.
		if runs31.Load() > 2 || runs33.Load() > 2 {
			t.Errorf("31 ran %d times, 33 %d: want twice at most", runs31.Load(), runs33.Load())
		}
	})

	t.Run("AUnitThatPanicsPanicsInItsOwnGoroutineAndTheOthersCommit", func(t *testing.T) {
		t.Parallel()
		c := store.NewCombiner(pool, 1, 16)
		release, wait := busy(t, c, 60, map[int]func(*store.Tx) error{
			61: unit(61, nil),
			62: func(tx *store.Tx) error { panic("the unit's own bug") },
			63: unit(63, nil),
		}, nil)
		release()
		errs := wait()
		if errs[60] != nil || errs[61] != nil || errs[63] != nil || !errors.Is(errs[62], errPanicked) {
			t.Errorf("answers %v: want 62's panic in its own goroutine and the others committed", errs)
		}
		if got := xacts(t, 61, 63); len(got) != 2 {
			t.Errorf("rows of %v: want 61's and 63's", got)
		}
		// The combiner goes on: its place at the database was given back.
		if err := c.Run(ctx, unit(64, nil)); err != nil {
			t.Error(err)
		}
	})

	t.Run("AGroupThatMayHaveCommittedIsNotRunAgainAndEachUnitIsTold", func(t *testing.T) {
		t.Parallel()
		c := store.NewCombiner(pool, 1, 16)
		var runs71, runs72 atomic.Int32
		unreadable := errors.New("unreadable")
		// Units whose statements all wait for the commit's trip, so that
		// the read fails after the commit whatever their order.
		later := func(n int, runs *atomic.Int32, more func(b *store.Batch)) func(tx *store.Tx) error {
			return func(tx *store.Tx) error {
				runs.Add(1)
				tx.Later(func(b *store.Batch) {
					b.Write(`INSERT INTO combined VALUES ($1, pg_current_xact_id())`, n)
					more(b)
				})
				return nil
			}
		}
		release, wait := busy(t, c, 70, map[int]func(*store.Tx) error{
			71: later(71, &runs71, func(b *store.Batch) { b.ReadFailingAfterTheCommit(unreadable) }),
			72: later(72, &runs72, func(*store.Batch) {}),
		}, nil)
		release()
		errs := wait()
		if errs[70] != nil || !errors.Is(errs[71], unreadable) || !errors.Is(errs[72], unreadable) {
			t.Errorf("answers %v: want 70 committed alone, and 71 and 72 told of the read that failed", errs)
		}
		if runs71.Load() != 1 || runs72.Load() != 1 {
			t.Errorf("71 ran %d times, 72 %d: want once each, their writes committed", runs71.Load(), runs72.Load())
		}
		if got := xacts(t, 71, 72); len(got) != 2 || got[71] != got[72] {
			t.Errorf("transactions %v: want 71's and 72's rows, committed together", got)
		}
	})

	t.Run("AUnitGivenUpWhileItWaitsNeverRuns", func(t *testing.T) {
		t.Parallel()
		c := store.NewCombiner(pool, 1, 16)
		gone, giveUp := context.WithCancel(ctx)
		var runs atomic.Int32
		release, wait := busy(t, c, 40, map[int]func(*store.Tx) error{41: unit(41, &runs), 42: unit(42, nil)},
			map[int]context.Context{41: gone})
		giveUp()
		for c.Waiting() > 1 {
			runtime.Gosched()
		}
		release()
		errs := wait()
		if !errors.Is(errs[41], context.Canceled) || errs[42] != nil {
			t.Errorf("answers %v: want 41 given up and 42 committed", errs)
		}
		if runs.Load() != 0 {
			t.Errorf("41 ran %d times after it was given up", runs.Load())
		}
		if got := xacts(t, 41, 42); len(got) != 1 {
			t.Errorf("rows of %v: want 42's alone", got)
		}
	})
}

// errPanicked is the answer of a unit whose Run panicked (busy).
var errPanicked = errors.New("panicked")

// noErrors fails the test for each unit that answered with an error.
func noErrors(t *testing.T, errs map[int]error) {
	t.Helper()
	for n, err := range errs {
		if err != nil {
			t.Errorf("unit %d: %v", n, err)
		}
	}
}
