package desk

import (
	"context"
	"errors"
	"fmt"
	"html"
	"strings"

	"github.com/jackc/pgx/v5"

	"helpdesk/mail"
	"helpdesk/store"
)

// NotifyTx tells the ticket's agents, by mail, what the customer wrote and
// what triage made of it, in the transaction that completes triage job
// triageJobID: the assignee, or every active agent of the team when nobody
// is assigned. A job that a newer customer message replaced notifies
// nobody; the newer one will.
func (d *Desk) NotifyTx(ctx context.Context, tx pgx.Tx, ticketID string, triageJobID int64) error {
	st := store.New(tx)
	t, err := st.GetTicket(ctx, ticketID)
	if err != nil {
		return err
	}
	if t.TriageJobID == nil || *t.TriageJobID != triageJobID {
		return nil
	}
	var agents []*store.Agent
	if t.Assignee != nil {
		a, err := st.GetAgent(ctx, *t.Assignee)
		if err != nil {
			return err
		}
		if a.Active() {
			agents = append(agents, a)
		}
	}
	if len(agents) == 0 && t.Team != nil {
		if agents, err = st.TeamAgents(ctx, *t.Team); err != nil {
			return err
		}
	}
	if len(agents) == 0 {
		return nil
	}
	customer, err := st.GetCustomer(ctx, t.CustomerID)
	if err != nil {
		return err
	}
	newest, err := st.NewestBodies(ctx, t.ID, store.DirectionInbound, 1)
	if err != nil {
		return err
	}
	text, htmlBody := notificationBody(t, customer, newest)
	for _, a := range agents {
		if err := d.mailAgentTx(ctx, tx, t, a, notificationSubject(t), text, htmlBody); err != nil {
			return err
		}
	}
	return nil
}

// notificationSubject is "[T-500001] Late parcel (shipping, P2)".
func notificationSubject(t *store.Ticket) string {
	s := "[" + t.ID + "] " + t.Subject
	if t.Team != nil && t.Priority != nil {
		s += fmt.Sprintf(" (%s, P%d)", *t.Team, *t.Priority)
	}
	return s
}

const howToAnswer = "Reply to this mail to answer the customer: only your new text is sent, from the support address. " +
	"Start with #note for an internal note, #draft to send the suggested reply as it is, #solved, #pending or #assign NAME."

func notificationBody(t *store.Ticket, c *store.Customer, newest []string) (text, htmlBody string) {
	message := "(no text)"
	if len(newest) > 0 {
		message = newest[len(newest)-1]
	}
	triage := "not triaged yet"
	if t.Team != nil && t.Priority != nil {
		triage = fmt.Sprintf("team %s, priority P%d", *t.Team, *t.Priority)
	}
	draft := "(none yet)"
	if t.DraftIsCurrent() {
		draft = *t.DraftReply
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s <%s> wrote on %s:\n\n%s\n\nTriage: %s.\n\nSuggested reply:\n\n%s\n\n-- \n%s\n", c.Name, c.Email, t.ID, message, triage, draft, howToAnswer)
	para := func(s string) string {
		return "<p>" + strings.ReplaceAll(html.EscapeString(s), "\n", "<br>\n") + "</p>\n"
	}
	h := "<!DOCTYPE html>\n<html><body>\n" +
		para(fmt.Sprintf("%s <%s> wrote on %s:", c.Name, c.Email, t.ID)) +
		"<blockquote>" + para(message) + "</blockquote>\n" +
		para("Triage: "+triage+".") + para("Suggested reply:") + "<blockquote>" + para(draft) + "</blockquote>\n" +
		"<hr>\n" + para(howToAnswer) + "</body></html>\n"
	return b.String(), h
}

// mailAgentTx writes a mail to an agent about the ticket: a message on the
// agent side with its Message-ID, threaded under the ticket's earlier mail
// to agents, its bytes rendered and stored now, and its job.
func (d *Desk) mailAgentTx(ctx context.Context, tx pgx.Tx, t *store.Ticket, a *store.Agent, subject, text, htmlBody string) error {
	st := store.New(tx)
	refs, err := st.NotificationIDs(ctx, t.ID)
	if err != nil {
		return err
	}
	id := mail.NewMessageID(d.config.MailDomain)
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: t.ID, Direction: store.DirectionNotification,
		Author: ActorSystem, Body: text, EmailMessageID: &id})
	if err != nil {
		return err
	}
	out := &mail.Outgoing{From: d.config.From, To: []*mail.Address{{Name: a.DisplayName, Address: a.Email}},
		SubjectLine: subject, TicketID: t.ID, Date: msg.CreatedAt, MessageID: id, References: mail.References(refs),
		Body: text, HTML: htmlBody, Automatic: true}
	if len(refs) > 0 {
		out.InReplyTo = refs[len(refs)-1]
	}
	if d.config.ReplyAddresses != nil {
		out.ReplyTo = &mail.Address{Name: d.config.From.Name, Address: d.config.ReplyAddresses.Sign(t.ID, a.Name)}
	}
	if err := d.queueRenderedTx(ctx, st, msg.ID, out, store.Recipient{Address: a.Email, Kind: "to"}); err != nil {
		return err
	}
	jobID, err := d.jobs.EnqueueNotifyTx(ctx, tx, msg.ID, t.ID)
	if err != nil {
		return err
	}
	return st.SetOutboundJob(ctx, msg.ID, jobID)
}

// AgentMail is an agent's answer to a notification, as it came in.
type AgentMail struct {
	TicketID       string
	Agent          *store.Agent
	Text           string // the new text, the quoted history already cut
	EmailMessageID string
	Raw            []byte
}

// AgentMailOutcome is what an agent's mail did.
type AgentMailOutcome struct {
	Kind      string // replied, noted, changed, refused
	Reason    string // for refused: what the explanation said
	MessageID int64  // the reply sent to the customer, if any
}

// AgentReplyTx acts on an agent's mail, in the caller's transaction. The
// mail is kept on the ticket for audit. A first line that is a command
// (#note, #draft, #solved, #pending, #assign NAME) acts instead of or
// beside sending; any other text is the reply, sent to the customer from
// the support address through the same path as an API reply. A command
// that is not known, a reply to a closed ticket or a change that is not
// allowed changes nothing and gets one short explanation back.
func (d *Desk) AgentReplyTx(ctx context.Context, tx pgx.Tx, m *AgentMail) (*AgentMailOutcome, error) {
	st := store.New(tx)
	author := "agent:" + m.Agent.Name
	if _, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: m.TicketID, Direction: store.DirectionAgentEmail,
		Author: author, Body: m.Text, EmailMessageID: &m.EmailMessageID, RawEmail: m.Raw}); err != nil {
		return nil, err
	}
	t, err := st.LockTicket(ctx, m.TicketID)
	if err != nil {
		return nil, err
	}
	refuse := func(reason string) (*AgentMailOutcome, error) {
		text := reason + "\n\nNothing was sent to the customer and the ticket did not change.\n\n-- \n" + howToAnswer + "\n"
		if err := d.mailAgentTx(ctx, tx, t, m.Agent, "Re: "+notificationSubject(t), text, ""); err != nil {
			return nil, err
		}
		return &AgentMailOutcome{Kind: "refused", Reason: reason}, nil
	}
	if t.Status == store.StatusClosed {
		return refuse(fmt.Sprintf("%s is closed, so your answer was not sent. The customer's next message opens a follow-up ticket.", t.ID))
	}
	command, arg, rest := parseCommand(m.Text)
	reply := func(body string, fromDraft bool, status string) (*AgentMailOutcome, error) {
		msg, _, err := d.CreateReplyTx(ctx, tx, &ReplyParams{TicketID: t.ID, Author: author, Body: body, FromDraft: fromDraft, Status: status})
		switch {
		case errors.Is(err, ErrNoDraft):
			return refuse(t.ID + " has no suggested reply yet.")
		case errors.Is(err, ErrDraftStale):
			return refuse("The customer wrote after the suggested reply of " + t.ID + "; a new one is being written.")
		case errors.Is(err, ErrInvalidTransition):
			return refuse(err.Error())
		case err != nil:
			return nil, err
		}
		return &AgentMailOutcome{Kind: "replied", MessageID: msg.ID}, nil
	}
	change := func(c *Change) (*AgentMailOutcome, error) {
		if c.Status != nil && !CanChangeStatus(t.Status, *c.Status) {
			return refuse(fmt.Sprintf("%s cannot go from %s to %s.", t.ID, t.Status, *c.Status))
		}
		if err := d.changeTx(ctx, st, t, author, c); err != nil {
			if errors.Is(err, ErrUnknownAgent) {
				return refuse(err.Error())
			}
			return nil, err
		}
		return &AgentMailOutcome{Kind: "changed"}, nil
	}
	switch command {
	case "":
		if strings.TrimSpace(m.Text) == "" {
			return refuse("Your mail had no new text above the quoted message, so nothing was sent.")
		}
		return reply(m.Text, false, "")
	case "note":
		if rest == "" {
			return refuse("#note needs the note's text below it.")
		}
		if _, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: t.ID, Direction: store.DirectionNote, Author: author, Body: rest}); err != nil {
			return nil, err
		}
		return &AgentMailOutcome{Kind: "noted"}, nil
	case "draft":
		return reply("", true, "")
	case "solved", "pending":
		if rest != "" {
			return reply(rest, false, command)
		}
		return change(&Change{Status: &command})
	case "assign":
		if arg == "" {
			return refuse("#assign needs an agent's name: #assign NAME.")
		}
		out, err := change(&Change{Assignee: &arg})
		if err != nil || out.Kind != "changed" || rest == "" {
			return out, err
		}
		return reply(rest, false, "")
	}
	return refuse(fmt.Sprintf("#%s is not a command. The commands are #note, #draft, #solved, #pending and #assign NAME.", command))
}

// parseCommand reads a first line such as "#assign bilal": the command,
// its argument, and the text below it.
func parseCommand(text string) (command, arg, rest string) {
	first, after, _ := strings.Cut(strings.TrimSpace(text), "\n")
	first = strings.TrimSpace(first)
	if !strings.HasPrefix(first, "#") || len(first) < 2 || strings.HasPrefix(first, "# ") {
		return "", "", ""
	}
	fields := strings.Fields(first[1:])
	command = strings.ToLower(fields[0])
	if len(fields) > 1 {
		arg = strings.ToLower(fields[1])
	}
	return command, arg, strings.TrimSpace(after)
}
