package desk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// AgentMail is an agent's answer to a notification, as it came in.
type AgentMail struct {
	TicketID       string
	Agent          *store.Agent
	Text           string // the new text, the quoted history already cut
	EmailMessageID string
	RawGzip        *blob.Buffer // the mail as it came, compressed
}

// AgentMailOutcome is what an agent's mail did.
type AgentMailOutcome struct {
	Kind      string // replied, noted, changed, refused
	Reason    string // for refused: what the explanation said
	MessageID int64  // the reply sent to the customer, if any
}

// agentReplyTx acts on an agent's mail, in the caller's transaction. The
// mail is kept on the ticket for audit. A first line that is a command
// (#note, #draft, #solved, #pending, #assign NAME) acts instead of or
// beside sending; any other text is the reply, sent to the customer from
// the support address through the same path as an API reply. A command
// that is not known, a reply to a closed ticket or a change that is not
// allowed changes nothing and gets one short explanation back.
func (d *Desk) agentReplyTx(ctx context.Context, tx *store.Tx, m *AgentMail) (*AgentMailOutcome, error) {
	st := tx.Store()
	author := vocab.Agent(m.Agent.Name)
	if _, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: m.TicketID, Direction: vocab.DirectionAgentEmail,
		Author: author, Body: m.Text, EmailMessageID: &m.EmailMessageID, RawEmailGzip: m.RawGzip}); err != nil {
		return nil, err
	}
	t, err := st.LockTicket(ctx, m.TicketID)
	if err != nil {
		return nil, err
	}
	refuse := func(reason string) (*AgentMailOutcome, error) {
		if err := d.mailAgentTx(ctx, tx, t, m.Agent, "Re: "+notificationSubject(t), explanation(reason, d.howToAnswer(t)), ""); err != nil {
			return nil, err
		}
		return &AgentMailOutcome{Kind: "refused", Reason: reason}, nil
	}
	if t.Status == vocab.StatusClosed {
		return refuse(fmt.Sprintf("%s is closed, so your answer was not sent. The customer's next message opens a follow-up ticket.", t.ID))
	}
	command, arg, rest := parseCommand(m.Text)
	reply := func(body string, fromDraft bool, status vocab.Status) (*AgentMailOutcome, error) {
		msg, _, err := d.CreateReplyTx(ctx, tx, &ReplyParams{TicketID: t.ID, Author: author, Body: body, FromDraft: fromDraft, Status: status})
		switch {
		case errors.Is(err, ErrNoDraft):
			return refuse(t.ID + " has no suggested reply yet.")
		case errors.Is(err, ErrDraftStale):
			return refuse("The customer wrote after the suggested reply of " + t.ID + "; a new one is being written.")
		case errors.Is(err, ErrInvalidTransition), errors.Is(err, ErrInvalidText):
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
		if err := d.changeTx(ctx, tx, t, author, c); err != nil {
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
		if _, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: t.ID, Direction: vocab.DirectionNote, Author: author, Body: rest}); err != nil {
			return nil, err
		}
		return &AgentMailOutcome{Kind: "noted"}, nil
	case "draft":
		return reply("", true, "")
	case "solved", "pending":
		status := vocab.Status(command)
		if rest != "" {
			return reply(rest, false, status)
		}
		return change(&Change{Status: &status})
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
