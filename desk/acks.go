package desk

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// AckConfig is how new tickets are acknowledged.
type AckConfig struct {
	// Template writes the text; it is given an AckData. Nil: DefaultAckTemplate.
	Template *template.Template
	// MaxPerDay bounds the acknowledgements to one address in 24 hours, so
	// that two automatic responders that strip each other's marks still
	// stop. Default 3.
	MaxPerDay int
	// MaxPerHour bounds the acknowledgements to every address together,
	// so that forged senders cannot make the service a mailer of many.
	MaxPerHour int
}

// AckData is what an acknowledgement template may use. To a sender who
// became a customer with the mail it answers, CustomerName and Subject are
// empty: anyone may forge a From, and the acknowledgement must not carry
// words a stranger chose to someone else.
type AckData struct {
	TicketID      string
	Subject       string
	CustomerName  string
	CustomerEmail string
}

// DefaultAckTemplate is the acknowledgement when the configuration names none.
const DefaultAckTemplate = `Hello{{if .CustomerName}} {{.CustomerName}}{{end}},

we have received your message and opened ticket {{.TicketID}}{{if .Subject}} ("{{.Subject}}"){{end}}.
An agent will answer you by email. To add something, reply to this email.

This is an automatic reply.
`

// ParseAckTemplate reads an acknowledgement template and tries it once,
// so that a mistake is found at start and not on the first new ticket.
func ParseAckTemplate(text string) (*template.Template, error) {
	t, err := template.New("acknowledgement").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	if err := t.Execute(&strings.Builder{}, AckData{TicketID: "T-500001", Subject: "s", CustomerName: "n", CustomerEmail: "e@example.com"}); err != nil {
		return nil, err
	}
	return t, nil
}

// AckWindow is the time over which AckConfig.MaxPerDay counts; older
// acknowledgements may be forgotten.
const AckWindow = 24 * time.Hour

// late reports whether mail that reached its mailbox at arrived was
// fetched, at now, more than a day after: it is filed, triaged and shown
// all the same, but nobody is mailed of it, neither its sender an
// acknowledgement nor the agents a notification. An acknowledgement tells
// a customer that the mail was received, and a notification tells an
// agent of new work; a day late, neither tells what the queue does not.
// And a mailbox connected for the first time holds every mail its team
// ever kept: each would otherwise answer a customer who wrote months ago
// (taking the hourly cap from those writing today) and mail its agents.
func late(arrived, now time.Time) bool {
	return !arrived.IsZero() && now.Sub(arrived) > lateAfter
}

// lateAfter is how long fetched mail may have waited in its mailbox and
// still be mailed of (late).
const lateAfter = 24 * time.Hour

// ackLimits are AckConfig's limits, for the store to count against.
func (d *Desk) ackLimits() store.AckLimits {
	return store.AckLimits{PerAddress: d.config.Ack.MaxPerDay, Window: AckWindow, PerHour: d.config.Ack.MaxPerHour}
}

// noReply matches the local parts that say nobody reads the mailbox, or
// that a machine sends from: no-reply, do-not-reply, mailer-daemon,
// postmaster, bounces, list owners and requests.
var noReply = regexp.MustCompile(`(?i)^(.*[-_.+])?(no-?reply|do-?not-?reply|mailer-?daemon|postmaster|bounces?|owner-.+|.+-(owner|request))([-_.+].*)?$`)

// acknowledgeTx mails the customer that the ticket was opened, in the
// caller's transaction, unless that would answer a machine or a
// no-reply address, or the address had AckConfig.MaxPerDay of them in
// the last 24 hours. The mail is a message of its own in the customer's
// thread, rendered now and sent by the email queue. Without a relay, or
// with data no mail can carry, the acknowledgement is dropped and the
// ticket stays: both are known before anything of it is written, and its
// rows wait for the transaction's next trip.
func (d *Desk) acknowledgeTx(ctx context.Context, tx *store.Tx, t *store.Ticket, c *store.Customer, root string, neutral bool) error {
	from, err := d.fromOf(ctx, t)
	if err != nil {
		return err
	}
	local, domain, _ := strings.Cut(strings.ToLower(c.Email), "@")
	for _, own := range []string{strings.ToLower(d.config.From.Address), strings.ToLower(from.Address)} {
		if noReply.MatchString(local) || strings.EqualFold(c.Email, own) || strings.HasSuffix(own, "@"+domain) {
			return nil // nobody to read it, or ourselves: a loop in one step
		}
	}
	// The message is written in this transaction, so its time is the ticket's.
	id := mail.NewMessageID(d.config.MailDomain)
	ack, err := d.composeAck(from, t, c, root, id, neutral)
	if err != nil {
		return nil // the mail cannot be made: the ticket stays, unacknowledged
	}
	var (
		claim     store.Batch
		claimed   bool
		messageID int64
		jobID     int64
	)
	claim.ClaimAcknowledgement(c.Email, t.ID, d.ackLimits(), &claimed)
	claim.NextMessageID(&messageID)
	claim.NextJobID(&jobID)
	if err := tx.Store().Send(ctx, &claim); err != nil || !claimed {
		return err
	}
	if err := d.jobs.QueueEmailAtCommit(tx, messageID, t.ID, jobID); errors.Is(err, ErrNoRelay) {
		return nil
	} else if err != nil {
		return err
	}
	d.keepRendered(tx, &store.InsertMessageParams{ID: messageID, TicketID: t.ID, Direction: vocab.DirectionAcknowledgement,
		Author: vocab.System, Body: ack.text, EmailMessageID: &id, AutoSubmitted: true}, jobID, ack.to, ack.out, ack.raw)
	return nil
}
