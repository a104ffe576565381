package storetest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// These tests run one after another, before the package's parallel tests
// start (they do not call t.Parallel): the schema a test leaves is the
// next test's, with nobody between them.
func TestASchemaIsReusedOnlyWhenOnlyItsRowsChanged(t *testing.T) {
	ctx := context.Background()

	t.Run("AFinishedTestsSchemaComesBackEmptyWithItsSequencesAtTheStart", func(t *testing.T) {
		var first string
		t.Run("First", func(t *testing.T) {
			pool := storetest.NewPool(t)
			first = schemaOf(t, pool)
			mustExec(t, pool, `INSERT INTO customers (id, email, name) VALUES ('C-0001', 'ada@example.com', 'Ada')`)
			mustExec(t, pool, `SELECT nextval('ticket_number_seq'), nextval('customer_number_seq')`)
			mustExec(t, pool, `INSERT INTO river_job (args, kind, max_attempts, queue, state) VALUES ('{}', 'noop', 1, 'default', 'available')`)
		})
		pool := storetest.NewPool(t)
		if got := schemaOf(t, pool); got != first {
			t.Fatalf("the next test got schema %s, want %s, the one the first left", got, first)
		}
		var customers, jobs int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM customers), (SELECT count(*) FROM river_job)`).Scan(&customers, &jobs); err != nil {
			t.Fatal(err)
		}
		if customers != 0 || jobs != 0 {
			t.Errorf("the reused schema holds %d customers and %d jobs, want none", customers, jobs)
		}
		var ticket, customer int64
		if err := pool.QueryRow(ctx, `SELECT nextval('ticket_number_seq'), nextval('customer_number_seq')`).Scan(&ticket, &customer); err != nil {
			t.Fatal(err)
		}
		if ticket != 500001 || customer != 100000 {
			t.Errorf("the sequences go on at %d and %d, want their starts 500001 and 100000", ticket, customer)
		}
		var migrations int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM helpdesk_migration`).Scan(&migrations); err != nil {
			t.Fatal(err)
		}
		if migrations == 0 {
			t.Error("the reused schema lost its record of migrations")
		}
	})

	// Each of these leaves the schema other than a migration made it, so it
	// is dropped, not given to another test.
	for _, tc := range []struct{ name, sql string }{
		{"ATableMade", `CREATE TABLE written (body text)`},
		{"AFunctionMade", `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no'; END $$`},
		{"ATriggerDropped", `DROP TRIGGER tickets_agent_load_insert ON tickets`},
		{"AColumnAdded", `ALTER TABLE tickets ADD COLUMN extra text`},
		{"ATablesOptionSet", `ALTER TABLE messages SET (autovacuum_enabled = false)`},
		{"AnIndexMade", `CREATE INDEX tickets_subject ON tickets (subject)`},
		{"AnEnumValueAdded", `ALTER TYPE river_job_state ADD VALUE 'parked'`},
		{"ATableAnalyzed", `ANALYZE customers`},
		{"ATableVacuumed", `VACUUM customers`},
	} {
		t.Run("DroppedAfter"+tc.name, func(t *testing.T) {
			var schema string
			t.Run("Change", func(t *testing.T) {
				pool := storetest.NewPool(t)
				schema = schemaOf(t, pool)
				mustExec(t, pool, `INSERT INTO customers (id, email, name) VALUES ('C-0001', 'ada@example.com', 'Ada')`)
				mustExec(t, pool, tc.sql)
			})
			if exists(t, schema) {
				t.Errorf("schema %s is kept after %q", schema, tc.sql)
			}
		})
	}

	t.Run("DroppedOnceItsTestsLeftManyRowsBetweenThem", func(t *testing.T) {
		var schemas []string
		for i := range 3 {
			t.Run(fmt.Sprintf("Fill%d", i+1), func(t *testing.T) {
				pool := storetest.NewPool(t)
				schemas = append(schemas, schemaOf(t, pool))
				mustExec(t, pool, fmt.Sprintf(`INSERT INTO customers (id, email, name)
					SELECT format('C-%%s', %d + i), format('c%%s@example.com', %d + i), 'Many' FROM generate_series(1, 2000) i`, 10000*(i+1), 10000*(i+1)))
			})
		}
		if schemas[1] != schemas[0] || schemas[2] != schemas[0] {
			t.Fatalf("the three tests had schemas %v, want one reused", schemas)
		}
		if exists(t, schemas[0]) {
			t.Errorf("schema %s is kept after its tests left 6,000 rows between them", schemas[0])
		}
	})

	t.Run("DroppedAfterManyRows", func(t *testing.T) {
		var schema string
		t.Run("Fill", func(t *testing.T) {
			pool := storetest.NewPool(t)
			schema = schemaOf(t, pool)
			mustExec(t, pool, `INSERT INTO customers (id, email, name)
				SELECT format('C-%s', 10000 + i), format('c%s@example.com', i), 'Many' FROM generate_series(1, 6000) i`)
		})
		if exists(t, schema) {
			t.Errorf("schema %s is kept after 6,000 rows: its dead rows would burden the next test", schema)
		}
	})
}

func schemaOf(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var schema string
	if err := pool.QueryRow(context.Background(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", sql, err))
	}
}

func exists(t *testing.T, schema string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var found bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&found); err != nil {
		t.Fatal(err)
	}
	return found
}

// The schemas a test process kept are dropped when its tests end: the
// test runs itself as a child process, whose one test takes a schema, and
// looks for that schema once the child has exited.
func TestKeptSchemasAreDroppedWhenTheTestsEnd(t *testing.T) {
	if os.Getenv("STORETEST_CHILD") != "" {
		fmt.Println("schema:", schemaOf(t, storetest.NewPool(t)))
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeptSchemasAreDroppedWhenTheTestsEnd$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STORETEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "schema: ")
	schema, _, _ := strings.Cut(rest, "\n")
	if !ok || schema == "" {
		t.Fatalf("the child named no schema:\n%s", out)
	}
	if exists(t, schema) {
		t.Errorf("schema %s is still there after the tests that kept it ended", schema)
	}
}
