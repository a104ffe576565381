package store_test

import (
	"context"
	"testing"

	"helpdesk/store"
	"helpdesk/store/storetest"
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
