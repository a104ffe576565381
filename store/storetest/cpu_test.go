package storetest_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestMeasureCPUCountsItsPoolsBackendsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mine, other := storetest.NewPool(t), storetest.NewPool(t)
	stopMine, stopOther := storetest.MeasureCPU(t, mine), storetest.MeasureCPU(t, other)
	if _, err := mine.Exec(ctx, `SELECT count(*) FROM generate_series(1, 1000000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `SELECT count(*) FROM generate_series(1, 10000000)`); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(make([]byte, 32<<20)) // this process's own work
	mineCPU, okMine := stopMine()
	otherCPU, okOther := stopOther()
	if !okMine || !okOther {
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
