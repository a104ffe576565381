package desk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// ErrNoHeldSender is a held mail without a usable From: it can be
// nobody's message but the ticket's customer's.
var ErrNoHeldSender = errors.New("the held message has no usable sender address")

// AcceptAs is whose message a held mail becomes when an agent accepts it.
type AcceptAs string

// The ways to accept a held mail.
const (
	// AcceptAsCustomer: the ticket's customer wrote it, from an address
	// or through a path the desk did not recognise.
	AcceptAsCustomer AcceptAs = "customer"
	// AcceptAsParticipant: its sender wrote it and may write into the
	// ticket from now on (a colleague of the customer, say).
	AcceptAsParticipant AcceptAs = "participant"
)

// Valid reports whether a is one of the ways to accept.
func (a AcceptAs) Valid() bool { return a == AcceptAsCustomer || a == AcceptAsParticipant }

// AcceptHeld makes a mail held on the ticket an inbound message of it, in
// one transaction, as a customer's message would have been: the ticket
// reopens if it was pending or solved, is triaged again, and hears
// message.received. As a participant's, its sender may write into the
// ticket from then on. A closed ticket accepts nothing (split the mail
// off instead); a message not held on the ticket is store.ErrNotFound.
func (d *Desk) AcceptHeld(ctx context.Context, actor vocab.Actor, ticketID string, messageID int64, as AcceptAs) (msg *store.Message, err error) {
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		st := tx.Store()
		ticket, err := st.LockTicket(ctx, ticketID)
		if err != nil {
			return err
		}
		if ticket.Status == vocab.StatusClosed {
			return fmt.Errorf("%w: split the held message into a ticket of its own instead", ErrTicketClosed)
		}
		var (
			held  store.Message
			jobID int64 // the ticket's new triage
			read  store.Batch
		)
		read.GetHeld(ticketID, messageID, &held)
		read.NextJobID(&jobID)
		if err := st.Send(ctx, &read); err != nil {
			return err
		}
		author := vocab.Customer(ticket.CustomerID)
		var writes store.Batch
		if as == AcceptAsParticipant {
			sender := deref(held.Sender)
			if sender == "" {
				return ErrNoHeldSender
			}
			author = vocab.Email(sender)
			writes.AddParticipant(ticketID, sender, actor)
		}
		msg = &store.Message{}
		writes.AcceptHeld(ticketID, messageID, author, msg)
		if err := st.Send(ctx, &writes); err != nil {
			return err
		}
		event(tx, ticketID, actor, "held_accepted", "", fmt.Sprintf("message %d as %s", messageID, author))
		emit(tx, EventMessageReceived, messageEvent(msg))
		d.customerWroteTx(tx, ticketID, jobID, false)
		if ticket.Status == vocab.StatusPending || ticket.Status == vocab.StatusSolved {
			setStatus(tx, ticket, actor, vocab.StatusOpen)
		}
		d.retimeTx(tx, ticketID)
		return nil
	})
	return msg, err
}

// SplitHeld makes a mail held on the ticket the first message of a new
// ticket of its sender's (a customer made for the address if none is),
// with the mail's subject, in one transaction: the mail leaves the ticket
// it named, the new ticket is triaged and both record the move. A mail
// without a usable sender is ErrNoHeldSender.
func (d *Desk) SplitHeld(ctx context.Context, actor vocab.Actor, ticketID string, messageID int64) (ticket *store.Ticket, err error) {
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		st := tx.Store()
		if _, err := st.LockTicket(ctx, ticketID); err != nil {
			return err
		}
		var held store.Message
		var read store.Batch
		read.GetHeld(ticketID, messageID, &held)
		if err := st.Send(ctx, &read); err != nil {
			return err
		}
		sender := deref(held.Sender)
		if sender == "" {
			return ErrNoHeldSender
		}
		customer, err := st.CustomerByEmail(ctx, sender)
		if errors.Is(err, store.ErrNotFound) {
			customer, err = d.newCustomerTx(ctx, st, sender, "")
		}
		if err != nil {
			return err
		}
		subject := deref(held.Subject)
		if subject == "" {
			subject = "(no subject)"
		}
		var (
			newID   string
			now     time.Time
			jobID   int64 // the new ticket's triage
			numbers store.Batch
		)
		numbers.NextTicketID(&newID, &now)
		numbers.NextJobID(&jobID)
		if err := st.Send(ctx, &numbers); err != nil {
			return err
		}
		d.jobs.QueueTriageAtCommit(tx, newID, jobID, false)
		ticket = &store.Ticket{}
		var (
			rows  store.Batch
			moved store.Message
		)
		author := vocab.Customer(customer.ID)
		rows.InsertTicket(&store.InsertTicketParams{ID: newID, CustomerID: customer.ID, Subject: subject, TriageJobID: &jobID}, ticket)
		rows.MoveHeld(ticketID, messageID, newID, author, &moved)
		rows.InsertTicketEvent(ticketID, &store.TicketEvent{Actor: actor, What: "held_split", From: ptr(fmt.Sprint(messageID)), To: &newID})
		rows.InsertTicketEvent(newID, &store.TicketEvent{Actor: actor, What: "split_from", From: &ticketID})
		rows.InsertWebhookEvents([]store.NewWebhookEvent{
			{Type: EventTicketCreated, Data: TicketCreated{TicketID: newID, CustomerID: customer.ID, Subject: subject,
				Status: vocab.StatusOpen, CreatedAt: now}},
			{Type: EventMessageReceived, Data: MessageEvent{TicketID: newID, MessageID: messageID, Direction: vocab.DirectionInbound,
				Author: author, EmailMessageID: held.EmailMessageID}},
		})
		return st.Send(ctx, &rows)
	})
	return ticket, err
}

func ptr[T any](v T) *T { return &v }
