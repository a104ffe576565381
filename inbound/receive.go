package inbound

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/desk"
	"helpdesk/mail"
	"helpdesk/metrics"
	"helpdesk/store"
)

// Receiver files inbound mail under tickets.
type Receiver struct {
	pool    *pgxpool.Pool
	desk    *desk.Desk
	domains []string // the support domains, lower case
	logger  *slog.Logger
	replies *mail.ReplyAddresses // nil: no agent answers by mail
}

// SetReplyAddresses lets agents answer notifications by mail: mail to a
// signed address that verifies, from that agent, is the agent's answer.
func (rc *Receiver) SetReplyAddresses(r *mail.ReplyAddresses) { rc.replies = r }

// NewReceiver returns a receiver for mail to the given support domains.
func NewReceiver(pool *pgxpool.Pool, d *desk.Desk, domains []string, logger *slog.Logger) *Receiver {
	lower := make([]string, len(domains))
	for i, d := range domains {
		lower[i] = strings.ToLower(d)
	}
	return &Receiver{pool: pool, desk: d, domains: lower, logger: logger}
}

// Outcome is what became of one received message.
type Outcome struct {
	Kind      string // "new_ticket", "reply", "duplicate", "bounce", "ignored"
	TicketID  string
	MessageID int64
	Matched   string // how it found its ticket: "headers", "plus_address", "subject", or "" for a new ticket
}

// ErrNoSender is a message without a usable From address.
var ErrNoSender = errors.New("the message has no sender address")

// AcceptsRecipient reports whether rcpt is at one of the support domains.
func (rc *Receiver) AcceptsRecipient(rcpt string) bool {
	_, domain, ok := strings.Cut(strings.ToLower(rcpt), "@")
	if !ok {
		return false
	}
	for _, d := range rc.domains {
		if domain == d {
			return true
		}
	}
	return false
}

// Receive parses raw and stores it in one transaction: under its ticket
// (found by its headers, then a plus-address, then a subject token), or as
// a new ticket. A message already stored (same Message-ID, or the same
// content without one) changes nothing. A delivery report about one of our
// messages marks its recipient failed instead.
func (rc *Receiver) Receive(ctx context.Context, rcpts []string, raw []byte) (*Outcome, error) {
	msg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	var out *Outcome
	for try := 0; ; try++ {
		err = pgx.BeginFunc(ctx, rc.pool, func(tx pgx.Tx) error {
			out, err = rc.file(ctx, tx, msg, rcpts, raw)
			return err
		})
		// A copy delivered at the same moment stored the same Message-ID
		// (or the same new customer) first: once more, and it is seen.
		if !errors.Is(err, store.ErrConflict) || try == 1 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	metrics.InboundMessages.WithLabelValues(out.Kind).Inc()
	rc.logger.InfoContext(ctx, "inbound mail", slog.String("outcome", out.Kind), slog.String("ticket_id", out.TicketID),
		slog.String("matched", out.Matched), slog.String("message_id", msg.MessageID), slog.Bool("automatic", msg.Automatic))
	return out, nil
}

func (rc *Receiver) file(ctx context.Context, tx pgx.Tx, msg *Message, rcpts []string, raw []byte) (*Outcome, error) {
	st := store.New(tx)
	if exists, err := st.MessageIDExists(ctx, msg.MessageID); err != nil || exists {
		return &Outcome{Kind: "duplicate"}, err
	}
	if msg.Report != nil {
		return rc.bounce(ctx, tx, st, msg)
	}
	if out, handled, err := rc.agentAnswer(ctx, tx, msg, rcpts, raw); handled || err != nil {
		return out, err
	}
	if msg.From == "" {
		return nil, ErrNoSender
	}

	ticketID, how, err := rc.match(ctx, st, msg, rcpts)
	if err != nil {
		return nil, err
	}
	customer, err := st.CustomerByEmail(ctx, msg.From)
	if errors.Is(err, store.ErrNotFound) && ticketID == "" {
		name := msg.FromName
		if name == "" {
			name, _, _ = strings.Cut(msg.From, "@")
		}
		customer, err = st.InsertCustomerByEmail(ctx, msg.From, name)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	author := "email:" + msg.From
	if customer != nil {
		author = "customer:" + customer.ID
	}

	if ticketID == "" {
		subject := msg.Subject
		if subject == "" {
			subject = "(no subject)"
		}
		ticket, _, err := rc.desk.OpenTicketTx(ctx, tx, &desk.OpenTicketParams{
			CustomerID: customer.ID, Subject: truncateRunes(subject, 200), Body: msg.Text, Author: author,
			EmailMessageID: msg.MessageID, Attachments: msg.Files(), Automatic: msg.Automatic, RawEmail: raw,
			NoAutoReply: msg.NoAutoReply,
		})
		if err != nil {
			return nil, err
		}
		return &Outcome{Kind: "new_ticket", TicketID: ticket.ID}, nil
	}
	m, err := rc.desk.AddCustomerMessageTx(ctx, tx, &desk.CustomerMessageParams{
		TicketID: ticketID, Author: author, Body: msg.Text, EmailMessageID: msg.MessageID,
		Attachments: msg.Files(), Automatic: msg.Automatic, RawEmail: raw, NoAutoReply: msg.NoAutoReply,
	})
	if err != nil {
		return nil, err
	}
	if m.FollowUp {
		// The ticket was closed: the message opened a follow-up ticket.
		return &Outcome{Kind: "follow_up", TicketID: m.TicketID, MessageID: m.Message.ID, Matched: how}, nil
	}
	return &Outcome{Kind: "reply", TicketID: ticketID, MessageID: m.Message.ID, Matched: how}, nil
}

var (
	plusTicket    = regexp.MustCompile(`(?i)^[^+@]+\+(t-[0-9]+)@`)
	subjectTicket = regexp.MustCompile(`\[#(T-[0-9]+)\]`)
)

// match finds the message's ticket. Headers that cite a Message-ID we know
// are proof enough: those ids are random. A ticket number is not: anyone can
// write one, so a plus-address or subject token counts only when the sender
// is the ticket's customer or was a recipient on it.
func (rc *Receiver) match(ctx context.Context, st *store.Store, msg *Message, rcpts []string) (string, string, error) {
	if ids := append(append([]string{}, msg.InReplyTo...), msg.References...); len(ids) > 0 {
		ticketID, err := st.TicketOfMessageIDs(ctx, ids)
		if err == nil {
			return ticketID, "headers", nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", "", err
		}
	}
	for _, c := range rc.Candidates(msg, rcpts) {
		ok, err := st.IsTicketParticipant(ctx, c.TicketID, msg.From)
		if err != nil {
			return "", "", err
		}
		if ok {
			return c.TicketID, c.How, nil
		}
		rc.logger.WarnContext(ctx, "inbound mail names a ticket its sender is not on; opening a new ticket",
			slog.String("ticket_id", c.TicketID), slog.String("from", msg.From))
	}
	return "", "", nil
}

// Candidate is a ticket a message names by number, and where.
type Candidate struct {
	TicketID string // T-500001
	How      string // plus_address or subject
}

// Candidates lists the tickets a message names: plus-addresses at our
// domains first, then a [#T-…] token in the subject. They are claims only;
// match checks the sender against each.
func (rc *Receiver) Candidates(msg *Message, rcpts []string) []Candidate {
	var out []Candidate
	for _, r := range rcpts {
		if m := plusTicket.FindStringSubmatch(r); m != nil && rc.AcceptsRecipient(r) {
			out = append(out, Candidate{TicketID: strings.ToUpper(m[1]), How: "plus_address"})
		}
	}
	if m := subjectTicket.FindStringSubmatch(msg.Subject); m != nil {
		out = append(out, Candidate{TicketID: m[1], How: "subject"})
	}
	return out
}

// bounce applies a delivery report to the outbound message it names: the
// recipient is marked failed, and the ticket's agents hear of it
// (desk.BounceTx). Delayed reports are noted, nothing more.
func (rc *Receiver) bounce(ctx context.Context, tx pgx.Tx, st *store.Store, msg *Message) (*Outcome, error) {
	orig := msg.Report.OriginalMessageID
	if orig == "" && len(msg.InReplyTo) > 0 {
		orig = msg.InReplyTo[0]
	}
	ticketID, direction, err := st.TicketOfEmail(ctx, orig)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !store.ToCustomer(direction)) {
		// Backscatter, or a report on mail we never sent to a customer: nothing to file.
		rc.logger.InfoContext(ctx, "delivery report about no reply of ours", slog.String("original", orig))
		return &Outcome{Kind: "ignored"}, nil
	}
	if err != nil {
		return nil, err
	}
	marked := 0
	for addr, status := range msg.Report.Failed {
		found, err := st.RecordBounce(ctx, orig, addr, status)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		marked++
		if err := rc.desk.BounceTx(ctx, tx, &desk.Bounce{TicketID: ticketID, Address: addr, Status: status}); err != nil {
			return nil, err
		}
	}
	for addr, status := range msg.Report.Delayed {
		marked++
		if err := rc.desk.BounceTx(ctx, tx, &desk.Bounce{TicketID: ticketID, Address: addr, Status: status, Delayed: true}); err != nil {
			return nil, err
		}
	}
	if marked == 0 {
		rc.logger.InfoContext(ctx, "delivery report about no recipient of ours", slog.String("original", orig))
		return &Outcome{Kind: "ignored"}, nil
	}
	return &Outcome{Kind: "bounce", TicketID: ticketID}, nil
}

// agentAnswer handles mail to a signed reply address: an agent's answer to
// a notification. It is the agent's only when the MAC verifies, the From is
// that agent's address and the agent is active; otherwise the mail is
// handled by the customer rules, and the reason is logged, so that a forged
// answer never reaches a customer. An automatic answer (out of office) to a
// notification is dropped: stored as nothing, answered with nothing.
func (rc *Receiver) agentAnswer(ctx context.Context, tx pgx.Tx, msg *Message, rcpts []string, raw []byte) (*Outcome, bool, error) {
	if rc.replies == nil {
		return nil, false, nil
	}
	for _, r := range rcpts {
		ticketID, name, signed, err := rc.replies.Parse(r)
		if !signed {
			continue
		}
		if msg.Automatic {
			rc.logger.InfoContext(ctx, "automatic answer to a notification dropped", slog.String("ticket_id", ticketID), slog.String("from", msg.From))
			return &Outcome{Kind: "ignored", TicketID: ticketID}, true, nil
		}
		refuse := func(reason string) (*Outcome, bool, error) {
			rc.logger.WarnContext(ctx, "mail to an agent's reply address is not that agent's: handled as a customer's",
				slog.String("reason", reason), slog.String("ticket_id", ticketID), slog.String("agent", name), slog.String("from", msg.From))
			return nil, false, nil
		}
		if err != nil {
			return refuse("the signature does not verify")
		}
		agent, err := store.New(tx).GetAgent(ctx, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return refuse("no such agent")
		case err != nil:
			return nil, false, err
		case !agent.Active():
			return refuse("the agent is disabled")
		case !strings.EqualFold(agent.Email, msg.From):
			return refuse("the sender is not the agent")
		}
		out, err := rc.desk.AgentReplyTx(ctx, tx, &desk.AgentMail{TicketID: ticketID, Agent: agent, Text: mail.NewText(msg.Text),
			EmailMessageID: msg.MessageID, Raw: raw})
		if err != nil {
			return nil, true, err
		}
		return &Outcome{Kind: "agent_" + out.Kind, TicketID: ticketID, MessageID: out.MessageID, Matched: "reply_address"}, true, nil
	}
	return nil, false, nil
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

// Files are the message's attachments as the store keeps them.
func (m *Message) Files() []*store.NewAttachment {
	out := make([]*store.NewAttachment, 0, len(m.Attachments))
	for _, a := range m.Attachments {
		out = append(out, &store.NewAttachment{Filename: a.Name, ContentType: a.Type, Size: int64(len(a.Content)), Content: a.Content,
			ContentID: a.ContentID, Inline: a.Inline})
	}
	return out
}
