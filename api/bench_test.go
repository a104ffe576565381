package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCreateTicket measures POST /v1/tickets over real HTTP on
// loopback, with new Idempotency-Keys (ticket, message, job, key: one
// transaction) and with replays of one key, next to a bare INSERT into
// tickets on the same database in the same run. It reports requests per
// second and the 99th percentile latency.
func BenchmarkCreateTicket(b *testing.B) {
	b.Run("BareInsertBaseline", func(b *testing.B) {
		ib := setupIntake(b, 0)
		measure(b, func(int64) error {
			_, err := ib.Pool.Exec(ib.Ctx, `INSERT INTO tickets (customer_id, subject) VALUES ('C-0022', 'Late parcel')`)
			return err
		})
	})

	b.Run("NewKeys", func(b *testing.B) {
		ib := setupIntake(b, 0)
		measure(b, func(i int64) error { return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("key-%d", i)) })
	})

	b.Run("Replays", func(b *testing.B) {
		ib := setupIntake(b, 0)
		body := ticketBody("C-0022", "Late parcel")
		if err := ib.post(body, "the-key"); err != nil {
			b.Fatal(err)
		}
		measure(b, func(int64) error { return ib.post(body, "the-key") })
	})
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func (b *intakeBundle) post(body []byte, idemKey string) error {
	req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/tickets", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.c22)
	req.Header.Set("Idempotency-Key", idemKey)
	resp, err := benchClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// measure runs op from 16 goroutines and reports req/s and p99 latency.
func measure(b *testing.B, op func(i int64) error) {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		seq       atomic.Int64
	)
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if err := op(seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(latencies)
	if len(latencies) > 0 {
		b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "req/s")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	}
}
