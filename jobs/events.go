package jobs

import (
	"encoding/json"
	"log/slog"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/helpdesk-dev/helpdesk/metrics"
)

// observe records one of River's job events: how long the attempt ran,
// and, for a job that failed for good or became a dead letter, one line
// at ERROR for the person on call.
func (w *Workers) observe(e *river.Event) {
	if e.Job == nil {
		return
	}
	outcome := ""
	switch e.Kind {
	case river.EventKindJobCompleted:
		outcome = StateSucceeded
	case river.EventKindJobSnoozed:
		outcome = "snoozed"
	case river.EventKindJobCancelled:
		outcome = StateFailed
	case river.EventKindJobFailed:
		outcome = "retry"
		if e.Job.State == rivertype.JobStateDiscarded {
			outcome = StateDeadLetter
		}
	}
	if e.JobStats != nil {
		metrics.JobDuration.WithLabelValues(e.Job.Kind, outcome).Observe(e.JobStats.RunDuration.Seconds())
	}
	if outcome == StateFailed || outcome == StateDeadLetter {
		s := StatusOf(e.Job)
		var args struct {
			MessageID int64 `json:"message_id"`
		}
		_ = json.Unmarshal(e.Job.EncodedArgs, &args)
		w.config.Logger.Error("job "+outcome, slog.Int64("job_id", e.Job.ID), slog.String("kind", e.Job.Kind),
			slog.String("ticket_id", s.TicketID), slog.Int64("message_id", args.MessageID), slog.Int("attempt", e.Job.Attempt),
			slog.String("last_error", lastErrorOrNone(s)))
	}
}

// endEvents ends the subscription and waits until its events are read.
func (w *Workers) endEvents() {
	if w.stopEvents != nil {
		w.stopEvents()
		<-w.eventsDone
	}
}
