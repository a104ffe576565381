package desk

import (
	"context"
	"fmt"
	"strings"

	"helpdesk/mail"
	"helpdesk/store"
	"helpdesk/vocab"
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
}

// CreateReplyTx writes, in the caller's transaction, the outbound message
// with its Message-ID minted now (and never again), its delivery with one
// row per recipient, its email job, and the ticket's new status.
func (d *Desk) CreateReplyTx(ctx context.Context, tx *store.Tx, p *ReplyParams) (*store.Message, int64, error) {
	st := tx.Store()
	ticket, err := st.LockTicket(ctx, p.TicketID)
	if err != nil {
		return nil, 0, err
	}
	if ticket.Status == vocab.StatusClosed {
		return nil, 0, fmt.Errorf("reply to %s: %w", ticket.ID, ErrTicketClosed)
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
	customer, err := st.GetCustomer(ctx, ticket.CustomerID)
	if err != nil {
		return nil, 0, err
	}
	id := mail.NewMessageID(d.config.MailDomain)
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{
		TicketID: ticket.ID, Direction: vocab.DirectionOutbound, Author: p.Author, Body: body, EmailMessageID: &id,
	})
	if err != nil {
		return nil, 0, err
	}
	if len(p.Attachments) > 0 {
		missing, err := st.AttachUploads(ctx, msg.ID, p.Author.ID(), p.Attachments)
		if err != nil {
			return nil, 0, err
		}
		if len(missing) > 0 {
			return nil, 0, fmt.Errorf("attachments %v: %w", missing, ErrAttachmentUnavailable)
		}
	}
	recipients := []store.Recipient{{Address: customer.Email, Kind: "to"}}
	seen := map[string]bool{strings.ToLower(customer.Email): true}
	for _, cc := range p.Cc {
		if !seen[strings.ToLower(cc.Address)] {
			seen[strings.ToLower(cc.Address)] = true
			recipients = append(recipients, store.Recipient{Address: cc.Address, Name: cc.Name, Kind: "cc"})
		}
	}
	if err := st.InsertOutboundEmail(ctx, &store.InsertOutboundEmailParams{
		MessageID: msg.ID, FromAddress: d.config.From.String(), Recipients: recipients,
	}); err != nil {
		return nil, 0, err
	}
	jobID, err := d.jobs.EnqueueEmailTx(ctx, tx, msg.ID, ticket.ID)
	if err != nil {
		return nil, 0, err
	}
	if err := st.SetOutboundJob(ctx, msg.ID, jobID); err != nil {
		return nil, 0, err
	}
	if err := st.AgentResponded(ctx, ticket.ID); err != nil {
		return nil, 0, err
	}
	if status != ticket.Status {
		if err := setStatus(ctx, st, ticket, p.Author, status); err != nil {
			return nil, 0, err
		}
	}
	return msg, jobID, nil
}
