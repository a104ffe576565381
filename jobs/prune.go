package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"helpdesk/desk"
	"helpdesk/store"
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
	pool      *pgxpool.Pool
	retention time.Duration
	logger    *slog.Logger
}

func (w *pruneWorker) Work(ctx context.Context, job *river.Job[PruneArgs]) error {
	st := store.New(w.pool)
	n, err := st.PruneIdempotencyKeys(ctx, w.retention)
	if err != nil {
		return err
	}
	if n > 0 {
		w.logger.InfoContext(ctx, "pruned expired idempotency keys", slog.Int64("deleted", n), slog.Duration("retention", w.retention))
	}
	uploads, contents, err := st.PruneAttachments(ctx, uploadRetention)
	if err != nil {
		return err
	}
	if uploads+contents > 0 {
		w.logger.InfoContext(ctx, "pruned unsent uploads", slog.Int64("uploads", uploads), slog.Int64("contents", contents))
	}
	if _, err = st.PruneAcknowledgements(ctx, desk.AckWindow); err != nil {
		return err
	}
	// Deliveries end within hours; a week keeps the events for a look.
	_, err = st.PruneWebhookEvents(ctx, 7*24*time.Hour)
	return err
}

// uploadRetention is how long an upload waits for a reply to send it.
const uploadRetention = 24 * time.Hour
