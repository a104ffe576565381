package jobs_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/metrics"
)

// TestTheSLAGaugeCountsRunningClocksByWhenTheyFallDue is not parallel: the
// gauge is the process's, and no parallel test runs beside a test that is
// not.
func TestTheSLAGaugeCountsRunningClocksByWhenTheyFallDue(t *testing.T) {
	b := jobstest.Setup(t)
	q := b.NewQueue(t)
	// Three tickets' clocks: a first response due in ten minutes, one due in
	// two hours, and a resolution an hour overdue.
	var ids []string
	for _, subject := range []string{"One", "Two", "Three"} {
		id, _ := b.OpenTicket(t, q, subject, "A question.")
		ids = append(ids, id)
	}
	if _, err := b.Pool.Exec(b.Ctx, `INSERT INTO ticket_slas (ticket_id, first_response_due, resolution_due) VALUES
		($1, now() + interval '10 minutes', NULL), ($2, now() + interval '2 hours', NULL), ($3, NULL, now() - interval '1 hour')`,
		ids[0], ids[1], ids[2]); err != nil {
		t.Fatal(err)
	}
	if err := q.RefreshGauges(b.Ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target, within string
		want           float64
	}{
		{"first_response", "0", 0}, {"first_response", "900", 1}, {"first_response", "3600", 1},
		{"first_response", "14400", 2}, {"first_response", "+Inf", 2},
		{"resolution", "0", 1}, {"resolution", "+Inf", 1},
		{"next_response", "+Inf", 0},
	} {
		if got := testutil.ToFloat64(metrics.SLADueWithin.WithLabelValues(c.target, c.within)); got != c.want {
			t.Errorf("helpdesk_sla_open_tickets_due_within_seconds{target=%q,within=%q} = %v, want %v", c.target, c.within, got, c.want)
		}
	}
}
