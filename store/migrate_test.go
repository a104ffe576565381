package store_test

import (
	"context"
	"strings"
	"testing"

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
