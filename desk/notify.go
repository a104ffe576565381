package desk

import (
	"context"
	"errors"
	"time"

	"helpdesk/mail"
	"helpdesk/store"
	"helpdesk/vocab"
)

// notifyTx tells the ticket's agents, by mail, what the customer wrote and
// what triage made of it, in the transaction that completes triage job
// triageJobID: the assignee, or every active agent of the team when nobody
// is assigned. A job that a newer customer message replaced notifies
// nobody; the newer one will. Without a way to send mail, nobody is told.
func (d *Desk) notifyTx(ctx context.Context, tx *store.Tx, ticketID string, triageJobID int64) error {
	st := tx.Store()
	t, err := st.GetTicket(ctx, ticketID)
	if err != nil {
		return err
	}
	if t.TriageJobID == nil || *t.TriageJobID != triageJobID {
		return nil
	}
	var agents []*store.Agent
	if t.Assignee != nil {
		a, err := st.GetAgent(ctx, *t.Assignee)
		if err != nil {
			return err
		}
		if a.Active() {
			agents = append(agents, a)
		}
	}
	if len(agents) == 0 && t.Team != nil {
		if agents, err = st.TeamAgents(ctx, *t.Team); err != nil {
			return err
		}
	}
	if len(agents) == 0 {
		return nil
	}
	customer, err := st.GetCustomer(ctx, t.CustomerID)
	if err != nil {
		return err
	}
	newest, err := st.NewestBodies(ctx, t.ID, vocab.DirectionInbound, 1)
	if err != nil {
		return err
	}
	text, htmlBody := notificationBody(t, customer, newest)
	for _, a := range agents {
		if err := d.mailAgentTx(ctx, tx, t, a, notificationSubject(t), text, htmlBody); err != nil {
			return err
		}
	}
	return nil
}

// mailAgentTx writes a mail to an agent about the ticket: a message on the
// agent side with its Message-ID, threaded under the ticket's earlier mail
// to agents, its bytes rendered and stored now, and its job; the rows wait
// for the transaction's next trip. Without a way to send mail it writes
// nothing.
func (d *Desk) mailAgentTx(ctx context.Context, tx *store.Tx, t *store.Ticket, a *store.Agent, subject, text, htmlBody string) error {
	var (
		refs      []string
		messageID int64
		now       time.Time
		reads     store.Batch
	)
	reads.NotificationIDs(t.ID, &refs)
	reads.NextMessageID(&messageID)
	reads.Now(&now)
	if err := tx.Store().Send(ctx, &reads); err != nil {
		return err
	}
	jobID, err := d.jobs.EnqueueNotifyTx(ctx, tx, messageID, t.ID)
	if errors.Is(err, ErrNoRelay) {
		return nil
	} else if err != nil {
		return err
	}
	id := mail.NewMessageID(d.config.MailDomain)
	out := d.agentMail(t, a, id, now, refs, subject, text, htmlBody)
	raw, err := out.Render()
	if err != nil {
		return err
	}
	var (
		msg   store.Message
		saved bool
	)
	tx.Later(func(b *store.Batch) {
		b.InsertMessage(&store.InsertMessageParams{ID: messageID, TicketID: t.ID, Direction: vocab.DirectionNotification,
			Author: vocab.System, Body: text, EmailMessageID: &id}, &msg)
		b.InsertOutboundEmail(&store.InsertOutboundEmailParams{MessageID: messageID, FromAddress: d.config.From.String(),
			Recipients: []store.Recipient{{Address: a.Email, Kind: "to"}}, JobID: &jobID})
		b.SaveRendered(messageID, out.InReplyTo, out.References, raw, &saved)
	})
	return nil
}

// tellAssigneeTx mails the ticket's assignee, if any and active, a short
// notice on the agent-side thread, in the caller's transaction.
func (d *Desk) tellAssigneeTx(ctx context.Context, tx *store.Tx, t *store.Ticket, subjectPrefix, text string) error {
	if t.Assignee == nil {
		return nil
	}
	a, err := tx.Store().GetAgent(ctx, *t.Assignee)
	if err != nil || !a.Active() {
		return err
	}
	return d.mailAgentTx(ctx, tx, t, a, subjectPrefix+notificationSubject(t), notice(text), "")
}
