package storetest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migrating a schema costs PostgreSQL about a third of a second of catalog
// work (River's migrations and ours), and dropping it 0.06 s more: a
// `make test` made 413 of them (stop 69), a good part of what the server did in the
// whole run. A test process under Main keeps the schemas its tests
// finished with, emptied, and gives them to the next tests that ask, so a
// package migrates as many schemas as it runs tests at once (two or three)
// and drops them when its tests are done.
//
// A finished schema is reused only when its rows are all that changed in
// it, so the next test stands on what a fresh migration would have given
// it:
//   - its catalog is as the migration left it (no object made, altered or
//     dropped, no table analyzed or vacuumed), told by catalogPrint;
//   - its tests, this one and those before it, left no more than
//     reuseRows rows between them, so the dead rows its next test's scans
//     step over stay few (nothing vacuums them where autovacuum is off);
//   - its sequences are set back to their start.
//
// Any other schema is dropped, as every schema was before.

// reuseRows is the most rows a schema's tests may leave, all told, for it
// to be emptied and reused.
const reuseRows = 5000

// reuse holds the process's finished schemas while Main runs the tests.
var reuse struct {
	mu     sync.Mutex
	on     bool
	admin  *pgxpool.Pool
	free   []string               // emptied and ready
	kept   map[string]*keptSchema // every schema that may be reused
	tables []string               // a kept schema's tables, in deleteOrder
}

// keptSchema is what release checks a finished test's schema against.
type keptSchema struct {
	catalog string // catalogPrint as migrated
	rows    int64  // deleted after its tests so far
}

// Main runs the package's tests (m.Run) reusing their schemas, then drops
// the schemas it kept and exits with the tests' code. Call it from the
// package's TestMain; without it, each test's schema is dropped when the
// test ends.
func Main(m *testing.M) {
	reuse.mu.Lock()
	reuse.on, reuse.kept = true, map[string]*keptSchema{}
	reuse.mu.Unlock()
	code := m.Run()
	if err := dropKept(); err != nil {
		fmt.Fprintf(os.Stderr, "storetest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// takeSchema returns an emptied schema a finished test left, or "" when
// there is none (or reuse is off).
func takeSchema() string {
	reuse.mu.Lock()
	defer reuse.mu.Unlock()
	if len(reuse.free) == 0 {
		return ""
	}
	schema := reuse.free[len(reuse.free)-1]
	reuse.free = reuse.free[:len(reuse.free)-1]
	return schema
}

// keepSchema records a freshly migrated schema's catalog, so that it may be
// reused when its test ends; without Main it does nothing.
func keepSchema(ctx context.Context, schema string) error {
	admin, err := adminPool(ctx)
	if admin == nil || err != nil {
		return err
	}
	catalog, err := catalogPrint(ctx, admin, schema)
	if err != nil {
		return err
	}
	reuse.mu.Lock()
	known := reuse.tables != nil
	reuse.mu.Unlock()
	var tables []string
	if !known { // every schema is migrated alike: its tables are the first's
		if tables, err = deleteOrder(ctx, admin, schema); err != nil {
			return err
		}
	}
	reuse.mu.Lock()
	defer reuse.mu.Unlock()
	reuse.kept[schema] = &keptSchema{catalog: catalog}
	if !known {
		reuse.tables = tables
	}
	return nil
}

// adminPool is the process's pool for emptying and dropping schemas, or nil
// when reuse is off.
func adminPool(ctx context.Context) (*pgxpool.Pool, error) {
	reuse.mu.Lock()
	defer reuse.mu.Unlock()
	if !reuse.on {
		return nil, nil
	}
	if reuse.admin == nil {
		config, err := pgxpool.ParseConfig(URL())
		if err != nil {
			return nil, fmt.Errorf("parse test database URL: %w", err)
		}
		config.MaxConns = 4
		config.ConnConfig.RuntimeParams["application_name"] = "storetest"
		if reuse.admin, err = pgxpool.NewWithConfig(ctx, config); err != nil {
			return nil, fmt.Errorf("open storetest's pool: %w", err)
		}
	}
	return reuse.admin, nil
}

// release ends a schema whose test has ended: it empties a kept one and
// gives it to the next test, and drops it when more than its rows changed,
// when its tests have left too many, or when it was not kept.
func release(schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reuse.mu.Lock()
	admin, kept, tables := reuse.admin, reuse.kept[schema], reuse.tables
	reuse.mu.Unlock()
	if kept == nil {
		return dropSchema(ctx, schema)
	}
	rows, same, err := empty(ctx, admin, schema, kept.catalog, tables)
	reuse.mu.Lock()
	kept.rows += rows
	if err == nil && same && kept.rows <= reuseRows {
		reuse.free = append(reuse.free, schema)
		reuse.mu.Unlock()
		return nil
	}
	delete(reuse.kept, schema)
	reuse.mu.Unlock()
	if dropErr := dropSchema(ctx, schema); dropErr != nil {
		return dropErr
	}
	return err
}

// empty deletes every row of the schema's tables (in deleteOrder) and sets
// its sequences back, in one transaction, when its catalog is still want
// (same); it returns how many rows it deleted.
func empty(ctx context.Context, admin *pgxpool.Pool, schema, want string, tables []string) (rows int64, same bool, err error) {
	err = pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		catalog, err := catalogPrint(ctx, tx, schema)
		if same = catalog == want; err != nil || !same {
			return err
		}
		// The schema's triggers name its tables as its own connections do.
		if _, err := tx.Exec(ctx, `SELECT set_config('search_path', $1, true)`, schema); err != nil {
			return err
		}
		batch := &pgx.Batch{}
		for _, table := range tables {
			batch.Queue(`DELETE FROM ` + pgx.Identifier{schema, table}.Sanitize())
		}
		// A fresh sequence's next value is its start (is_called false).
		batch.Queue(`SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, start_value, false)
			FROM pg_sequences WHERE schemaname = $1`, schema)
		results := tx.SendBatch(ctx, batch)
		deleted := int64(0)
		for _, table := range tables {
			tag, err := results.Exec()
			if err != nil {
				_ = results.Close()
				return fmt.Errorf("empty %s.%s: %w", schema, table, err)
			}
			deleted += tag.RowsAffected()
		}
		if _, err := results.Exec(); err != nil {
			_ = results.Close()
			return fmt.Errorf("reset the sequences of %s: %w", schema, err)
		}
		if err := results.Close(); err != nil {
			return err
		}
		rows = deleted
		return nil
	})
	return rows, same, err
}

// catalogPrint sums up the schema's catalog: the row of every object in
// it and of every object hanging off those (columns, defaults, indexes,
// constraints, triggers, enum labels) with the transaction that wrote it,
// and each relation's size and statistics as VACUUM and ANALYZE leave them.
// Rows of the tables change none of it; making, altering or dropping an
// object, or analyzing or vacuuming a table, changes it. The objects are
// found through pg_depend's index, not by namespace: the catalogs of a
// test database grow with the schemas made and dropped in it, and a scan
// of them cost more than the migration it saves.
func catalogPrint(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) (string, error) {
	var sum string
	err := db.QueryRow(ctx, `
		WITH RECURSIVE objs(classid, objid) AS (
			SELECT d.classid, d.objid FROM pg_depend d
			WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = (SELECT oid FROM pg_namespace WHERE nspname = $1)
			UNION
			SELECT d.classid, d.objid FROM pg_depend d JOIN objs o ON d.refclassid = o.classid AND d.refobjid = o.objid
		)
		SELECT md5(coalesce(string_agg(r, ',' ORDER BY r), '')) FROM (
			SELECT concat_ws(':', o.classid::regclass, o.objid,
				coalesce(c.xmin, p.xmin, t.xmin, k.xmin, g.xmin, f.xmin, w.xmin, y.xmin),
				c.relpages, c.reltuples, c.relallvisible, c.relfrozenxid)
			FROM objs o
			LEFT JOIN pg_class c ON o.classid = 'pg_class'::regclass AND c.oid = o.objid
			LEFT JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND p.oid = o.objid
			LEFT JOIN pg_type t ON o.classid = 'pg_type'::regclass AND t.oid = o.objid
			LEFT JOIN pg_constraint k ON o.classid = 'pg_constraint'::regclass AND k.oid = o.objid
			LEFT JOIN pg_trigger g ON o.classid = 'pg_trigger'::regclass AND g.oid = o.objid
			LEFT JOIN pg_attrdef f ON o.classid = 'pg_attrdef'::regclass AND f.oid = o.objid
			LEFT JOIN pg_rewrite w ON o.classid = 'pg_rewrite'::regclass AND w.oid = o.objid
			LEFT JOIN pg_policy y ON o.classid = 'pg_policy'::regclass AND y.oid = o.objid
			UNION ALL
			SELECT concat_ws(':', 'pg_attribute', a.attrelid, a.attnum, a.xmin)
			FROM objs o JOIN pg_attribute a ON o.classid = 'pg_class'::regclass AND a.attrelid = o.objid
			UNION ALL
			SELECT concat_ws(':', 'pg_enum', e.oid, e.xmin)
			FROM objs o JOIN pg_enum e ON o.classid = 'pg_type'::regclass AND e.enumtypid = o.objid
		) catalog(r)`, schema).Scan(&sum)
	if err != nil {
		return "", fmt.Errorf("read the catalog of %s: %w", schema, err)
	}
	return sum, nil
}

// deleteOrder lists the schema's tables, but the migrations' own, each
// after every table whose foreign keys point at it: the order in which
// deleting their rows breaks no key. A table that refers to itself is
// emptied by one statement, which breaks no key either.
func deleteOrder(ctx context.Context, admin *pgxpool.Pool, schema string) ([]string, error) {
	rows, err := admin.Query(ctx, `
		SELECT c.relname, coalesce(array_agg(DISTINCT r.relname) FILTER (WHERE r.relname IS NOT NULL AND r.oid <> c.oid), '{}')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_constraint k ON k.contype = 'f' AND k.conrelid = c.oid
		LEFT JOIN pg_class r ON r.oid = k.confrelid
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND c.relname NOT IN ('helpdesk_migration', 'river_migration')
		GROUP BY c.relname`, schema)
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", schema, err)
	}
	refers := map[string][]string{} // table → the tables it points at
	for rows.Next() {
		var table string
		var targets []string
		if err := rows.Scan(&table, &targets); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list the tables of %s: %w", schema, err)
		}
		refers[table] = targets
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", schema, err)
	}
	// Kahn's order: a table goes once no remaining table points at it.
	pointedAt := map[string]int{}
	for _, targets := range refers {
		for _, target := range targets {
			pointedAt[target]++
		}
	}
	var ready, order []string
	for table := range refers {
		if pointedAt[table] == 0 {
			ready = append(ready, table)
		}
	}
	for len(ready) > 0 {
		slices.Sort(ready)
		table := ready[0]
		ready = ready[1:]
		order = append(order, table)
		for _, target := range refers[table] {
			if pointedAt[target]--; pointedAt[target] == 0 {
				ready = append(ready, target)
			}
		}
	}
	if len(order) != len(refers) {
		return nil, fmt.Errorf("the tables of %s point at each other in a circle", schema)
	}
	return order, nil
}

// dropKept drops every schema this process kept, at the end of its tests.
func dropKept() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reuse.mu.Lock()
	admin, free := reuse.admin, reuse.free
	reuse.free, reuse.on = nil, false
	reuse.mu.Unlock()
	if admin == nil {
		return nil
	}
	defer admin.Close()
	for _, schema := range free {
		if err := dropSchema(ctx, schema); err != nil {
			return err
		}
	}
	return nil
}

// dropSchema drops a schema whose test has ended: over the process's pool
// under Main, else over a connection of its own.
func dropSchema(ctx context.Context, schema string) error {
	reuse.mu.Lock()
	admin := reuse.admin
	reuse.mu.Unlock()
	drop := `DROP SCHEMA IF EXISTS ` + pgx.Identifier{schema}.Sanitize() + ` CASCADE`
	if admin != nil {
		_, err := admin.Exec(ctx, drop)
		return wrapDrop(schema, err)
	}
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		return wrapDrop(schema, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, drop)
	return wrapDrop(schema, err)
}

func wrapDrop(schema string, err error) error {
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}
