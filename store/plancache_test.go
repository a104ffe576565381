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
// times on a connection and then run on a plan kept for them. pgx
// prepares each statement once a connection, and PostgreSQL plans a
// prepared statement for its values five times, then keeps a plan for any
// values (a generic plan) unless that plan costs more than the ones made
// for the values did: one that looks dearer is planned anew on every run,
// about 300 µs each for the statements of ours that were. queue is called
// for each of twelve runs, sent through a store on one connection, whose
// counts of plans (pg_prepared_statements) then say.
func plansKept(t *testing.T, pool *pgxpool.Pool, queue func(run int, b *store.Batch)) {
	t.Helper()
	const runs = 12
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	before := preparedPlans(t, conn)
	st := store.New(conn)
	counted, trips := storetest.CountTrips(ctx)
	for run := range runs {
		var b store.Batch
		queue(run, &b)
		if err := st.Send(counted, &b); err != nil {
			t.Fatal(err)
		}
	}
	ran := 0
	for sql, after := range preparedPlans(t, conn) {
		generic, custom := after[0]-before[sql][0], after[1]-before[sql][1]
		if generic+custom < runs {
			continue
		}
		ran++
		if custom > 5 {
			t.Errorf("%.70s…: planned anew on %d runs of %d (on a kept plan: %d)", strings.Join(strings.Fields(sql), " "), custom, runs, generic)
		}
	}
	// Every statement queued ran as a prepared statement, or the counts
	// say nothing of it.
	if sent := len(trips.Statements()) / runs; ran != sent {
		t.Errorf("%d statements ran on prepared plans, %d were sent a run", ran, sent)
	}
}

// preparedPlans reads the plans made so far for each statement that pgx
// prepared on conn: generic, then custom.
func preparedPlans(t *testing.T, conn *pgxpool.Conn) map[string][2]int64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE NOT from_sql`)
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string][2]int64{}
	for rows.Next() {
		var (
			sql             string
			generic, custom int64
		)
		if err := rows.Scan(&sql, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		plans[sql] = [2]int64{generic, custom}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plans
}

// genericPlanPages runs s as a prepared statement on its generic plan, as
// a pooled connection does after five runs, and returns the buffers it read.
func genericPlanPages(t *testing.T, pool *pgxpool.Pool, s storetest.Statement) int {
	t.Helper()
	ctx := context.Background()
	tx := beginWith(t, pool, "plan_cache_mode = force_generic_plan")
	defer tx.Rollback(ctx)
	// A prepared statement outlives the transaction: it goes with the test.
	if _, err := tx.Exec(ctx, `PREPARE measured AS `+s.SQL); err != nil {
		t.Fatal(err)
	}
	defer tx.Exec(ctx, `DEALLOCATE measured`)
	var plan []struct {
		Plan struct {
			SharedHit  int `json:"Shared Hit Blocks"`
			SharedRead int `json:"Shared Read Blocks"`
		}
	}
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE measured(`+literals(s.Args)+`)`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	return plan[0].Plan.SharedHit + plan[0].Plan.SharedRead
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
