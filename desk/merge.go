package desk

import (
	"context"
	"errors"
	"fmt"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Why a merge is refused; each is a conflict with the tickets as they are.
var (
	ErrMergeSelf          = errors.New("a ticket cannot be merged into itself")
	ErrMergeIntoClosed    = errors.New("the ticket to merge into is closed: merge into an open, pending or solved one")
	ErrAlreadyMerged      = errors.New("the ticket is merged already")
	ErrMergeOtherCustomer = errors.New("the tickets are of different customers: merge with allow_other_customer to move one customer's messages into the other's ticket")
)

// MergeParams are a duplicate and the ticket it goes into.
type MergeParams struct {
	TicketID string // the duplicate, closed by the merge
	Into     string // the ticket that holds both afterwards
	// Notify tells the customer, once, with a reply in the target's
	// thread; false tells nobody.
	Notify bool
	// AllowOtherCustomer lets an agent merge tickets of two customers:
	// each then sees the other's messages.
	AllowOtherCustomer bool
}

// MergeTicket moves a duplicate into another ticket in one transaction:
// its messages (notes, held mail and attachments with them, and every
// Message-ID, so that mail answering either thread lands in the target),
// its participants; it closes the duplicate with merged_into, writes an
// event on both, triages the target again once and, with Notify, tells the
// customer in the target's thread. A ticket, once merged, redirects
// everything that names it (a Message-ID, its plus address, its [#T-…]
// token, a customer's message) to the target.
func (d *Desk) MergeTicket(ctx context.Context, actor vocab.Actor, p *MergeParams) (out *Merged, err error) {
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		out, err = d.MergeTicketTx(ctx, tx, actor, p)
		return err
	})
	return out, err
}

// Merged is what a merge did.
type Merged struct {
	TicketID    string // the target
	Merged      string // the duplicate, closed now
	TriageJobID int64  // the target's new triage
	NoticeID    int64  // the message that tells the customer; 0 for none
}

// MergeTicketTx is MergeTicket in the caller's transaction.
func (d *Desk) MergeTicketTx(ctx context.Context, tx *store.Tx, actor vocab.Actor, p *MergeParams) (*Merged, error) {
	if p.TicketID == p.Into {
		return nil, fmt.Errorf("merge %s: %w", p.TicketID, ErrMergeSelf)
	}
	var (
		from, into       store.Ticket
		fromCust, inCust store.Customer
		reads            store.Batch
	)
	// Both locked, the lower id first, so that two merges of the same
	// pair in opposite directions wait instead of deadlocking.
	first, second := p.TicketID, p.Into
	firstT, secondT := &from, &into
	if second < first {
		first, second, firstT, secondT = second, first, secondT, firstT
	}
	reads.LockTicket(first, firstT)
	reads.LockTicket(second, secondT)
	reads.CustomerOfTicket(p.TicketID, &fromCust)
	reads.CustomerOfTicket(p.Into, &inCust)
	var jobID int64 // the target's new triage
	reads.NextJobID(&jobID)
	if err := tx.Store().Send(ctx, &reads); err != nil {
		return nil, err
	}
	switch {
	case from.MergedInto != nil:
		return nil, fmt.Errorf("%s into %s: %w", from.ID, *from.MergedInto, ErrAlreadyMerged)
	case into.Status == vocab.StatusClosed:
		return nil, fmt.Errorf("%s: %w", into.ID, ErrMergeIntoClosed)
	case from.CustomerID != into.CustomerID && !p.AllowOtherCustomer:
		return nil, fmt.Errorf("%s and %s: %w", from.ID, into.ID, ErrMergeOtherCustomer)
	}
	tx.Later(func(b *store.Batch) {
		b.Merge(from.ID, into.ID)
		if from.CustomerID != into.CustomerID {
			// The other customer may write into the ticket that now holds
			// their conversation.
			b.AddParticipant(into.ID, fromCust.Email, actor)
		}
	})
	if from.Status != vocab.StatusClosed {
		setStatus(tx, &from, actor, vocab.StatusClosed)
	}
	event(tx, from.ID, actor, "merged_into", "", into.ID)
	event(tx, into.ID, actor, "merged", from.ID, "")
	for _, id := range []string{from.ID, into.ID} {
		d.retimeTx(tx, id)
	}
	d.retriageTx(tx, into.ID, jobID)
	out := &Merged{TicketID: into.ID, Merged: from.ID, TriageJobID: jobID}
	var err error
	if p.Notify {
		if out.NoticeID, err = d.mergeNoticeTx(ctx, tx, &from, &into, &fromCust, &inCust); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mergeNoticeTx tells the customer, in the target's thread, that the two
// requests are one now; the duplicate's customer, when another, is copied.
// It is the service's reply, not an agent's: it is no first response.
func (d *Desk) mergeNoticeTx(ctx context.Context, tx *store.Tx, from, into *store.Ticket, fromCust, inCust *store.Customer) (int64, error) {
	body := fmt.Sprintf("Hello,\n\nwe have joined your request [#%s] %q with this one, [#%s] %q: "+
		"everything you wrote in either is here now, and we will answer you in this conversation.\n\nBest regards,\n%s",
		from.ID, from.Subject, into.ID, into.Subject, d.config.From.Name)
	p := &ReplyParams{TicketID: into.ID, Author: vocab.System, Body: body, Status: into.Status, system: true}
	if fromCust.ID != inCust.ID {
		p.Cc = []*mail.Address{{Name: fromCust.Name, Address: fromCust.Email}}
	}
	msg, _, err := d.CreateReplyTx(ctx, tx, p)
	switch {
	case errors.Is(err, ErrNoRelay):
		return 0, nil // no way to send mail: nobody to tell
	case err != nil:
		return 0, err
	}
	return msg.ID, nil
}

// mergedTarget is the ticket a merged ticket went into, or the ticket
// itself; merged_into never names a merged ticket (store.Batch.Merge).
func mergedTarget(t *store.Ticket) string {
	if t.MergedInto != nil {
		return *t.MergedInto
	}
	return t.ID
}
