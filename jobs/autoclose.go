package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/helpdesk-dev/helpdesk/desk"
)

// AutocloseArgs is the periodic job that closes tickets solved long enough ago.
type AutocloseArgs struct{}

// Kind is River's name for the job.
func (AutocloseArgs) Kind() string { return "autoclose" }

// InsertOpts puts the job on the maintenance queue.
func (AutocloseArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: QueueMaintenance} }

// autocloseSchedule runs autoclose at start and then a few times per
// period, so a solved ticket closes at most a tenth of the period (an hour
// at most) after it is due.
func autocloseSchedule(after time.Duration) *river.PeriodicJob {
	every := min(max(after/10, time.Minute), time.Hour)
	return river.NewPeriodicJob(river.PeriodicInterval(every),
		func() (river.JobArgs, *river.InsertOpts) { return AutocloseArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true, ID: "autoclose"})
}

// AutocloseWorker closes solved tickets whose customer has not written for
// the autoclose period, by its clock.
type AutocloseWorker struct {
	river.WorkerDefaults[AutocloseArgs]
	desk   *desk.Desk
	after  time.Duration
	now    func() time.Time
	logger *slog.Logger
}

// Work closes what is due.
func (w *AutocloseWorker) Work(ctx context.Context, _ *river.Job[AutocloseArgs]) error {
	n, err := w.desk.Autoclose(ctx, w.now().Add(-w.after))
	if n > 0 {
		w.logger.InfoContext(ctx, "closed solved tickets", slog.Int("closed", n), slog.Duration("solved_for", w.after))
	}
	return err
}
