package storetest_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestMeasureCostCountsItsPoolsBackendsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mine, other := storetest.NewPool(t), storetest.NewPool(t)
	stopMine, stopOther := storetest.MeasureCost(t, mine), storetest.MeasureCost(t, other)
	if _, err := mine.Exec(ctx, `SELECT count(*) FROM generate_series(1, 1000000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `SELECT count(*) FROM generate_series(1, 10000000)`); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(make([]byte, 32<<20)) // this process's own work
	mineCPU, otherCPU := stopMine(), stopOther()
	if !mineCPU.PostgreSQLRead || !otherCPU.PostgreSQLRead {
		t.Fatal("the backends' CPU could not be read: is PostgreSQL on this host?")
	}
	t.Logf("mine %+v, other %+v (%x)", mineCPU, otherCPU, sum[:2])
	if mineCPU.PostgreSQL <= 0 || otherCPU.PostgreSQL < 3*mineCPU.PostgreSQL {
		t.Errorf("PostgreSQL's CPU: %v for a million rows, %v for ten million on another pool; want each pool's own",
			mineCPU.PostgreSQL, otherCPU.PostgreSQL)
	}
	if mineCPU.Go <= 0 {
		t.Errorf("this process's CPU: %v after hashing 32 MiB", mineCPU.Go)
	}
}

func TestMeasureCostCountsTheWALWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE written (body text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	stop := storetest.MeasureCost(t, pool)
	// 1,000 rows of 1,000 bytes that do not compress: at least a megabyte
	// of WAL. Other tests write at the same time, so only the least is known.
	if _, err := pool.Exec(ctx, `INSERT INTO written
		SELECT string_agg(md5(i::text || '.' || j::text), '') FROM generate_series(1, 1000) i, generate_series(1, 31) j GROUP BY i`); err != nil {
		t.Fatal(err)
	}
	if cost := stop(); cost.WAL < 1_000_000 {
		t.Errorf("WAL written: %d bytes after a megabyte of rows; want at least that", cost.WAL)
	}
}
