package desk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// ErrInvalidSavedReply is a saved reply without a title or a body, or too
// long.
var ErrInvalidSavedReply = errors.New("a saved reply has a title of 1 to 200 characters and a body of 1 to 20,000")

// SavedReplyParams are a saved reply to add: a team's (for its agents) or,
// without a team, the agent's own.
type SavedReplyParams struct {
	Title, Body, Team string
}

// AddSavedReply adds a saved reply; a team's only by one of its agents.
func (d *Desk) AddSavedReply(ctx context.Context, agent *store.Agent, p *SavedReplyParams) (*store.SavedReply, error) {
	var saved *store.SavedReply
	err := store.Run(ctx, d.pool, func(tx *store.Tx) error {
		var err error
		saved, err = d.AddSavedReplyTx(ctx, tx, agent, p)
		return err
	})
	return saved, err
}

// AddSavedReplyTx is AddSavedReply in the caller's transaction: an API
// request's, whose Idempotency-Key is claimed in the same one.
func (d *Desk) AddSavedReplyTx(ctx context.Context, tx *store.Tx, agent *store.Agent, p *SavedReplyParams) (*store.SavedReply, error) {
	title, body := strings.TrimSpace(p.Title), strings.TrimSpace(p.Body)
	if title == "" || len([]rune(title)) > 200 || body == "" || len([]rune(body)) > 20000 {
		return nil, ErrInvalidSavedReply
	}
	for _, text := range []string{title, body} {
		if err := storable(text); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidSavedReply, err)
		}
	}
	r := &store.SavedReply{Title: title, Body: body, CreatedBy: string(vocab.Agent(agent.Name))}
	if p.Team != "" {
		if !agent.InTeam(p.Team) {
			return nil, fmt.Errorf("%w: %q is not one of %s's teams %v", ErrUnknownTeam, p.Team, agent.Name, agent.Teams)
		}
		r.Team = &p.Team
	} else {
		r.Owner = &agent.Name
	}
	return tx.Store().InsertSavedReply(ctx, r)
}

// SavedReplies lists the saved replies an agent may use.
func (d *Desk) SavedReplies(ctx context.Context, agent *store.Agent) ([]*store.SavedReply, error) {
	return store.New(d.pool).SavedRepliesFor(ctx, agent.Name, agent.Teams)
}

// DeleteSavedReply removes one of the agent's saved replies or its teams'.
func (d *Desk) DeleteSavedReply(ctx context.Context, agent *store.Agent, id int64) error {
	return store.New(d.pool).DeleteSavedReply(ctx, id, agent.Name, agent.Teams)
}

// FillSavedReply puts the ticket's, its customer's and the agent's values
// into a saved reply's placeholders: {{customer.name}}, {{customer.email}},
// {{ticket.id}}, {{ticket.subject}}, {{agent.name}}. Any other {{…}}
// stays as written, for the agent to see.
func FillSavedReply(body string, t *store.Ticket, c *store.Customer, agent *store.Agent) string {
	return strings.NewReplacer(
		"{{customer.name}}", c.Name, "{{customer.email}}", c.Email,
		"{{ticket.id}}", t.ID, "{{ticket.subject}}", t.Subject,
		"{{agent.name}}", agent.DisplayName,
	).Replace(body)
}
