package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/helpdesk-dev/helpdesk/desk"
)

// PruneArgs is the periodic job that deletes expired Idempotency-Keys,
// uploads no reply sent within a day (and contents nothing refers to),
// and acknowledgements too old to count toward their limit.
type PruneArgs struct{}

// Kind is River's name for the job.
func (PruneArgs) Kind() string { return "idempotency_prune" }

// InsertOpts puts the job on the maintenance queue.
func (PruneArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: QueueMaintenance} }

// pruneSchedule runs the prune at start and then a few times per retention,
// so a key outlives its retention by at most a sixth of it (an hour at the
// default 24h). Retention itself is exact: a stale key is never replayed.
func pruneSchedule(retention time.Duration) *river.PeriodicJob {
	every := min(max(retention/6, time.Minute), time.Hour)
	return river.NewPeriodicJob(river.PeriodicInterval(every),
		func() (river.JobArgs, *river.InsertOpts) { return PruneArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true, ID: "idempotency_prune"})
}

// maintenanceTimeout bounds a periodic job: one DELETE.
const maintenanceTimeout = 30 * time.Second

type pruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	desk *desk.Desk
}

func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	return w.desk.Prune(ctx)
}
