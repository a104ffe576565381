package storetest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/internal/cputime"
)

// Cost is what a stretch of a benchmark cost: the processor time of this
// process (the code under test, and whatever peer the benchmark runs in
// it) and of the PostgreSQL backends serving the test's pool, and the
// write-ahead log the cluster wrote meanwhile.
type Cost struct {
	Go, PostgreSQL time.Duration
	// PostgreSQLRead is false when PostgreSQL's processes could not be
	// read (another host): no CPU is reported then, rather than a part of
	// it.
	PostgreSQLRead bool
	// WAL is the bytes of write-ahead log written in the stretch: the
	// work's rows, its indexes' entries and its commits' records, the
	// measure of "what a unit writes" that CPU alone does not name. It is
	// the whole cluster's: a benchmark runs alone.
	WAL int64
}

// MeasureCost starts counting the CPU of this process and of the backends
// of pool (NewPool's: its connections carry the test's schema as their
// application_name) and the WAL written, and returns the function that
// stops and reads them. Backends that exit before the stop are not
// counted; NewPool's pools keep theirs open.
func MeasureCost(tb testing.TB, pool *pgxpool.Pool) (stop func() Cost) {
	tb.Helper()
	walBefore := walPosition(tb, pool)
	goBefore := cputime.Process()
	pgBefore, okBefore := backendsCPU(tb, pool)
	return func() Cost {
		c := Cost{Go: cputime.Process() - goBefore}
		pgAfter, okAfter := backendsCPU(tb, pool)
		c.WAL = walWritten(tb, pool, walBefore)
		if !okBefore || !okAfter {
			return c
		}
		for pid, after := range pgAfter {
			c.PostgreSQL += after - pgBefore[pid] // a backend opened since counts whole
		}
		c.PostgreSQLRead = true
		return c
	}
}

// walPosition is where the cluster's next WAL record goes: the insert
// position, which moves with every record at once, where the statistics
// views (pg_stat_wal) count what each backend reports when idle.
func walPosition(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	var lsn string
	if err := pool.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		tb.Fatalf("read the WAL's position: %v", err)
	}
	return lsn
}

// walWritten is the bytes of WAL since the position before.
func walWritten(tb testing.TB, pool *pgxpool.Pool, before string) int64 {
	tb.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`,
		before).Scan(&n); err != nil {
		tb.Fatalf("read the WAL written: %v", err)
	}
	return n
}

// backendsCPU reads, from /proc, the user and system time so far of each
// backend whose application_name is the pool's.
func backendsCPU(tb testing.TB, pool *pgxpool.Pool) (map[int]time.Duration, bool) {
	tb.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE application_name = current_setting('application_name') AND application_name <> ''`)
	if err != nil {
		tb.Fatalf("list the pool's backends: %v", err)
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			tb.Fatalf("list the pool's backends: %v", err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("list the pool's backends: %v", err)
	}
	cpu := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		t, err := pidCPU(pid)
		if err != nil {
			return nil, false
		}
		cpu[pid] = t
	}
	return cpu, len(pids) > 0
}

// clockTicks is the unit of /proc/PID/stat's times: USER_HZ, which the
// kernel keeps at 100 for user space on x86 and arm whatever its own tick.
const clockTicks = 100

// pidCPU reads utime and stime, fields 14 and 15 of /proc/PID/stat
// (proc(5)); the command name, field 2, is in parentheses and may hold
// spaces, so the fields are counted from its closing parenthesis.
func pidCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] { // fields 14 and 15: the name's ')' ends field 2
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// Report adds to b's results the cost of each of n units of work (a
// ticket, an email, a request: unit names it): the CPU in microseconds,
// this process's (go_cpu_us/UNIT), PostgreSQL's (pg_cpu_us/UNIT) and both
// (cpu_us/UNIT), and the bytes of WAL (wal_bytes/UNIT).
func (c Cost) Report(b *testing.B, n int, unit string) {
	if n <= 0 {
		return
	}
	b.ReportMetric(c.WALPerUnit(n), "wal_bytes/"+unit)
	if !c.PostgreSQLRead {
		return
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(per(c.Go), "go_cpu_us/"+unit)
	b.ReportMetric(per(c.PostgreSQL), "pg_cpu_us/"+unit)
	b.ReportMetric(c.PerUnit(n), "cpu_us/"+unit)
}

// PerUnit is the CPU of each of n units of work, both sides', in
// microseconds (Report's cpu_us).
func (c Cost) PerUnit(n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64((c.Go + c.PostgreSQL).Microseconds()) / float64(n)
}

// WALPerUnit is the bytes of WAL each of n units of work wrote (Report's
// wal_bytes).
func (c Cost) WALPerUnit(n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64(c.WAL) / float64(n)
}

// Measure is what a benchmark's timed stretch of n units of work reached,
// from its rate and the cost measured over it.
func Measure(n int, rate float64, cost Cost) Measured {
	m := Measured{Rate: rate, WAL: cost.WALPerUnit(n)}
	if cost.PostgreSQLRead {
		m.CPU = cost.PerUnit(n)
	}
	return m
}

// Measured is what a benchmark's timed stretch reached: units of work a
// second, the CPU each cost both sides (µs, PerUnit; 0 when PostgreSQL's
// processes could not be read) and the WAL each wrote (bytes).
type Measured struct {
	Rate, CPU, WAL float64
}

// ReportOfFloor reports what ships against its floor, measured before it
// in the same run (a zero floor reports nothing): of_floor, its rate ÷ the
// floor's, the goal the benchmarks hold it to; and of_floor_cpu, the
// floor's CPU a unit ÷ its own. Where both keep the two cores busy the two
// are the same ratio, but CPU time is not taken by what else the machine
// runs, so the second moves less from run to run; where the floor leaves
// the cores idle part of the time, the second is the lower. of_floor_wal,
// the floor's WAL a unit ÷ its own, says how much more than the least a
// unit writes.
func ReportOfFloor(b *testing.B, floor, shipped Measured) {
	if floor.Rate > 0 {
		b.ReportMetric(shipped.Rate/floor.Rate, "of_floor")
	}
	if floor.CPU > 0 && shipped.CPU > 0 {
		b.ReportMetric(floor.CPU/shipped.CPU, "of_floor_cpu")
	}
	if floor.WAL > 0 && shipped.WAL > 0 {
		b.ReportMetric(floor.WAL/shipped.WAL, "of_floor_wal")
	}
}
