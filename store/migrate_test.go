package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("RunningUpTwiceChangesNothing", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		pool := storetest.NewPool(t) // applies everything once

		again, err := store.MigrateUp(ctx, pool)
		if err != nil {
			t.Fatalf("second MigrateUp: %v", err)
		}
		if len(again.Versions) != 0 {
			t.Errorf("second MigrateUp applied %v, want nothing", again.Versions)
		}
		pending, err := store.PendingMigrations(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 0 {
			t.Errorf("pending after migrate: %v", pending)
		}
	})

	t.Run("DownThenUpRestoresTheSchema", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		pool := storetest.NewPool(t)
		all, err := store.Migrations()
		if err != nil {
			t.Fatal(err)
		}

		down, err := store.MigrateDown(ctx, pool, len(all), true)
		if err != nil {
			t.Fatalf("MigrateDown: %v", err)
		}
		if len(down.Versions) != len(all) {
			t.Errorf("rolled back %v, want all %d", down.Versions, len(all))
		}
		var tables int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'helpdesk_migration'`).Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Errorf("%d tables left after rolling everything back", tables)
		}

		up, err := store.MigrateUp(ctx, pool)
		if err != nil {
			t.Fatalf("MigrateUp after down: %v", err)
		}
		if len(up.Versions) != len(all) || up.RiverVersion == 0 {
			t.Errorf("MigrateUp after down = %+v, want all %d of ours and River's", up, len(all))
		}
	})

	// Each replica of a deploy may run `helpdesk migrate` as it starts.
	t.Run("RunsAtOnceOnANewSchemaApplyEachMigrationOnce", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		pool := openPool(t, storetest.NewURL(t))
		all, err := store.Migrations()
		if err != nil {
			t.Fatal(err)
		}
		const runs = 4
		type run struct {
			result *store.MigrateResult
			err    error
		}
		done := make(chan run, runs)
		for range runs {
			go func() {
				r, err := store.MigrateUp(ctx, pool)
				done <- run{r, err}
			}()
		}
		applied := map[int]int{}
		for range runs {
			r := <-done
			if r.err != nil {
				t.Errorf("MigrateUp beside %d others: %v", runs-1, r.err)
				continue
			}
			for _, v := range r.result.Versions {
				applied[v]++
			}
			if r.result.RiverVersion == 0 {
				t.Errorf("a run reports River's schema at version 0")
			}
		}
		for _, m := range all {
			if applied[m.Version] != 1 {
				t.Errorf("migration %03d applied %d times, want once", m.Version, applied[m.Version])
			}
		}
	})

	// Two desks may share a database, each in its schema, and the tests
	// make several hundred schemas a run: a run waits only for another on
	// its own schema.
	t.Run("ARunWaitsForAnotherOnItsSchemaOnly", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		busy, other := openPool(t, storetest.NewURL(t)), openPool(t, storetest.NewURL(t))
		// A run in progress on busy: its lock, held by a session.
		holder, err := busy.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Release()
		if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, store.MigrationLockID); err != nil {
			t.Fatal(err)
		}
		waiting := make(chan error, 1)
		go func() {
			_, err := store.MigrateUp(ctx, busy)
			waiting <- err
		}()
		storetest.AwaitBlockedBy(t, busy, holder.Conn().PgConn().PID(), waiting)
		if len(waiting) > 0 {
			t.Fatalf("MigrateUp ran beside a run in progress on its schema (err %v)", <-waiting)
		}

		// A deadline only to fail rather than hang: the run takes well under a second.
		otherCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := store.MigrateUp(otherCtx, other); err != nil {
			t.Fatalf("MigrateUp of another schema while one waits: %v", err)
		}
		if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, store.MigrationLockID); err != nil {
			t.Fatal(err)
		}
		if err := <-waiting; err != nil {
			t.Fatalf("MigrateUp once the run before it ended: %v", err)
		}
		for name, pool := range map[string]*pgxpool.Pool{"busy": busy, "other": other} {
			if pending, err := store.PendingMigrations(ctx, pool); err != nil || len(pending) != 0 {
				t.Errorf("%s schema: pending %v, %v; want none", name, pending, err)
			}
		}
	})
}

func TestUpgradeMovesQueuedJobsToTheirKindsQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	all, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	const queues = 6                                                                  // the migration that gave jobs their queues
	if _, err := store.MigrateDown(ctx, pool, len(all)-queues+1, false); err != nil { // back to before it
		t.Fatal(err)
	}
	// Jobs as the previous version left them: all in 'default'.
	if _, err := pool.Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, priority, finalized_at)
		VALUES ('triage', '{"ticket_id":"T-500001"}', 'default', 'available', 5, 1, NULL),
		       ('email_outbound', '{"message_id":1}', 'default', 'retryable', 8, 1, NULL),
		       ('idempotency_prune', '{}', 'default', 'scheduled', 25, 1, NULL),
		       ('triage', '{"ticket_id":"T-500002"}', 'default', 'completed', 5, 1, now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MigrateUp(ctx, pool); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT kind || '/' || state || '→' || queue FROM river_job ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	want := []string{"triage/available→triage", "email_outbound/retryable→email", "idempotency_prune/scheduled→maintenance", "triage/completed→default"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after the upgrade: %v, want %v", got, want)
	}
}

// TestUpgradeMovesVectorsToTheirTable: migration 027 takes each ticket's
// vector out of its row into ticket_embeddings, with the transaction that
// last changed it, and its down migration puts it back.
func TestUpgradeMovesVectorsToTheirTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	migrateDownTo(t, pool, 26) // back to before 027
	if _, err := pool.Exec(ctx, `INSERT INTO customers (id, email, name) VALUES ('C-0001', 'ada@example.com', 'Ada');
		INSERT INTO tickets (id, customer_id, subject, embedding) VALUES ('T-1', 'C-0001', 'S', '{1,0}'), ('T-2', 'C-0001', 'S', NULL)`); err != nil {
		t.Fatal(err)
	}
	var before int64
	if err := pool.QueryRow(ctx, `SELECT changed_xid::text::bigint FROM tickets WHERE id = 'T-1'`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MigrateUp(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Run("EachVectorMovesWithItsTransaction", func(t *testing.T) {
		var ids string
		var vec []float32
		var by int64
		if err := pool.QueryRow(ctx, `SELECT string_agg(ticket_id, ','), min(embedding::text)::real[], min(changed_xid::text::bigint)
			FROM ticket_embeddings`).Scan(&ids, &vec, &by); err != nil {
			t.Fatal(err)
		}
		if ids != "T-1" || !slices.Equal(vec, []float32{1, 0}) || by != before {
			t.Errorf("ticket_embeddings holds %s %v by %d, want T-1 [1 0] by %d", ids, vec, by, before)
		}
	})
	t.Run("TheDownMigrationPutsThemBack", func(t *testing.T) {
		migrateDownTo(t, pool, 26)
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM tickets WHERE (id = 'T-1' AND embedding = '{1,0}') OR (id = 'T-2' AND embedding IS NULL)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("%d of the two tickets as they were before the upgrade", n)
		}
	})
}

// migrateDownTo takes the schema down to our migration version, whatever
// migrations came after the test was written.
func migrateDownTo(t *testing.T, pool *pgxpool.Pool, version int) {
	t.Helper()
	all, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, m := range all {
		if m.Version > version {
			steps++
		}
	}
	if _, err := store.MigrateDown(context.Background(), pool, steps, false); err != nil {
		t.Fatal(err)
	}
}

// openPool opens a pool on dbURL, closed when the test ends.
func openPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestSequencesAreTheColumns holds the names the store draws message and
// job numbers from, written into its statements, to the sequences of the
// columns they number: a migration of ours or River's that renamed one
// would otherwise have the numbers drawn from elsewhere, or fail at once.
func TestSequencesAreTheColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	var message, job int64
	var b store.Batch
	b.NextMessageID(&message)
	b.NextJobID(&job)
	if err := st.Send(ctx, &b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table string
		drawn int64
	}{{"messages", message}, {"river_job", job}} {
		var last int64
		err := pool.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence($1, 'id')::regclass), 0)`, c.table).Scan(&last)
		if err != nil {
			t.Fatal(err)
		}
		if last != c.drawn {
			t.Errorf("%s.id's sequence last gave %d, the store drew %d: it draws from another sequence", c.table, last, c.drawn)
		}
	}
}
