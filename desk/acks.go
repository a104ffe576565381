package desk

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"

	"helpdesk/mail"
	"helpdesk/store"
)

// AckConfig is how new tickets are acknowledged.
type AckConfig struct {
	// Template writes the text; it is given an AckData. Nil: DefaultAckTemplate.
	Template *template.Template
	// MaxPerDay bounds the acknowledgements to one address in 24 hours, so
	// that two automatic responders that strip each other's marks still
	// stop. Default 3.
	MaxPerDay int
}

// AckData is what an acknowledgement template may use.
type AckData struct {
	TicketID      string
	Subject       string
	CustomerName  string
	CustomerEmail string
}

// DefaultAckTemplate is the acknowledgement when the configuration names none.
const DefaultAckTemplate = `Hello {{.CustomerName}},

we have received your message and opened ticket {{.TicketID}} ("{{.Subject}}").
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
// ticket stays: both are known before anything of it is written.
// Two round trips and River's insert: the claim with the message's
// number, then the message, its delivery and its bytes.
func (d *Desk) acknowledgeTx(ctx context.Context, tx pgx.Tx, t *store.Ticket, c *store.Customer, root string) error {
	local, domain, _ := strings.Cut(strings.ToLower(c.Email), "@")
	own := strings.ToLower(d.config.From.Address)
	if noReply.MatchString(local) || strings.EqualFold(c.Email, own) || strings.HasSuffix(own, "@"+domain) {
		return nil // nobody to read it, or ourselves: a loop in one step
	}
	to, err := mail.ParseAddress(c.Email)
	if err != nil {
		return nil // no mail can go there; the ticket matters more than its acknowledgement
	}
	to.Name = c.Name
	var text strings.Builder
	if err := d.config.Ack.Template.Execute(&text, AckData{TicketID: t.ID, Subject: t.Subject, CustomerName: c.Name, CustomerEmail: c.Email}); err != nil {
		return nil // tried at start with the same fields: never here
	}
	st := store.New(tx)
	var (
		claim     store.Batch
		claimed   bool
		messageID int64
	)
	claim.ClaimAcknowledgement(c.Email, t.ID, d.config.Ack.MaxPerDay, AckWindow, &claimed)
	claim.NextMessageID(&messageID)
	if err := st.Send(ctx, &claim); err != nil || !claimed {
		return err
	}
	// The message is written in this transaction, so its time is the ticket's.
	id := mail.NewMessageID(d.config.MailDomain)
	out := &mail.Outgoing{From: d.config.From, To: []*mail.Address{to}, Subject: t.Subject, TicketID: t.ID, Date: t.CreatedAt,
		MessageID: id, InReplyTo: root, References: []string{root}, ThreadRoot: root, ThreadStart: t.CreatedAt,
		Body: text.String(), AutoReply: true, ReplyTo: d.plusAddress(t.ID)}
	raw, err := out.Render()
	if err != nil {
		return nil // the mail cannot be made: the ticket stays, unacknowledged
	}
	jobID, err := d.jobs.EnqueueEmailTx(ctx, tx, messageID, t.ID)
	if errors.Is(err, ErrNoRelay) {
		return nil
	} else if err != nil {
		return err
	}
	var (
		write  store.Batch
		msg    store.Message
		stored bool
	)
	write.InsertMessage(&store.InsertMessageParams{ID: messageID, TicketID: t.ID, Direction: store.DirectionAcknowledgement,
		Author: ActorSystem, Body: text.String(), EmailMessageID: &id, AutoSubmitted: true}, &msg)
	write.InsertOutboundEmail(&store.InsertOutboundEmailParams{MessageID: messageID, FromAddress: d.config.From.String(),
		Recipients: []store.Recipient{{Address: to.Address, Name: to.Name, Kind: "to"}}, JobID: &jobID})
	write.SaveRendered(messageID, out.InReplyTo, out.References, raw, &stored)
	return st.Send(ctx, &write)
}

// queueRenderedTx renders a mail the service writes (not an agent's
// reply, which the email job renders) and stores its delivery with the
// bytes, before any send.
func (d *Desk) queueRenderedTx(ctx context.Context, st *store.Store, messageID int64, out *mail.Outgoing, to store.Recipient) error {
	raw, err := out.Render()
	if err != nil {
		return err
	}
	if err := st.InsertOutboundEmail(ctx, &store.InsertOutboundEmailParams{MessageID: messageID, FromAddress: d.config.From.String(),
		Recipients: []store.Recipient{to}}); err != nil {
		return err
	}
	_, err = st.SaveRendered(ctx, messageID, out.InReplyTo, out.References, raw)
	return err
}

// plusAddress is the support address with the ticket in it, where a
// customer's answer finds its ticket even when a client drops
// In-Reply-To (the plus address is matched on the way in).
func (d *Desk) plusAddress(ticketID string) *mail.Address {
	local, domain, ok := strings.Cut(d.config.From.Address, "@")
	if !ok {
		return nil
	}
	return &mail.Address{Name: d.config.From.Name, Address: local + "+" + ticketID + "@" + domain}
}
