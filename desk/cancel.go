package desk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Errors of a job a person asked to cancel or delete.
var (
	ErrJobBusy     = errors.New("the job is running; wait for its outcome")
	ErrJobFinished = errors.New("the job has finished")
	ErrJobActive   = errors.New("the job has not finished; cancel it first")
	ErrJobHistory  = errors.New("a delivery's job is the history of its mail and is kept")
)

// Cancelled is a job the queue cancelled: the delivery it was, if any.
type Cancelled struct {
	JobID     int64
	TicketID  string
	MessageID int64 // the mail it was to deliver; 0 for a job that delivers none
}

// CancelJob cancels a queued job for a person, in one transaction: a job
// that is running is ErrJobBusy, one that finished ErrJobFinished. A
// cancelled delivery is its mail failed, as if the relay had refused it:
// each recipient not yet served is marked, the ticket gets a note and an
// event, and message.failed goes out, so that no mail stays "queued" for
// ever.
func (d *Desk) CancelJob(ctx context.Context, actor vocab.Actor, jobID int64) (*Cancelled, error) {
	var out *Cancelled
	err := store.Run(ctx, d.pool, func(tx *store.Tx) error {
		c, err := d.jobs.CancelTx(ctx, tx, jobID)
		if err != nil || c.MessageID == 0 {
			out = &c
			return err
		}
		out = &c
		st := tx.Store()
		var (
			msg   store.Message
			em    store.OutboundEmail
			reads store.Batch
		)
		reads.GetMessage(c.MessageID, &msg)
		reads.GetOutboundEmail(c.MessageID, &em)
		if err := st.Send(ctx, &reads); err != nil {
			return err
		}
		why := "CancelledByPerson: cancelled by " + string(actor) + " before it was sent"
		attempt := &store.AttemptResult{State: store.DeliveryFailed, LastError: why}
		var unserved []string
		for _, r := range em.Recipients {
			switch r.State {
			case store.RecipientSent, store.RecipientCaptured:
				attempt.State = store.DeliveryPartiallySent
			case store.RecipientPending, store.RecipientUncertain:
				unserved = append(unserved, r.Address)
				attempt.Recipients = append(attempt.Recipients, store.RecipientResult{Address: r.Address, State: store.RecipientFailed,
					SMTPText: "cancelled by " + string(actor)})
			}
		}
		note := fmt.Sprintf("The mail of message %d was cancelled by %s; it did not go to %s.", c.MessageID, actor, strings.Join(unserved, ", "))
		tx.Later(func(b *store.Batch) {
			b.RecordAttempt(msg.ID, attempt)
			b.InsertWebhookEvents(delivered(&msg, attempt.State, why))
			b.InsertMessage(&store.InsertMessageParams{TicketID: msg.TicketID, Direction: vocab.DirectionNote, Author: vocab.System, Body: note}, &store.Message{})
		})
		event(tx, msg.TicketID, actor, "email_cancelled", "", fmt.Sprint(c.MessageID))
		return nil
	})
	return out, err
}
