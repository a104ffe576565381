package desk

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// InboundMail is a mail that came in, as the listener (or a mailbox
// fetcher) parsed it.
type InboundMail struct {
	MessageID  string   // "<…>"; for mail without one, derived from a hash of its content
	HasOwnID   bool     // false when MessageID was derived
	InReplyTo  []string // "<…>" each
	References []string
	From       string // the sender's one From address (RFC 5322 §3.6.2), lower case; "" for none usable
	FromName   string
	// FromProblem says why a mail has no usable From.
	FromProblem string
	// AuthResults are its Authentication-Results fields, topmost first,
	// in runs of fields adjacent in the header (an MTA that writes its
	// results in several fields, as OpenDKIM and OpenDMARC do, writes
	// them as one run); Verdict is what its sender authentication said of
	// its From, and VerdictDetail how (senderauth).
	AuthResults   [][]string
	Verdict       vocab.Verdict
	VerdictDetail string
	Subject       string
	Date          time.Time
	Text          string // the readable text: text/plain, else the HTML turned into text
	Attachments   []*File
	Automatic     bool // an auto-reply or bulk mail: store it, answer nothing, triage nothing
	// NoAutoReply: a machine would answer a machine, or a list, or a
	// report (RFC 3834 §2): no acknowledgement goes back.
	NoAutoReply bool
	Report      *DeliveryReport
	// RawGzip is the mail as it came, gzip-compressed: what is kept of it.
	RawGzip *blob.Buffer
	// Source is the mailbox it was fetched from, nil for mail that came
	// to the listener.
	Source *MailSource
	// Recipients are the addresses its To, Cc, Delivered-To and
	// X-Original-To name, lower case: a fetched mail has no envelope.
	Recipients []string
}

// MailSource is where in an IMAP mailbox a mail was: the checkpoint moves
// past it in the transaction that files it.
type MailSource struct {
	Mailbox     string
	Address     string // the mailbox's support address
	UIDValidity int64
	UID         int64
	// Pending: the message is still to be moved (or flagged) after the
	// commit.
	Pending bool
	// Arrived is when the mailbox's server took the message, its
	// INTERNALDATE (RFC 9051 §2.3.3); zero when the server did not say.
	// Of mail that waited there more than a day, nobody is mailed (late).
	Arrived time.Time
}

// arrived is when a fetched mail reached its mailbox; zero for mail that
// came to the listener, which arrives as it is filed.
func (m *InboundMail) arrived() time.Time {
	if m.Source == nil {
		return time.Time{}
	}
	return m.Source.Arrived
}

// DeliveryReport is what a delivery status notification (RFC 3464) says.
type DeliveryReport struct {
	OriginalMessageID string            // the Message-ID of the mail it reports on
	Failed            map[string]string // recipient → status and diagnostic, for Action: failed
	Delayed           map[string]string // the same, for Action: delayed
}

// Filed is what became of one inbound mail.
type Filed struct {
	Kind      string // new_ticket, reply, follow_up, duplicate, bounce, ignored, agent_replied, agent_noted, …
	TicketID  string
	MessageID int64
	Matched   string // how it found its ticket: headers, plus_address, subject, reply_address; "" for a new ticket
}

// Errors of filing a mail that the same bytes would meet again: the
// listener refuses them for good instead of having the sender retry.
var (
	// ErrNoSender is a mail without a usable From address.
	ErrNoSender = errors.New("the message has no usable sender address")
	// ErrUnstorable is a mail whose content PostgreSQL refuses.
	ErrUnstorable = errors.New("the message's content cannot be stored")
)

// SenderError is ErrNoSender with what was wrong with the mail's From
// (InboundMessage.FromProblem), for the edge to tell the sender.
type SenderError struct{ Problem string }

func (e *SenderError) Error() string { return ErrNoSender.Error() + ": " + e.Problem }

func (e *SenderError) Unwrap() error { return ErrNoSender }

// AcceptsRecipient reports whether rcpt is at one of the support domains,
// or is postmaster without a domain.
func (d *Desk) AcceptsRecipient(rcpt string) bool {
	_, domain, ok := strings.Cut(strings.ToLower(rcpt), "@")
	if !ok {
		// RFC 5321 §4.5.1: a server MUST take "RCPT TO:<Postmaster>",
		// without a domain; its mail comes to the desk as any other.
		return strings.EqualFold(rcpt, "postmaster") && len(d.config.Domains) > 0
	}
	for _, dom := range d.config.Domains {
		if domain == dom {
			return true
		}
	}
	return false
}

// FileInbound stores a mail in one transaction. A mail already stored
// (same Message-ID, or the same content without one) changes nothing. A
// delivery report counts only where we asked for it: at the bounce
// address of one of our messages (VERP). An agent's answer to a
// notification becomes the agent's reply. Any other mail is its sender's:
// it joins the ticket it names (by its headers, then a plus-address, then
// a subject token) when the sender may write there (mayWrite), is held on
// that ticket when not, and opens a new ticket of its sender's (created
// if unknown) when it names none.
func (d *Desk) FileInbound(ctx context.Context, rcpts []string, m *InboundMail) (*Filed, error) {
	var out *Filed
	var err error
	for try := 0; ; try++ {
		err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
			out, err = d.fileTx(ctx, tx, rcpts, m)
			if err == nil && m.Source != nil {
				s := m.Source
				tx.Later(func(b *store.Batch) { b.AdvanceMailbox(s.Mailbox, s.UIDValidity, s.UID, s.Pending) })
			}
			return err
		})
		// A copy delivered at the same moment stored the same Message-ID
		// (or the same new customer) first: once more, and it is seen.
		if errors.Is(err, store.ErrConflict) && try == 0 {
			continue
		}
		if store.BadContent(err) {
			return nil, fmt.Errorf("%w: %w", ErrUnstorable, err)
		}
		return out, err
	}
}

func (d *Desk) fileTx(ctx context.Context, tx *store.Tx, rcpts []string, m *InboundMail) (*Filed, error) {
	st := tx.Store()
	// One trip: is it stored already, and which support address did it
	// come to (a row of its own gives its tickets a From and a team).
	var (
		exists  bool
		address *store.SupportAddress
		first   store.Batch
	)
	first.MessageIDExists(m.MessageID, &exists)
	if to := d.supportAddressIn(rcpts, m); to != "" {
		first.SupportAddressOf(to, &address)
	}
	if err := st.Send(ctx, &first); err != nil || exists {
		return &Filed{Kind: "duplicate"}, err
	}
	if out, handled, err := d.reportTx(ctx, tx, m, rcpts); handled || err != nil {
		return out, err
	}
	if out, handled, err := d.agentAnswerTx(ctx, tx, m, rcpts); handled || err != nil {
		return out, err
	}
	ticketID, how, err := d.named(ctx, st, m, rcpts)
	if err != nil {
		return nil, err
	}
	if ticketID != "" {
		if reason, err := d.mayWrite(ctx, st, ticketID, m); err != nil {
			return nil, err
		} else if reason != "" {
			return d.holdTx(ctx, tx, ticketID, how, m, reason)
		}
	} else if m.From == "" {
		return nil, &SenderError{Problem: m.FromProblem}
	}

	customer, err := st.CustomerByEmail(ctx, m.From)
	newCustomer := false
	if errors.Is(err, store.ErrNotFound) && ticketID == "" {
		customer, err = d.newCustomerTx(ctx, st, m.From, m.FromName)
		newCustomer = true
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	author := vocab.Email(m.From)
	if customer != nil {
		author = vocab.Customer(customer.ID)
	}

	if ticketID == "" {
		subject := m.Subject
		if subject == "" {
			subject = "(no subject)"
		}
		p := &OpenTicketParams{
			CustomerID: customer.ID, Subject: truncateRunes(subject, 200), Body: m.Text, Author: author, SupportAddress: address,
			EmailMessageID: m.MessageID, Attachments: m.Attachments, Automatic: m.Automatic, RawEmailGzip: m.RawGzip,
			NoAutoReply: m.NoAutoReply, Sender: m.From, Verdict: m.Verdict, VerdictDetail: m.VerdictDetail, Arrived: m.arrived(),
			// A stranger's acknowledgement carries nothing the stranger chose:
			// it would reflect a forged sender's words to anyone.
			AckNeutral: newCustomer,
		}
		if m.Verdict == vocab.VerdictFail {
			p.Held = "the sender's domain says it did not send this mail (" + m.VerdictDetail + ")"
		}
		ticket, _, err := d.OpenTicketTx(ctx, tx, p)
		if err != nil {
			return nil, err
		}
		if p.Held != "" {
			d.log.WarnContext(ctx, "inbound mail held on a ticket of its own", "ticket_id", ticket.ID, "from", m.From, "reason", p.Held)
			return &Filed{Kind: "held", TicketID: ticket.ID}, nil
		}
		return &Filed{Kind: "new_ticket", TicketID: ticket.ID}, nil
	}
	msg, err := d.AddCustomerMessageTx(ctx, tx, &CustomerMessageParams{
		TicketID: ticketID, Author: author, Body: m.Text, EmailMessageID: m.MessageID,
		Attachments: m.Attachments, Automatic: m.Automatic, RawEmailGzip: m.RawGzip, NoAutoReply: m.NoAutoReply,
		Sender: m.From, Verdict: m.Verdict, VerdictDetail: m.VerdictDetail, Arrived: m.arrived(),
	})
	if err != nil {
		return nil, err
	}
	if msg.FollowUp {
		// The ticket was closed: the message opened a follow-up ticket.
		return &Filed{Kind: "follow_up", TicketID: msg.TicketID, MessageID: msg.Message.ID, Matched: how}, nil
	}
	return &Filed{Kind: "reply", TicketID: ticketID, MessageID: msg.Message.ID, Matched: how}, nil
}

// mayWrite is why a mail's sender may not write into the ticket it names,
// "" if it may: the one place that decides it. A Message-ID in its headers
// proves nothing (the customer's own ids are in every copy she sent, ours
// in every Cc'd copy and every webhook), nor does a ticket number. The
// sender must be a participant (the customer, an address the ticket's mail
// went to, one an agent let in, an agent), and, where sender
// authentication says so, really the sender (a fail verdict is not).
func (d *Desk) mayWrite(ctx context.Context, st *store.Store, ticketID string, m *InboundMail) (string, error) {
	if m.From == "" {
		return "no usable From: " + m.FromProblem, nil
	}
	ok, err := st.IsTicketParticipant(ctx, ticketID, m.From)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return m.From + " is not on this ticket", nil
	case m.Verdict == vocab.VerdictFail:
		return "the sender's domain says " + m.From + " did not send this mail (" + m.VerdictDetail + ")", nil
	}
	return "", nil
}

// holdTx keeps a mail on the ticket it named, for agents only: never
// shown to the customer, never quoted, never in a prompt; it reopens
// nothing, is triaged and acknowledged never. An agent may accept it
// (AcceptHeld) or make it a ticket of its own (SplitHeld).
func (d *Desk) holdTx(ctx context.Context, tx *store.Tx, ticketID, how string, m *InboundMail, reason string) (*Filed, error) {
	author := vocab.Email(m.From)
	if m.From == "" {
		author = vocab.Email("unknown")
	}
	msg, err := tx.Store().InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticketID, Direction: vocab.DirectionHeld, Author: author,
		Body: m.Text, EmailMessageID: &m.MessageID, Attachments: d.keepable(m.Attachments), AutoSubmitted: m.Automatic,
		RawEmailGzip: m.RawGzip, Sender: m.From, AuthVerdict: m.Verdict, AuthDetail: m.VerdictDetail, HeldReason: reason,
		Subject: truncateRunes(m.Subject, 200)})
	if err != nil {
		return nil, err
	}
	event(tx, ticketID, vocab.System, "held", "", reason)
	d.log.WarnContext(ctx, "inbound mail held: its sender may not write into the ticket it names", "ticket_id", ticketID,
		"matched", how, "from", m.From, "reason", reason)
	return &Filed{Kind: "held", TicketID: ticketID, MessageID: msg.ID, Matched: how}, nil
}

var (
	plusTicket    = regexp.MustCompile(`(?i)^[^+@]+\+(t-[0-9]+)@`)
	subjectTicket = regexp.MustCompile(`\[#(T-[0-9]+)\]`)
)

// named finds the ticket a mail names, and how: by a Message-ID we know
// in its headers, else by a plus-address or a subject token of a ticket
// its sender may write into, else by the first of those. "" when it
// names none that exists.
func (d *Desk) named(ctx context.Context, st *store.Store, m *InboundMail, rcpts []string) (string, string, error) {
	var first, firstHow string
	if ids := append(append([]string{}, m.InReplyTo...), m.References...); len(ids) > 0 {
		ticketID, err := st.TicketOfMessageIDs(ctx, ids)
		switch {
		case err == nil:
			first, firstHow = ticketID, "headers"
		case !errors.Is(err, store.ErrNotFound):
			return "", "", err
		}
	}
	if first != "" && m.From != "" {
		if reason, err := d.mayWrite(ctx, st, first, m); err != nil || reason == "" {
			return first, firstHow, err
		}
	}
	for _, c := range d.Candidates(m, rcpts) {
		t, err := st.GetTicket(ctx, c.TicketID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return "", "", err
		}
		c.TicketID = mergedTarget(t) // a merged ticket's number names the ticket it went into
		if first == "" {
			first, firstHow = c.TicketID, c.How
		}
		if m.From == "" {
			continue
		}
		if reason, err := d.mayWrite(ctx, st, c.TicketID, m); err != nil || reason == "" {
			return c.TicketID, c.How, err
		}
	}
	return first, firstHow, nil
}

// supportAddressIn is the support address a mail came to: its mailbox's,
// else the first recipient's without its +detail; "" for none.
func (d *Desk) supportAddressIn(rcpts []string, m *InboundMail) string {
	if m.Source != nil {
		return m.Source.Address
	}
	for _, r := range rcpts {
		if a := baseAddress(r); a != "" {
			return a
		}
	}
	return ""
}

// Candidate is a ticket a mail names by number, and where.
type Candidate struct {
	TicketID string // T-500001
	How      string // plus_address or subject
}

// Candidates lists the tickets a mail names: plus-addresses at our
// domains first, then a [#T-…] token in the subject. They are claims only;
// the sender is checked against each.
func (d *Desk) Candidates(m *InboundMail, rcpts []string) []Candidate {
	var out []Candidate
	for _, r := range rcpts {
		if p := plusTicket.FindStringSubmatch(r); p != nil && (d.AcceptsRecipient(r) || (m.Source != nil && baseAddress(r) == m.Source.Address)) {
			out = append(out, Candidate{TicketID: strings.ToUpper(p[1]), How: "plus_address"})
		}
	}
	if s := subjectTicket.FindStringSubmatch(m.Subject); s != nil {
		out = append(out, Candidate{TicketID: s[1], How: "subject"})
	}
	return out
}

// reportTx handles delivery reports and whatever comes to a bounce
// address. A report counts only when it arrives at the verifying bounce
// address of one of our messages, the envelope sender that message went
// out with (VERP): then its failed recipients are marked and the ticket's
// agents hear of it (a hard failure suppresses the address). A report
// anywhere else is a stranger's claim: held on the ticket of the message
// it names, if any, and nothing more. Other mail to a bounce address (an
// auto-reply sent to the envelope sender) is dropped.
func (d *Desk) reportTx(ctx context.Context, tx *store.Tx, m *InboundMail, rcpts []string) (*Filed, bool, error) {
	var (
		messageID int64
		verified  bool
		toBounce  bool
	)
	if replies := d.config.ReplyAddresses; replies != nil {
		for _, r := range rcpts {
			id, ok, err := replies.ParseBounce(r)
			if !ok {
				continue
			}
			toBounce = true
			if err == nil {
				messageID, verified = id, true
				break
			}
		}
	}
	if m.Report == nil && !toBounce {
		return nil, false, nil
	}
	st := tx.Store()
	if m.Report == nil {
		d.log.InfoContext(ctx, "mail to a bounce address that is no delivery report: dropped", "from", m.From)
		return &Filed{Kind: "ignored"}, true, nil
	}
	if !verified {
		orig := m.Report.OriginalMessageID
		if orig == "" && len(m.InReplyTo) > 0 {
			orig = m.InReplyTo[0]
		}
		ticketID, direction, err := st.TicketOfEmail(ctx, orig)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !direction.ToCustomer()) {
			d.log.InfoContext(ctx, "delivery report not at a bounce address, about no reply of ours: dropped", "original", orig)
			return &Filed{Kind: "ignored"}, true, nil
		}
		if err != nil {
			return nil, true, err
		}
		out, err := d.holdTx(ctx, tx, ticketID, "report", m, "a delivery report that did not come to the bounce address of the message it names")
		return out, true, err
	}
	msg, err := st.GetMessage(ctx, messageID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !bounces(msg.Direction)) {
		d.log.InfoContext(ctx, "delivery report about no mail of ours to a customer or an agent", "message_id", messageID)
		return &Filed{Kind: "ignored"}, true, nil
	}
	if err != nil {
		return nil, true, err
	}
	marked := 0
	// The recipients in the order of their addresses, not the map's: a
	// report on several notes them in one order.
	for _, addr := range slices.Sorted(maps.Keys(m.Report.Failed)) {
		status := m.Report.Failed[addr]
		found, err := st.RecordBounceOf(ctx, messageID, addr, status)
		if err != nil {
			return nil, true, err
		}
		if !found {
			continue
		}
		marked++
		if err := d.bouncedTx(ctx, tx, &Bounce{TicketID: msg.TicketID, Address: addr, Status: status, Direction: msg.Direction}); err != nil {
			return nil, true, err
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(m.Report.Delayed)) {
		status := m.Report.Delayed[addr]
		// As with a failure: a report that reached the bounce address
		// speaks only of the recipients the mail went to, or its sender
		// (whoever received the mail) could put any address in a note.
		found, err := st.IsRecipientOf(ctx, messageID, addr)
		if err != nil {
			return nil, true, err
		}
		if !found {
			continue
		}
		marked++
		if err := d.bouncedTx(ctx, tx, &Bounce{TicketID: msg.TicketID, Address: addr, Status: status, Delayed: true, Direction: msg.Direction}); err != nil {
			return nil, true, err
		}
	}
	if marked == 0 {
		d.log.InfoContext(ctx, "delivery report about no recipient of ours", "message_id", messageID)
		return &Filed{Kind: "ignored"}, true, nil
	}
	return &Filed{Kind: "bounce", TicketID: msg.TicketID}, true, nil
}

// agentAnswerTx handles mail to the signed reply address of a
// notification: an agent's answer. It is the agent's only when the
// address verifies and has not expired, the notification it names went to
// that agent on that ticket, the From is that agent's address, its sender
// authentication does not say otherwise, and the agent is active;
// otherwise the mail goes through the customer rules (where it is held:
// no stranger is on the ticket), and the reason is logged, so that a
// forged answer never reaches a customer. An automatic answer (out of
// office) to a notification is dropped: stored as nothing, answered with
// nothing.
func (d *Desk) agentAnswerTx(ctx context.Context, tx *store.Tx, m *InboundMail, rcpts []string) (*Filed, bool, error) {
	replies := d.config.ReplyAddresses
	if replies == nil {
		return nil, false, nil
	}
	for _, r := range rcpts {
		reply, signed, err := replies.Parse(r, time.Now())
		if !signed {
			continue
		}
		if m.Automatic {
			d.log.InfoContext(ctx, "automatic answer to a notification dropped", "ticket_id", reply.TicketID, "from", m.From)
			return &Filed{Kind: "ignored", TicketID: reply.TicketID}, true, nil
		}
		refuse := func(reason string) (*Filed, bool, error) {
			d.log.WarnContext(ctx, "mail to an agent's reply address is not that agent's: handled as a customer's",
				"reason", reason, "ticket_id", reply.TicketID, "notification", reply.Notification, "from", m.From)
			return nil, false, nil
		}
		if err != nil {
			return refuse(err.Error())
		}
		var (
			note  *store.Message
			email *store.OutboundEmail
			agent *store.Agent
			reads store.Batch
		)
		reads.GetMessageOptional(reply.Notification, &note)
		reads.GetOutboundEmailOptional(reply.Notification, &email)
		if err := tx.Store().Send(ctx, &reads); err != nil {
			return nil, false, err
		}
		if note == nil || email == nil || note.Direction != vocab.DirectionNotification || len(email.Recipients) == 0 {
			return refuse("no notification of this ticket has that number")
		}
		if note.TicketID != reply.TicketID {
			// The notification moved with a merge: the address still
			// names the ticket it was sent about.
			t, err := tx.Store().GetTicket(ctx, reply.TicketID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, false, err
			}
			if t == nil || t.MergedInto == nil || *t.MergedInto != note.TicketID {
				return refuse("no notification of this ticket has that number")
			}
			reply.TicketID = note.TicketID
		}
		reads = store.Batch{}
		reads.AgentByEmail(email.Recipients[0].Address, &agent)
		if err := tx.Store().Send(ctx, &reads); err != nil {
			return nil, false, err
		}
		switch {
		case agent == nil:
			return refuse("the notification went to no agent")
		case !agent.Active():
			return refuse("the agent is disabled")
		case !strings.EqualFold(agent.Email, m.From):
			return refuse("the sender is not the agent")
		case m.Verdict == vocab.VerdictFail:
			return refuse("the agent's domain says the agent did not send it (" + m.VerdictDetail + ")")
		}
		out, err := d.agentReplyTx(ctx, tx, &AgentMail{TicketID: reply.TicketID, Agent: agent, Text: mail.NewText(m.Text),
			EmailMessageID: m.MessageID, RawGzip: m.RawGzip})
		if err != nil {
			return nil, true, err
		}
		return &Filed{Kind: "agent_" + out.Kind, TicketID: reply.TicketID, MessageID: out.MessageID, Matched: "reply_address"}, true, nil
	}
	return nil, false, nil
}

// Reparse reads an inbound message again from the raw mail kept with it
// (by parse, the listener's parser, after a fix of it) and replaces its
// text and attachments, in one transaction.
func (d *Desk) Reparse(ctx context.Context, messageID int64, m *InboundMail) error {
	return store.Run(ctx, d.pool, func(tx *store.Tx) error {
		return tx.Store().SetParsedContent(ctx, messageID, m.Text, d.keepable(m.Attachments))
	})
}

// truncateRunes keeps the first n characters of s.
func truncateRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
