package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"helpdesk/desk"
)

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
	return w.email.backoff.NextRetry(job.JobRow)
}

// Timeout is an email's.
func (w *NotifyWorker) Timeout(*river.Job[NotifyArgs]) time.Duration { return w.email.timeout }

// Work makes one delivery attempt.
func (w *NotifyWorker) Work(ctx context.Context, job *river.Job[NotifyArgs]) error {
	return w.email.deliver(ctx, job.JobRow, job.Args.MessageID)
}

// Notifier writes the notifications of a ticket whose triage just
// finished, in the transaction that finishes it; desk.Desk is the one in use.
type Notifier interface {
	NotifyTx(ctx context.Context, tx pgx.Tx, ticketID string, triageJobID int64) error
	// BounceTx tells them a reply could not be delivered to an address.
	BounceTx(ctx context.Context, tx pgx.Tx, b *desk.Bounce) error
	// TellAssigneeTx mails the ticket's assignee a short notice.
	TellAssigneeTx(ctx context.Context, tx pgx.Tx, ticketID, subjectPrefix, text string) error
}

// SetNotifier makes triage notify the ticket's agents when it finishes,
// and deliveries tell them of bounces and delays. Without a relay nothing
// could carry the mail, so nobody is notified. Call it before Start.
func (q *Queue) SetNotifier(n Notifier) {
	if q.config.Relay == nil {
		return
	}
	if q.triage != nil {
		q.triage.notifier = n
	}
	if q.email != nil {
		q.email.notifier = n
	}
}

// EnqueueNotifyTx inserts the job that delivers a stored mail to an agent,
// in the caller's transaction; desk calls it.
func (q *Queue) EnqueueNotifyTx(ctx context.Context, tx pgx.Tx, messageID int64, ticketID string) (int64, error) {
	if q.config.Relay == nil {
		return 0, desk.ErrNoRelay
	}
	res, err := q.Client.InsertTx(ctx, tx, NotifyArgs{MessageID: messageID, TicketID: ticketID},
		&river.InsertOpts{MaxAttempts: q.config.EmailMaxAttempts, Queue: QueueEmail})
	if err != nil {
		return 0, fmt.Errorf("enqueue notification %d: %w", messageID, err)
	}
	return res.Job.ID, nil
}
