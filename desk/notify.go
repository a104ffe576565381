package desk

import (
	"context"
	"errors"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// triagedTx tells of a ticket whose triage job triageJobID just saved
// its last step, in that transaction: ticket.triaged, and a mail to the
// ticket's agents with what the customer wrote and what triage made of
// it (the assignee, or every active agent of the team when nobody is
// assigned). A job that a newer customer message replaced tells nobody;
// the newer one will. Without a way to send mail, or for a quiet job (of
// mail that waited long in its mailbox: late), no agent is mailed.
//
// Whom to tell, with the numbers of their mails, and the thread those
// mails join come with the ticket's reads: telling a team costs the
// transaction no trip of its own, however many agents hear of it. The
// mails of one transaction thread under the ticket's earlier mail to
// agents, not under each other: each goes to another agent.
func (d *Desk) triagedTx(ctx context.Context, tx *store.Tx, ticketID string, triageJobID int64, quiet bool) error {
	var (
		r     store.Triaged
		reads store.Batch
	)
	reads.TriagedRead(ticketID, &r)
	if err := tx.Store().Send(ctx, &reads); err != nil {
		return err
	}
	t := &r.Ticket
	emit(tx, EventTicketTriaged, TicketTriaged{TicketID: t.ID, Team: t.Team, Priority: t.Priority, Assignee: t.Assignee, JobID: triageJobID})
	if t.TriageJobID == nil || *t.TriageJobID != triageJobID || quiet {
		return nil
	}
	thread := agentThread{refs: r.Thread, now: r.Now}
	text, htmlBody := notificationBody(t, &r.Customer, r.Newest, d.howToAnswer(t))
	for _, a := range r.Agents {
		if err := d.writeAgentMailTx(ctx, tx, t, a, thread, notificationSubject(t), text, htmlBody); err != nil {
			return err
		}
	}
	return nil
}

// agentThread is what a mail to an agent about a ticket is threaded and
// dated by: the Message-IDs of the ticket's earlier mail to agents, and
// the transaction's time.
type agentThread struct {
	refs []string
	now  time.Time
}

// read queues the reads of the ticket's thread to agents.
func (th *agentThread) read(reads *store.Batch, ticketID string) {
	reads.NotificationIDs(ticketID, &th.refs)
	reads.Now(&th.now)
}

// mailAgentTx writes a mail to an agent about the ticket: a message on the
// agent side with its Message-ID, threaded under the ticket's earlier mail
// to agents, its bytes rendered and stored now, and its job; the rows wait
// for the transaction's next trip. Without a way to send mail it writes
// nothing.
func (d *Desk) mailAgentTx(ctx context.Context, tx *store.Tx, t *store.Ticket, a *store.Agent, subject, text, htmlBody string) error {
	var (
		thread agentThread
		to     = store.AgentToMail{Agent: a}
		reads  store.Batch
	)
	thread.read(&reads, t.ID)
	reads.NextMessageID(&to.MessageID)
	reads.NextJobID(&to.JobID)
	if err := tx.Store().Send(ctx, &reads); err != nil {
		return err
	}
	return d.writeAgentMailTx(ctx, tx, t, to, thread, subject, text, htmlBody)
}

// writeAgentMailTx is mailAgentTx with its reads made: the mail's numbers
// (to's) and its thread.
func (d *Desk) writeAgentMailTx(ctx context.Context, tx *store.Tx, t *store.Ticket, to store.AgentToMail, thread agentThread, subject, text, htmlBody string) error {
	if err := d.jobs.QueueNotifyAtCommit(tx, to.MessageID, t.ID, to.JobID); errors.Is(err, ErrNoRelay) {
		return nil
	} else if err != nil {
		return err
	}
	from, err := d.fromOf(ctx, t)
	if err != nil {
		return err
	}
	id := mail.NewMessageID(d.config.MailDomain)
	out := d.agentMail(from, t, to.Agent, to.MessageID, id, thread.now, thread.refs, subject, text, htmlBody)
	raw, err := out.Render()
	if err != nil {
		return err
	}
	d.keepRendered(tx, &store.InsertMessageParams{ID: to.MessageID, TicketID: t.ID, Direction: vocab.DirectionNotification,
		Author: vocab.System, Body: text, EmailMessageID: &id}, to.JobID, store.Recipient{Address: to.Email, Kind: "to"}, out, raw)
	return nil
}

// keepRendered queues, with the transaction's next trip, a mail the
// service wrote itself and rendered already: its message, its delivery to
// one recipient with the job that sends it, and its bytes, kept before
// any send. Nothing is read back, so the rows may go with the commit.
func (d *Desk) keepRendered(tx *store.Tx, m *store.InsertMessageParams, jobID int64, to store.Recipient, out *mail.Outgoing, raw []byte) {
	tx.Later(func(b *store.Batch) {
		b.InsertMessage(m, nil)
		b.InsertOutboundEmail(&store.InsertOutboundEmailParams{MessageID: m.ID, FromAddress: out.From.String(),
			Recipients: []store.Recipient{to}, JobID: &jobID, Rendered: raw, InReplyTo: out.InReplyTo, References: out.References})
	})
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
	return d.mailAgentTx(ctx, tx, t, a, subjectPrefix+notificationSubject(t), notice(text, d.howToAnswer(t)), "")
}
