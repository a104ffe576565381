package api_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// BenchmarkCreateTicketAtAMillion measures intake (POST /v1/tickets with
// new keys from 16 clients) on a database that already holds a million
// tickets and a million messages (storetest.Million) and on an empty one,
// in turns (storetest.InTurns). Each turn sends the same number of requests, whatever
// -benchtime says: make bench-growth runs it.
func BenchmarkCreateTicketAtAMillion(b *testing.B) {
	empty := setupIntake(b, 0)
	million := setupIntakeOn(b, jobstest.SetupOn(b, storetest.NewPoolFrom(b, storetest.Million)), 0)
	const requests = 4000
	var seq atomic.Int64
	turn := func(b *testing.B, ib *intakeBundle) float64 {
		rate := bareRate(b, 16, requests, func(int64) error {
			return ib.post(ticketBody("C-0022", "Late parcel"), fmt.Sprintf("growth-%d", seq.Add(1)))
		})
		b.ReportMetric(rate, "req/s")
		return rate
	}
	storetest.InTurns(b, func(b *testing.B) float64 { return turn(b, empty) }, func(b *testing.B) float64 { return turn(b, million) })
}
