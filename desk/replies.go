package desk

import (
	"context"
	"fmt"
	"strings"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// ReplyParams are an agent's reply to a ticket.
type ReplyParams struct {
	TicketID string
	Author   vocab.Actor // agent:NAME
	Body     string      // with FromDraft, replaces the draft when set
	Cc       []*mail.Address
	// FromDraft sends the ticket's draft, which must answer everything the
	// customer wrote (ErrNoDraft, ErrDraftStale).
	FromDraft bool
	// Status is the ticket's status after the reply; "" is pending: we
	// wait for the customer.
	Status vocab.Status
	// Attachments are the replying agent's unsent uploads, sent with the
	// reply in this order (ErrAttachmentUnavailable otherwise).
	Attachments []int64
	// SeenMessage is the newest message the agent saw (its id); when a
	// newer customer message or reply is there, the reply is refused with
	// ErrTicketChanged, so that two agents do not both answer. 0: no check.
	SeenMessage int64
	// system: the service's own reply (a merge's notice), which is no
	// agent's response to the customer.
	system bool
}

// CreateReplyTx writes, in the caller's transaction, the outbound message
// with its Message-ID minted now (and never again), its delivery with one
// row per recipient, its email job, and the ticket's new status. The
// ticket, its customer and the numbers of the message and its job are
// read in one trip; the rows wait for the transaction's next (its commit,
// at the latest), and the job is inserted with the commit, so the message
// returned holds its number and Message-ID at once.
func (d *Desk) CreateReplyTx(ctx context.Context, tx *store.Tx, p *ReplyParams) (*store.Message, int64, error) {
	if p.Body != "" || !p.FromDraft { // an empty body from the draft is the draft's
		if err := messageText(p.Body); err != nil {
			return nil, 0, fmt.Errorf("reply to %s: %w", p.TicketID, err)
		}
	}
	var (
		ticket    store.Ticket
		customer  store.Customer
		messageID int64
		jobID     int64
		newest    int64
		reads     store.Batch
	)
	reads.LockTicket(p.TicketID, &ticket)
	reads.CustomerOfTicket(p.TicketID, &customer)
	reads.NextMessageID(&messageID)
	reads.NextJobID(&jobID)
	if p.SeenMessage > 0 {
		reads.NewestMessage(p.TicketID, &newest)
	}
	if err := tx.Store().Send(ctx, &reads); err != nil {
		return nil, 0, err
	}
	if newest > p.SeenMessage && p.SeenMessage > 0 {
		return nil, 0, fmt.Errorf("reply to %s: message %d came after %d: %w", ticket.ID, newest, p.SeenMessage, ErrTicketChanged)
	}
	if ticket.Status == vocab.StatusClosed {
		return nil, 0, fmt.Errorf("reply to %s: %w", ticket.ID, ErrTicketClosed)
	}
	from, err := d.fromOf(ctx, &ticket)
	if err != nil {
		return nil, 0, err
	}
	status := p.Status
	if status == "" {
		status = vocab.StatusPending
	}
	if !CanChangeStatus(ticket.Status, status) {
		return nil, 0, fmt.Errorf("%w: %s → %s", ErrInvalidTransition, ticket.Status, status)
	}
	body := p.Body
	if p.FromDraft {
		switch {
		case ticket.DraftReply == nil:
			return nil, 0, fmt.Errorf("ticket %s: %w", ticket.ID, ErrNoDraft)
		case !ticket.DraftIsCurrent():
			return nil, 0, fmt.Errorf("ticket %s: %w", ticket.ID, ErrDraftStale)
		case body == "":
			body = *ticket.DraftReply
		}
	}
	if err := d.jobs.QueueReplyAtCommit(tx, messageID, ticket.ID, jobID); err != nil {
		return nil, 0, err
	}
	id := mail.NewMessageID(d.config.MailDomain)
	msg := &store.Message{ID: messageID, TicketID: ticket.ID, Direction: vocab.DirectionOutbound, Author: p.Author, Body: body, EmailMessageID: &id}
	recipients := []store.Recipient{{Address: customer.Email, Kind: "to"}}
	seen := map[string]bool{strings.ToLower(customer.Email): true}
	for _, cc := range p.Cc {
		if !seen[strings.ToLower(cc.Address)] {
			seen[strings.ToLower(cc.Address)] = true
			recipients = append(recipients, store.Recipient{Address: cc.Address, Name: cc.Name, Kind: "cc"})
		}
	}
	tx.Later(func(b *store.Batch) {
		b.InsertMessage(&store.InsertMessageParams{ID: messageID, TicketID: ticket.ID, Direction: msg.Direction, Author: p.Author,
			Body: body, EmailMessageID: &id}, msg)
		b.InsertOutboundEmail(&store.InsertOutboundEmailParams{MessageID: messageID, FromAddress: from.String(),
			Recipients: recipients, JobID: &jobID})
		if !p.system {
			b.AgentResponded(ticket.ID)
		}
	})
	if len(p.Attachments) > 0 {
		missing, err := tx.Store().AttachUploads(ctx, messageID, p.Author.ID(), p.Attachments)
		if err != nil {
			return nil, 0, err
		}
		if len(missing) > 0 {
			return nil, 0, fmt.Errorf("attachments %v: %w", missing, ErrAttachmentUnavailable)
		}
	}
	if status != ticket.Status {
		setStatus(tx, &ticket, p.Author, status)
	}
	d.retimeTx(tx, ticket.ID)
	return msg, jobID, nil
}
