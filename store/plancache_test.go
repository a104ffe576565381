package store_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// plansKept holds that the statements queue writes are planned a few
// times on a connection and then run on a plan kept for them, as a pooled
// connection runs them: pgx prepares each statement once per connection,
// and PostgreSQL plans a prepared statement for its values five times,
// then keeps a plan for any values (a generic plan) unless that plan costs
// more than the ones made for the values did. One that looks dearer is
// planned anew on every run, which for some of ours cost eight times what
// running them did. queue is called for each of twelve runs, the
// statements are sent through st and run again as prepared statements on
// one connection, whose counts of plans (pg_prepared_statements) say.
func plansKept(t *testing.T, pool *pgxpool.Pool, st *store.Store, queue func(run int, b *store.Batch)) {
	t.Helper()
	const runs = 12
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for run := range runs {
		counted, trips := storetest.CountTrips(ctx)
		var b store.Batch
		queue(run, &b)
		if err := st.Send(counted, &b); err != nil {
			t.Fatal(err)
		}
		for i, s := range trips.Statements() {
			name := fmt.Sprintf("kept_%d", i)
			if run == 0 {
				if _, err := conn.Exec(ctx, `PREPARE `+name+` AS `+s.SQL); err != nil {
					t.Fatal(err)
				}
				defer conn.Exec(ctx, `DEALLOCATE `+name)
			}
			if _, err := conn.Exec(ctx, `EXECUTE `+name+`(`+literals(s.Args)+`)`); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows, err := conn.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE 'kept\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			sql             string
			generic, custom int64
		)
		if err := rows.Scan(&sql, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		if custom > 5 {
			t.Errorf("%.70s…: planned anew on %d runs of %d (on a kept plan: %d)", strings.Join(strings.Fields(sql), " "), custom, runs, generic)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// literals writes args as SQL literals, for EXECUTE: bytes as bytea's hex
// ('\x00ff'), another slice as an array ('{"a","b"}'), anything else as
// its text.
func literals(args []any) string {
	out := make([]string, len(args))
	for i, a := range args {
		text := fmt.Sprint(a)
		if b, ok := a.([]byte); ok {
			text = `\x` + hex.EncodeToString(b)
		} else if v := reflect.ValueOf(a); v.Kind() == reflect.Slice {
			elems := make([]string, v.Len())
			for j := range elems {
				e := fmt.Sprint(v.Index(j).Interface())
				elems[j] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(e) + `"`
			}
			text = "{" + strings.Join(elems, ",") + "}"
		}
		out[i] = "'" + strings.ReplaceAll(text, "'", "''") + "'"
	}
	return strings.Join(out, ", ")
}
