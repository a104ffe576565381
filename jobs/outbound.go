package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
)

// EmailArgs is the job that delivers one outbound message.
type EmailArgs struct {
	MessageID int64 `json:"message_id"`
	// TicketID is the message's ticket, for people reading the job; jobs
	// queued before it was added have none.
	TicketID string `json:"ticket_id,omitempty"`
	// Render: the mail is rendered at its first attempt (an agent's
	// reply), which reads what renders it with the mail.
	Render bool `json:"render,omitempty"`
}

// Kind is River's name for the job.
func (EmailArgs) Kind() string { return "email_outbound" }

// EmailWorker delivers an outbound message: desk.Deliver makes the
// attempt and says what comes next.
type EmailWorker struct {
	river.WorkerDefaults[EmailArgs]
	desk    *desk.Desk
	backoff backoff.Backoff
	timeout time.Duration // one attempt, every SMTP phase included
}

// NextRetry spaces the attempts of an email that failed for a while.
func (w *EmailWorker) NextRetry(job *river.Job[EmailArgs]) time.Time {
	return w.backoff.After(job.Attempt)
}

// Timeout bounds one attempt, all SMTP phases together: River cancels the
// attempt's context then, and the relay's deadlines are capped by it. The
// rescuer hands a job back only after this, so a live attempt is never
// given to a second worker.
func (w *EmailWorker) Timeout(*river.Job[EmailArgs]) time.Duration { return w.timeout }

// Work makes one delivery attempt.
func (w *EmailWorker) Work(ctx context.Context, job *river.Job[EmailArgs]) error {
	a := attempt(job.JobRow, job.Args.MessageID)
	if job.Args.Render && job.Attempt == 1 {
		a.TicketID = job.Args.TicketID // the first attempt renders it; a later one finds the bytes kept
	}
	return next(w.desk.Deliver(ctx, a))
}

// attempt is the delivery attempt of job, of message messageID.
func attempt(job *rivertype.JobRow, messageID int64) desk.Attempt {
	return desk.Attempt{JobID: job.ID, MessageID: messageID, Attempt: job.Attempt, MaxAttempts: job.MaxAttempts}
}

// NotifyArgs is the job that delivers one mail to an agent: a notification
// of a customer's message, or an answer to an agent's mail. Its bytes are
// rendered and stored when it is queued.
type NotifyArgs struct {
	MessageID int64  `json:"message_id"`
	TicketID  string `json:"ticket_id"`
}

// Kind is River's name for the job.
func (NotifyArgs) Kind() string { return "email_notify" }

// NotifyWorker delivers agent mail exactly as EmailWorker delivers
// replies: the stored bytes, per-recipient outcomes, the relay's pauses.
type NotifyWorker struct {
	river.WorkerDefaults[NotifyArgs]
	email *EmailWorker
}

// NextRetry spaces the attempts as for replies.
func (w *NotifyWorker) NextRetry(job *river.Job[NotifyArgs]) time.Time {
	return w.email.backoff.After(job.Attempt)
}

// Timeout is an email's.
func (w *NotifyWorker) Timeout(*river.Job[NotifyArgs]) time.Duration { return w.email.timeout }

// Work makes one delivery attempt.
func (w *NotifyWorker) Work(ctx context.Context, job *river.Job[NotifyArgs]) error {
	return next(w.email.desk.Deliver(ctx, attempt(job.JobRow, job.Args.MessageID)))
}
