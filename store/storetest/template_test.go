package storetest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestATemplateIsBuiltOnceAndEachCopyIsItsOwn(t *testing.T) {
	t.Parallel()
	var builds atomic.Int32
	tmpl := storetest.Template{
		Name: "storetest",
		Build: func(ctx context.Context, pool *pgxpool.Pool) error {
			builds.Add(1)
			_, err := pool.Exec(ctx, `INSERT INTO customers (id, email, name) VALUES ('C-0001', 'one@example.com', 'One')`)
			return err
		},
	}
	first := storetest.NewPoolFrom(t, tmpl)
	second := storetest.NewPoolFrom(t, tmpl)
	ctx := context.Background()

	if _, err := first.Exec(ctx, `INSERT INTO customers (id, email, name) VALUES ('C-0002', 'two@example.com', 'Two')`); err != nil {
		t.Fatal(err)
	}
	count := func(pool *pgxpool.Pool) (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM customers`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := count(first); got != 2 {
		t.Errorf("first copy: %d customers, want the template's one and its own", got)
	}
	if got := count(second); got != 1 {
		t.Errorf("second copy: %d customers, want the template's one only", got)
	}
	// A build in an earlier run leaves the template in place: this run builds at most once.
	if got := builds.Load(); got > 1 {
		t.Errorf("built %d times, want once at most", got)
	}
	var migrated bool
	if err := second.QueryRow(ctx, `SELECT to_regclass('river_job') IS NOT NULL AND to_regclass('helpdesk_migration') IS NOT NULL`).Scan(&migrated); err != nil || !migrated {
		t.Errorf("the copy is not migrated (River's tables and ours): %v %v", migrated, err)
	}
}
