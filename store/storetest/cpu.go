package storetest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CPU is the processor time a stretch of a benchmark cost: this process's
// (the code under test, and whatever peer the benchmark runs in it) and
// that of the PostgreSQL backends serving the test's pool.
type CPU struct {
	Go, PostgreSQL time.Duration
}

// MeasureCPU starts counting the CPU of this process and of the backends
// of pool (NewPool's: its connections carry the test's schema as their
// application_name), and returns the function that stops and reads it.
// ok is false when PostgreSQL's processes cannot be read (another host):
// the benchmark then reports no CPU rather than a part of it. Backends
// that exit before the stop are not counted; NewPool's pools keep theirs
// open.
func MeasureCPU(tb testing.TB, pool *pgxpool.Pool) (stop func() (cpu CPU, ok bool)) {
	tb.Helper()
	goBefore := processCPU()
	pgBefore, okBefore := backendsCPU(tb, pool)
	return func() (CPU, bool) {
		goCPU := processCPU() - goBefore
		pgAfter, okAfter := backendsCPU(tb, pool)
		if !okBefore || !okAfter {
			return CPU{Go: goCPU}, false
		}
		var pg time.Duration
		for pid, after := range pgAfter {
			pg += after - pgBefore[pid] // a backend opened since counts whole
		}
		return CPU{Go: goCPU, PostgreSQL: pg}, true
	}
}

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// Report adds to b's results the CPU of each of n units of work (a ticket,
// an email, a request: unit names it) in microseconds: this process's
// (go_cpu_us/UNIT), PostgreSQL's (pg_cpu_us/UNIT) and both (cpu_us/UNIT).
func (c CPU) Report(b *testing.B, n int, unit string) {
	if n <= 0 {
		return
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(per(c.Go), "go_cpu_us/"+unit)
	b.ReportMetric(per(c.PostgreSQL), "pg_cpu_us/"+unit)
	b.ReportMetric(c.PerUnit(n), "cpu_us/"+unit)
}

// PerUnit is the CPU of each of n units of work, both sides', in
// microseconds (Report's cpu_us).
func (c CPU) PerUnit(n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64((c.Go + c.PostgreSQL).Microseconds()) / float64(n)
}

// Measured is what a benchmark's timed stretch reached: units of work a
// second, and the CPU each cost both sides (µs, PerUnit; 0 when
// PostgreSQL's processes could not be read).
type Measured struct {
	Rate, CPU float64
}

// ReportOfFloor reports what ships against its floor, measured before it
// in the same run (a zero floor reports nothing): of_floor, its rate ÷ the
// floor's, the goal the benchmarks hold it to; and of_floor_cpu, the
// floor's CPU a unit ÷ its own. Where both keep the two cores busy the two
// are the same ratio, but CPU time is not taken by what else the machine
// runs, so the second moves less from run to run; where the floor leaves
// the cores idle part of the time, the second is the lower.
func ReportOfFloor(b *testing.B, floor, shipped Measured) {
	if floor.Rate > 0 {
		b.ReportMetric(shipped.Rate/floor.Rate, "of_floor")
	}
	if floor.CPU > 0 && shipped.CPU > 0 {
		b.ReportMetric(floor.CPU/shipped.CPU, "of_floor_cpu")
	}
}
