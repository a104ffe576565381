//go:build demo

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestBurstFollowsTheQuota(t *testing.T) {
	t.Parallel()
	opts := defaultBurst()
	// Half the burst, 50× faster: 90 tickets against a 1.2s quota
	// window, about 7 seconds. BenchmarkBurst runs the whole of it.
	opts.Tickets, opts.Speed = 90, 50
	res, err := runBurst(context.Background(), storetest.URL(), opts, jobstest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if res.DeadLetters != 0 || res.refusedShare() > 0.10 || res.Calls < 3*opts.Tickets {
		t.Errorf("%d dead letters, %d of %d calls answered 429; want none dead and at most 10%% refused", res.DeadLetters, res.Refused, res.Calls)
	}
	chart := filepath.Join(t.TempDir(), "burst.png")
	if err := chartBurst(res, chart); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(chart); err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
		t.Errorf("chart: %d bytes, %v", len(b), err)
	}
	t.Logf("drain %s against a floor of %s (%.2f×)", res.Drain, res.Floor, res.drainRatio())
}

// BenchmarkBurst runs the burst 20× time-scaled (about 35 seconds
// an iteration) and reports its three numbers.
func BenchmarkBurst(b *testing.B) {
	opts := defaultBurst()
	opts.Speed = 20
	for range b.N {
		res, err := runBurst(context.Background(), storetest.URL(), opts, jobstest.Logger())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.DeadLetters), "dead_letters")
		b.ReportMetric(100*res.refusedShare(), "%429")
		b.ReportMetric(res.drainRatio(), "drain/floor")
	}
}
