package desk

import (
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// The events webhooks may subscribe to.
const (
	EventTicketCreated       = "ticket.created"
	EventTicketTriaged       = "ticket.triaged"
	EventTicketStatusChanged = "ticket.status_changed"
	EventMessageSent         = "message.sent"
	EventMessageFailed       = "message.failed"
	EventMessageReceived     = "message.received"
)

// EventTypes lists every event type.
var EventTypes = []string{EventTicketCreated, EventTicketTriaged, EventTicketStatusChanged, EventMessageSent, EventMessageFailed, EventMessageReceived, EventSLAWarning, EventSLABreached}

// TicketCreated is the data of ticket.created.
type TicketCreated struct {
	TicketID   string       `json:"ticket_id"`
	CustomerID string       `json:"customer_id"`
	Subject    string       `json:"subject"`
	Status     vocab.Status `json:"status"`
	FollowUpOf *string      `json:"follow_up_of"`
	CreatedAt  time.Time    `json:"created_at"`
}

// TicketTriaged is the data of ticket.triaged.
type TicketTriaged struct {
	TicketID string  `json:"ticket_id"`
	Team     *string `json:"team"`
	Priority *int16  `json:"priority"`
	Assignee *string `json:"assignee"`
	JobID    int64   `json:"job_id"`
}

// TicketStatusChanged is the data of ticket.status_changed.
type TicketStatusChanged struct {
	TicketID string       `json:"ticket_id"`
	From     vocab.Status `json:"from"`
	To       vocab.Status `json:"to"`
	Actor    vocab.Actor  `json:"actor"`
}

// MessageEvent is the data of message.received, message.sent and
// message.failed.
type MessageEvent struct {
	TicketID       string          `json:"ticket_id"`
	MessageID      int64           `json:"message_id"`
	Direction      vocab.Direction `json:"direction"`
	Author         vocab.Actor     `json:"author"`
	EmailMessageID *string         `json:"email_message_id"`
	State          string          `json:"state,omitempty"`      // sent, captured, partially_sent, failed, suppressed
	LastError      string          `json:"last_error,omitempty"` // for message.failed
	Automatic      bool            `json:"automatic,omitempty"`  // message.received: an auto-reply or bulk mail
}

// emit records an event in the caller's transaction, with its next trip;
// the webhook dispatcher delivers it to the endpoints that subscribe to
// its type.
func emit(tx *store.Tx, eventType string, data any) {
	tx.Later(func(b *store.Batch) { b.InsertWebhookEvents([]store.NewWebhookEvent{{Type: eventType, Data: data}}) })
}

func messageEvent(m *store.Message) MessageEvent {
	return MessageEvent{TicketID: m.TicketID, MessageID: m.ID, Direction: m.Direction, Author: m.Author, EmailMessageID: m.EmailMessageID}
}

// delivered is the message.sent or message.failed event of mail to the
// customer whose delivery ended in state; none for mail to agents or a
// delivery that goes on. It is recorded with the attempt.
func delivered(m *store.Message, state, lastError string) []store.NewWebhookEvent {
	if !m.Direction.ToCustomer() {
		return nil
	}
	e := messageEvent(m)
	e.State = state
	switch state {
	case store.DeliverySent, store.DeliveryCaptured, store.DeliveryPartiallySent:
		return []store.NewWebhookEvent{{Type: EventMessageSent, Data: e}}
	case store.DeliveryFailed, store.DeliverySuppressed:
		e.LastError = lastError
		return []store.NewWebhookEvent{{Type: EventMessageFailed, Data: e}}
	}
	return nil
}
