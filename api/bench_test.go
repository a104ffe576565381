package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// BenchmarkCreateTicket measures POST /v1/tickets over real HTTP on
// loopback, with new Idempotency-Keys (ticket, message, job, key: one
// transaction) and with replays of one key, next to a bare INSERT into
// tickets on the same database in the same run. It reports requests per
// second and the 99th percentile latency.
func BenchmarkCreateTicket(b *testing.B) {
	var floor storetest.Measured // FloorHTTPAndFourInsertsInOneRoundTrip's, in this run
	b.Run("BareInsertBaseline", func(b *testing.B) {
		ib := setupIntake(b, 0)
		measure(b, 8, ib.bareInsert)
	})

	// The least an intake that keeps its guarantees does: over the same
	// HTTP, one round trip that writes the key with its answer, the
	// ticket, its message and its job in one transaction; no
	// authentication, no reads. No code doing more gets above its ratio on
	// this machine.
	b.Run("FloorHTTPAndFourInsertsInOneRoundTrip", func(b *testing.B) {
		ib := setupIntake(b, 0)
		srv := httptest.NewServer(floorIntake(ib.Pool))
		b.Cleanup(srv.Close)
		warmUp(b, func(i int64) error {
			return ib.postTo(srv.URL, ticketBody("C-0022", "Late parcel"), fmt.Sprintf("warm-%d", i))
		})
		cost := storetest.MeasureCost(b, ib.Pool)
		rate := measure(b, 8, func(i int64) error {
			return ib.postTo(srv.URL, ticketBody("C-0022", "Late parcel"), fmt.Sprintf("key-%d", i))
		})
		used := cost()
		used.Report(b, b.N, "req")
		floor = storetest.Measure(b.N, rate, used)
		bare := bareInserts(b, ib, b.N, 16)
		b.ReportMetric(bare, "baseline_req/s")
		b.ReportMetric(rate/bare, "ratio")
	})

	// What ships, against the floor just before (of_floor, of_floor_cpu).
	b.Run("NewKeys", func(b *testing.B) {
		ib := setupIntake(b, 0)
		warmUp(b, func(i int64) error { return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("warm-%d", i)) })
		cost := storetest.MeasureCost(b, ib.Pool)
		rate := measure(b, 8, func(i int64) error { return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("key-%d", i)) })
		used := cost()
		used.Report(b, b.N, "req")
		shipped := storetest.Measure(b.N, rate, used)
		storetest.ReportOfFloor(b, floor, shipped)
		// The baseline in the same run: as many bare INSERTs from as many clients.
		bare := bareInserts(b, ib, b.N, 16)
		b.ReportMetric(bare, "baseline_req/s")
		b.ReportMetric(rate/bare, "ratio")
	})

	// NewKeys with serve's default of acknowledging a customer's new
	// ticket by mail (HELPDESK_ACK: at most three a day to an address),
	// all of one customer: after its first three, its tickets get none,
	// and none should wait on another's count (lock_waiting).
	b.Run("NewKeysAcknowledged", func(b *testing.B) {
		bundle := jobstest.Setup(b)
		bundle.WithSMTP(b)
		bundle.DeskConfig.Ack = &desk.AckConfig{} // serve's defaults
		ib := setupIntakeOn(b, bundle, 0)
		warmUp(b, func(i int64) error { return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("warm-%d", i)) })
		cost := storetest.MeasureCost(b, ib.Pool)
		waiting := storetest.SampleLockWaits(ib.Pool)
		rate := measure(b, 8, func(i int64) error { return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("key-%d", i)) })
		meanWaiting, _ := waiting()
		b.ReportMetric(meanWaiting, "lock_waiting")
		used := cost()
		used.Report(b, b.N, "req")
		shipped := storetest.Measure(b.N, rate, used)
		storetest.ReportOfFloor(b, floor, shipped)
	})

	// 100 clients at once (50 goroutines a core on this machine's two).
	b.Run("NewKeys100Clients", func(b *testing.B) {
		ib := setupIntake(b, 0)
		measure(b, 100/runtime.GOMAXPROCS(0), func(i int64) error {
			return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("key-%d", i))
		})
	})

	// 100 connections at half the rate that 16 clients reached, each
	// request sent on its schedule whether or not the last one answered:
	// the latency an agent sees on a busy day, not at saturation (where,
	// closed-loop, it is only 100 ÷ the rate).
	b.Run("NewKeys100ConnectionsHalfLoad", func(b *testing.B) {
		ib := setupIntake(b, 0)
		capacity := bareRate(b, 16, 2000, func(i int64) error {
			return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("warm-%d", i))
		})
		measureOpenLoop(b, 100, capacity/2, func(i int64) error {
			return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("key-%d", i))
		})
	})

	b.Run("Replays", func(b *testing.B) {
		ib := setupIntake(b, 0)
		body := ticketBody("C-0022", "Late parcel")
		if err := ib.post(body, "the-key"); err != nil {
			b.Fatal(err)
		}
		measure(b, 8, func(int64) error { return ib.post(body, "the-key") })
	})
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

func (b *intakeBundle) post(body []byte, idemKey string) error {
	return b.postTo(b.url, body, idemKey)
}

func (b *intakeBundle) postTo(url string, body []byte, idemKey string) error {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/tickets", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.c22)
	req.Header.Set("Idempotency-Key", idemKey)
	resp, err := benchClient.Do(req)
	if err != nil {
		return err
	}
	// Read to the end, or the client drops the connection and dials anew.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// floorIntake answers a new ticket with the writes only: one batch, one
// round trip, one implicit transaction.
func floorIntake(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			CustomerID string `json:"customer_id"`
			Subject    string `json:"subject"`
			Body       string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var batch pgx.Batch
		batch.Queue(`INSERT INTO idempotency_keys (actor, key, fingerprint, status, response) VALUES ($1, $2, 'floor', 202, '{}')`,
			"customer:"+in.CustomerID, r.Header.Get("Idempotency-Key"))
		batch.Queue(`INSERT INTO tickets (id, customer_id, subject, last_customer_message_at) VALUES ('T-' || nextval('ticket_number_seq'), $1, $2, now())`,
			in.CustomerID, in.Subject)
		batch.Queue(`INSERT INTO messages (ticket_id, direction, author, body) VALUES ('T-' || currval('ticket_number_seq'), 'inbound', $1, $2)`,
			"customer:"+in.CustomerID, in.Body)
		batch.Queue(`INSERT INTO river_job (args, kind, queue, max_attempts, state) VALUES ('{}', 'floor', 'floor', 5, 'available')`)
		if err := pool.SendBatch(r.Context(), &batch).Close(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"ticket_id": "T-500001", "state": "queued"}`)
	})
}

// warmUp runs op 500 times from 16 goroutines, as many as measure's,
// before a benchmark times its own: what it times is then a service at
// work, with its connections open, their statements planned and the
// catalog they touch loaded, not one starting (jobs' warmUp). The floor
// is warmed the same way.
func warmUp(b *testing.B, op func(i int64) error) {
	b.Helper()
	bareRate(b, 16, 500, op)
}

// bareInserts makes n one-row INSERTs into tickets from clients
// goroutines and returns how many a second.
func bareInserts(b *testing.B, ib *intakeBundle, n, clients int) float64 {
	return bareRate(b, clients, n, ib.bareInsert)
}

// bareInsert is the baseline's operation: a one-row INSERT into tickets.
func (ib *intakeBundle) bareInsert(int64) error {
	_, err := ib.Pool.Exec(ib.Ctx, `INSERT INTO tickets (customer_id, subject) VALUES ('C-0022', 'Late parcel')`)
	return err
}

// measure runs op from perCPU goroutines a CPU (8 on two cores: 16
// clients) and reports req/s and p99 latency, and returns req/s.
func measure(b *testing.B, perCPU int, op func(i int64) error) float64 {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		seq       atomic.Int64
	)
	b.SetParallelism(perCPU)
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
	if len(latencies) == 0 {
		return 0
	}
	rate := float64(len(latencies)) / elapsed.Seconds()
	b.ReportMetric(rate, "req/s")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	return rate
}

// bareRate runs op n times from clients goroutines and returns how many a second.
func bareRate(b *testing.B, clients, n int, op func(i int64) error) float64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(begin).Seconds()
}

// measureOpenLoop sends b.N requests from conns goroutines at rate a
// second in all, each on its own schedule (a late answer does not delay
// the next request), and reports the rate reached and the p99 latency,
// counted from when each request was due.
func measureOpenLoop(b *testing.B, conns int, rate float64, op func(i int64) error) {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		seq       atomic.Int64
		wg        sync.WaitGroup
	)
	interval := time.Duration(float64(conns) / rate * float64(time.Second))
	b.ResetTimer()
	start := time.Now()
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			due := start.Add(interval * time.Duration(c) / time.Duration(conns)) // spread the first requests
			var mine []time.Duration
			for i := seq.Add(1); i <= int64(b.N); i = seq.Add(1) {
				time.Sleep(time.Until(due))
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(due))
				due = due.Add(interval)
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "req/s")
	b.ReportMetric(rate, "offered_req/s")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
}
