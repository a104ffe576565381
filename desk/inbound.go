package desk

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"helpdesk/mail"
	"helpdesk/store"
	"helpdesk/vocab"
)

// InboundMail is a mail that came in, as the listener (or a mailbox
// fetcher) parsed it.
type InboundMail struct {
	MessageID   string   // "<…>"; for mail without one, derived from a hash of its content
	HasOwnID    bool     // false when MessageID was derived
	InReplyTo   []string // "<…>" each
	References  []string
	From        string // the sender's address, lower case
	FromName    string
	Subject     string
	Date        time.Time
	Text        string // the readable text: text/plain, else the HTML turned into text
	Attachments []*File
	Automatic   bool // an auto-reply or bulk mail: store it, answer nothing, triage nothing
	// NoAutoReply: a machine would answer a machine, or a list, or a
	// report (RFC 3834 §2): no acknowledgement goes back.
	NoAutoReply bool
	Report      *DeliveryReport
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
	ErrNoSender = errors.New("the message has no sender address")
	// ErrUnstorable is a mail whose content PostgreSQL refuses.
	ErrUnstorable = errors.New("the message's content cannot be stored")
)

// AcceptsRecipient reports whether rcpt is at one of the support domains.
func (d *Desk) AcceptsRecipient(rcpt string) bool {
	_, domain, ok := strings.Cut(strings.ToLower(rcpt), "@")
	if !ok {
		return false
	}
	for _, dom := range d.config.Domains {
		if domain == dom {
			return true
		}
	}
	return false
}

// FileInbound stores a mail in one transaction: under its ticket (found by
// its headers, then a plus-address, then a subject token), or as a new
// ticket of the customer its From names (created if unknown). A mail
// already stored (same Message-ID, or the same content without one)
// changes nothing. A delivery report about one of our messages marks its
// recipient failed instead; an agent's answer to a notification becomes
// the agent's reply.
func (d *Desk) FileInbound(ctx context.Context, rcpts []string, m *InboundMail, raw []byte) (*Filed, error) {
	var out *Filed
	var err error
	for try := 0; ; try++ {
		err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
			out, err = d.fileTx(ctx, tx, rcpts, m, raw)
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

func (d *Desk) fileTx(ctx context.Context, tx *store.Tx, rcpts []string, m *InboundMail, raw []byte) (*Filed, error) {
	st := tx.Store()
	if exists, err := st.MessageIDExists(ctx, m.MessageID); err != nil || exists {
		return &Filed{Kind: "duplicate"}, err
	}
	if m.Report != nil {
		return d.bounceReportTx(ctx, tx, m)
	}
	if out, handled, err := d.agentAnswerTx(ctx, tx, m, rcpts, raw); handled || err != nil {
		return out, err
	}
	if m.From == "" {
		return nil, ErrNoSender
	}

	ticketID, how, err := d.match(ctx, st, m, rcpts)
	if err != nil {
		return nil, err
	}
	customer, err := st.CustomerByEmail(ctx, m.From)
	if errors.Is(err, store.ErrNotFound) && ticketID == "" {
		customer, err = d.newCustomerTx(ctx, st, m.From, m.FromName)
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
		ticket, _, err := d.OpenTicketTx(ctx, tx, &OpenTicketParams{
			CustomerID: customer.ID, Subject: truncateRunes(subject, 200), Body: m.Text, Author: author,
			EmailMessageID: m.MessageID, Attachments: m.Attachments, Automatic: m.Automatic, RawEmail: raw,
			NoAutoReply: m.NoAutoReply,
		})
		if err != nil {
			return nil, err
		}
		return &Filed{Kind: "new_ticket", TicketID: ticket.ID}, nil
	}
	msg, err := d.AddCustomerMessageTx(ctx, tx, &CustomerMessageParams{
		TicketID: ticketID, Author: author, Body: m.Text, EmailMessageID: m.MessageID,
		Attachments: m.Attachments, Automatic: m.Automatic, RawEmail: raw, NoAutoReply: m.NoAutoReply,
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

var (
	plusTicket    = regexp.MustCompile(`(?i)^[^+@]+\+(t-[0-9]+)@`)
	subjectTicket = regexp.MustCompile(`\[#(T-[0-9]+)\]`)
)

// match finds the mail's ticket. Headers that cite a Message-ID we know
// are proof enough: those ids are random. A ticket number is not: anyone can
// write one, so a plus-address or subject token counts only when the sender
// is the ticket's customer or was a recipient on it.
func (d *Desk) match(ctx context.Context, st *store.Store, m *InboundMail, rcpts []string) (string, string, error) {
	if ids := append(append([]string{}, m.InReplyTo...), m.References...); len(ids) > 0 {
		ticketID, err := st.TicketOfMessageIDs(ctx, ids)
		if err == nil {
			return ticketID, "headers", nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", "", err
		}
	}
	for _, c := range d.Candidates(m, rcpts) {
		ok, err := st.IsTicketParticipant(ctx, c.TicketID, m.From)
		if err != nil {
			return "", "", err
		}
		if ok {
			return c.TicketID, c.How, nil
		}
		d.log.WarnContext(ctx, "inbound mail names a ticket its sender is not on; opening a new ticket",
			"ticket_id", c.TicketID, "from", m.From)
	}
	return "", "", nil
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
		if p := plusTicket.FindStringSubmatch(r); p != nil && d.AcceptsRecipient(r) {
			out = append(out, Candidate{TicketID: strings.ToUpper(p[1]), How: "plus_address"})
		}
	}
	if s := subjectTicket.FindStringSubmatch(m.Subject); s != nil {
		out = append(out, Candidate{TicketID: s[1], How: "subject"})
	}
	return out
}

// bounceReportTx applies a delivery report to the outbound message it
// names: the recipient is marked failed, and the ticket's agents hear of
// it. Delayed reports are noted, nothing more.
func (d *Desk) bounceReportTx(ctx context.Context, tx *store.Tx, m *InboundMail) (*Filed, error) {
	st := tx.Store()
	orig := m.Report.OriginalMessageID
	if orig == "" && len(m.InReplyTo) > 0 {
		orig = m.InReplyTo[0]
	}
	ticketID, direction, err := st.TicketOfEmail(ctx, orig)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !direction.ToCustomer()) {
		// Backscatter, or a report on mail we never sent to a customer: nothing to file.
		d.log.InfoContext(ctx, "delivery report about no reply of ours", "original", orig)
		return &Filed{Kind: "ignored"}, nil
	}
	if err != nil {
		return nil, err
	}
	marked := 0
	for addr, status := range m.Report.Failed {
		found, err := st.RecordBounce(ctx, orig, addr, status)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		marked++
		if err := d.bounceTx(ctx, tx, &Bounce{TicketID: ticketID, Address: addr, Status: status}); err != nil {
			return nil, err
		}
	}
	for addr, status := range m.Report.Delayed {
		marked++
		if err := d.bounceTx(ctx, tx, &Bounce{TicketID: ticketID, Address: addr, Status: status, Delayed: true}); err != nil {
			return nil, err
		}
	}
	if marked == 0 {
		d.log.InfoContext(ctx, "delivery report about no recipient of ours", "original", orig)
		return &Filed{Kind: "ignored"}, nil
	}
	return &Filed{Kind: "bounce", TicketID: ticketID}, nil
}

// agentAnswerTx handles mail to a signed reply address: an agent's answer
// to a notification. It is the agent's only when the MAC verifies, the From
// is that agent's address and the agent is active; otherwise the mail is
// handled by the customer rules, and the reason is logged, so that a forged
// answer never reaches a customer. An automatic answer (out of office) to a
// notification is dropped: stored as nothing, answered with nothing.
func (d *Desk) agentAnswerTx(ctx context.Context, tx *store.Tx, m *InboundMail, rcpts []string, raw []byte) (*Filed, bool, error) {
	replies := d.config.ReplyAddresses
	if replies == nil {
		return nil, false, nil
	}
	for _, r := range rcpts {
		ticketID, name, signed, err := replies.Parse(r)
		if !signed {
			continue
		}
		if m.Automatic {
			d.log.InfoContext(ctx, "automatic answer to a notification dropped", "ticket_id", ticketID, "from", m.From)
			return &Filed{Kind: "ignored", TicketID: ticketID}, true, nil
		}
		refuse := func(reason string) (*Filed, bool, error) {
			d.log.WarnContext(ctx, "mail to an agent's reply address is not that agent's: handled as a customer's",
				"reason", reason, "ticket_id", ticketID, "agent", name, "from", m.From)
			return nil, false, nil
		}
		if err != nil {
			return refuse("the signature does not verify")
		}
		agent, err := tx.Store().GetAgent(ctx, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return refuse("no such agent")
		case err != nil:
			return nil, false, err
		case !agent.Active():
			return refuse("the agent is disabled")
		case !strings.EqualFold(agent.Email, m.From):
			return refuse("the sender is not the agent")
		}
		out, err := d.agentReplyTx(ctx, tx, &AgentMail{TicketID: ticketID, Agent: agent, Text: mail.NewText(m.Text),
			EmailMessageID: m.MessageID, Raw: raw})
		if err != nil {
			return nil, true, err
		}
		return &Filed{Kind: "agent_" + out.Kind, TicketID: ticketID, MessageID: out.MessageID, Matched: "reply_address"}, true, nil
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
