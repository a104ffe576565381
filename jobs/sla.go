package jobs

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/store"
)

// SLAArgs is a look at a ticket's clocks: after a change (At zero), or at
// a warning or due time (At, one job per ticket and time).
type SLAArgs struct {
	TicketID string    `json:"ticket_id"`
	At       time.Time `json:"at,omitzero"`
}

// Kind is River's name for the job.
func (SLAArgs) Kind() string { return "sla" }

// SLAWorker computes a ticket's clocks and sends what has fallen due;
// delivered twice, it sends nothing twice (desk.RetimeTicket).
type SLAWorker struct {
	river.WorkerDefaults[SLAArgs]
	desk *desk.Desk
}

// Work looks at the clocks.
func (w *SLAWorker) Work(ctx context.Context, job *river.Job[SLAArgs]) error {
	out, err := w.desk.RetimeTicket(ctx, job.Args.TicketID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the ticket is gone: no clock to look at
	} else if err != nil {
		return err
	}
	for _, b := range out.Breaches {
		priority, team := "", ""
		if b.Priority != nil {
			priority = strconv.Itoa(int(*b.Priority))
		}
		if b.Team != nil {
			team = *b.Team
		}
		metrics.SLABreaches.WithLabelValues(string(b.Target), priority, team).Inc()
	}
	return nil
}
