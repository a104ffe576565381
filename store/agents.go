package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Agent is a support agent.
type Agent struct {
	Name        string     `json:"name"` // the NAME of agent:NAME
	DisplayName string     `json:"display_name"`
	Email       string     `json:"email"`
	Teams       []string   `json:"teams"`
	Signature   string     `json:"signature"` // below every reply the agent sends
	Admin       bool       `json:"admin"`     // may manage webhooks, suppressions, agents and River UI's queues
	DisabledAt  *time.Time `json:"disabled_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

// Active reports whether the agent may work: not disabled.
func (a *Agent) Active() bool { return a.DisabledAt == nil }

// InTeam reports whether the agent is of the team.
func (a *Agent) InTeam(team string) bool { return slices.Contains(a.Teams, team) }

// UpsertAgentParams are an agent's fields.
type UpsertAgentParams struct {
	Name        string
	DisplayName string
	Email       string
	Teams       []string // nil leaves the agent's teams as they are
	Signature   *string  // nil leaves the signature as it is
	Admin       *bool    // nil leaves the flag as it is (false for a new agent)
}

// UpsertAgent adds the agent, or updates its name, email and teams.
func (s *Store) UpsertAgent(ctx context.Context, p *UpsertAgentParams) error {
	_, err := s.db.Exec(ctx,
		`INSERT INTO agents (name, display_name, email, signature, admin) VALUES ($1, $2, $3, coalesce($4, ''), coalesce($5, false))
		ON CONFLICT (name) DO UPDATE SET display_name = EXCLUDED.display_name, email = EXCLUDED.email,
			signature = coalesce($4, agents.signature), admin = coalesce($5, agents.admin)`,
		p.Name, p.DisplayName, p.Email, p.Signature, p.Admin)
	if err != nil {
		return fmt.Errorf("upsert agent %s: %w", p.Name, interpretError(err))
	}
	if p.Teams == nil {
		return nil
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM agent_teams WHERE agent = $1 AND NOT team = ANY($2)`, p.Name, p.Teams); err != nil {
		return fmt.Errorf("teams of agent %s: %w", p.Name, err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO agent_teams (agent, team) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`,
		p.Name, p.Teams); err != nil {
		return fmt.Errorf("teams of agent %s: %w", p.Name, interpretError(err))
	}
	return nil
}

const agentColumns = `a.name, a.display_name, a.email, a.signature, a.admin, a.disabled_at, a.created_at,
	ARRAY(SELECT team FROM agent_teams t WHERE t.agent = a.name ORDER BY team)`

func scanAgent(row pgx.Row) (*Agent, error) {
	var a Agent
	if err := row.Scan(&a.Name, &a.DisplayName, &a.Email, &a.Signature, &a.Admin, &a.DisabledAt, &a.CreatedAt, &a.Teams); err != nil {
		return nil, interpretError(err)
	}
	return &a, nil
}

// GetAgent returns the agent with the given name, or ErrNotFound.
func (s *Store) GetAgent(ctx context.Context, name string) (*Agent, error) {
	a, err := optional(ctx, s, func(b *Batch, into **Agent) { b.GetAgent(name, into) })
	if err == nil && a == nil {
		err = fmt.Errorf("get agent %s: %w", name, ErrNotFound)
	}
	return a, err
}

// AgentByEmail queues the read of the agent with this address, in any
// case; into gets it, or nil if none.
func (b *Batch) AgentByEmail(email string, into **Agent) {
	queueOptionalRow(b, "agent by email", email, scanAgent, into, `SELECT `+agentColumns+` FROM agents a WHERE lower(a.email) = lower($1)`, email)
}

// GetAgent queues GetAgent; into gets the agent, or nil if none.
func (b *Batch) GetAgent(name string, into **Agent) {
	queueOptionalRow(b, "get agent", name, scanAgent, into, getAgentSQL, name)
}

const getAgentSQL = `SELECT ` + agentColumns + ` FROM agents a WHERE a.name = $1`

// AuthorAgent queues the read of the agent who wrote message messageID;
// into gets it, or nil when an agent did not write it (or is gone).
func (b *Batch) AuthorAgent(messageID int64, into **Agent) {
	queueOptionalRow(b, "author of message", messageID, scanAgent, into, `SELECT `+agentColumns+` FROM agents a
		WHERE a.name = (SELECT substr(author, length('agent:') + 1) FROM messages WHERE id = $1 AND starts_with(author, 'agent:'))`, messageID)
}

// ListAgents returns every agent, by name.
func (s *Store) ListAgents(ctx context.Context) ([]*Agent, error) {
	var list []*Agent
	if err := exec(ctx, s, func(b *Batch) { b.ListAgents(&list) }); err != nil {
		return nil, err
	}
	return list, nil
}

// ListAgents queues ListAgents; into gets the agents.
func (b *Batch) ListAgents(into *[]*Agent) {
	queueRows(b, "list agents", scanAgent, func(l []*Agent) { *into = l }, `SELECT `+agentColumns+` FROM agents a ORDER BY a.name`)
}

// TeamAgents returns the active agents of a team, by name.
func (s *Store) TeamAgents(ctx context.Context, team string) ([]*Agent, error) {
	rows, err := s.db.Query(ctx, `SELECT `+agentColumns+` FROM agents a JOIN agent_teams t ON t.agent = a.name
		WHERE t.team = $1 AND a.disabled_at IS NULL ORDER BY a.name`, team)
	if err != nil {
		return nil, fmt.Errorf("agents of %s: %w", team, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Agent, error) { return scanAgent(row) })
	if err != nil {
		return nil, fmt.Errorf("agents of %s: %w", team, err)
	}
	return list, nil
}

// AgentsToTell queues the read of who hears of the ticket: its assignee
// if active, else the active agents of its team, by name; into gets them.
func (b *Batch) AgentsToTell(ticketID string, into *[]*Agent) {
	b.b.Queue(`WITH t AS (SELECT assignee, team FROM tickets WHERE id = $1),
		assignee AS (SELECT a.name FROM agents a, t WHERE a.name = t.assignee AND a.disabled_at IS NULL)
		SELECT `+agentColumns+` FROM agents a
		WHERE a.name IN (SELECT name FROM assignee)
		   OR (NOT EXISTS (SELECT 1 FROM assignee) AND a.disabled_at IS NULL
		       AND a.name IN (SELECT g.agent FROM agent_teams g, t WHERE g.team = t.team))
		ORDER BY a.name`, ticketID).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Agent, error) { return scanAgent(row) })
		if err != nil {
			return fmt.Errorf("agents of %s: %w", ticketID, err)
		}
		*into = list
		return nil
	})
}

// SetSignature replaces the agent's signature; ErrNotFound for an unknown agent.
func (s *Store) SetSignature(ctx context.Context, name, signature string) (*Agent, error) {
	a, err := scanAgent(s.db.QueryRow(ctx, `UPDATE agents a SET signature = $2 WHERE a.name = $1 RETURNING `+agentColumns, name, signature))
	if err != nil {
		return nil, fmt.Errorf("signature of agent %s: %w", name, err)
	}
	return a, nil
}

// SetAdmin makes the agent an admin or not; ErrNotFound for none.
func (s *Store) SetAdmin(ctx context.Context, name string, admin bool) error {
	tag, err := s.db.Exec(ctx, `UPDATE agents SET admin = $2 WHERE name = $1`, name, admin)
	if err != nil {
		return fmt.Errorf("set admin of %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("agent %s: %w", name, ErrNotFound)
	}
	return nil
}

// DisableAgent stops the agent working: its keys answer 401 from the next
// request, and assignment passes it by. ErrNotFound for an unknown agent.
func (s *Store) DisableAgent(ctx context.Context, name string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM ui_sessions WHERE key_id IN (SELECT id FROM api_keys WHERE actor = 'agent:' || $1)`, name); err != nil {
		return fmt.Errorf("disable agent %s: %w", name, err)
	}
	tag, err := s.db.Exec(ctx, `UPDATE agents SET disabled_at = coalesce(disabled_at, now()) WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("disable agent %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("agent %s: %w", name, ErrNotFound)
	}
	return nil
}

// Teams returns the teams that exist: those of active agents.
func (s *Store) Teams(ctx context.Context) ([]string, error) {
	teams, err := one(ctx, s, func(b *Batch, into *[]string) { b.Teams(into) })
	if err != nil {
		return nil, err
	}
	return *teams, nil
}

// Teams queues Teams; into gets the teams.
func (b *Batch) Teams(into *[]string) { b.texts("teams", teamsSQL, into) }

const teamsSQL = `SELECT DISTINCT t.team FROM agent_teams t JOIN agents a ON a.name = t.agent
	WHERE a.disabled_at IS NULL ORDER BY t.team`

// AssignToTeam gives the ticket, if nobody has it, to the active agent of
// the team with the fewest open and pending tickets (ties: assigned least
// recently, then by name), in the caller's transaction, and returns the
// agent ("" for none). Each agent's load is a row kept by a trigger
// (migration 022), so the pick reads the team's agents, not its tickets;
// it locks the agent it picks, and a concurrent assignment takes the next
// one instead of waiting (FOR UPDATE SKIP LOCKED). The pick's snapshot may
// be older than the row it locked (PostgreSQL re-reads a locked row, not
// the order), so a fresh read checks that no agent of the team has fewer;
// if one has, the pick is undone (a savepoint) and made again, a little
// later when that agent is being assigned to right now. The loads stay
// within one of each other, as when assignments took turns.
func (s *Store) AssignToTeam(ctx context.Context, ticketID, team string) (string, error) {
	var (
		agent  *string
		picked bool
		fair   bool
	)
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		if _, err := s.db.Exec(ctx, `SAVEPOINT helpdesk_assign`); err != nil {
			return "", fmt.Errorf("assign %s: %w", ticketID, err)
		}
		err := s.db.QueryRow(ctx, `WITH pick AS (
				SELECT a.name FROM agents a JOIN agent_teams t ON t.agent = a.name
				WHERE t.team = $2 AND a.disabled_at IS NULL
				ORDER BY a.open_tickets, a.last_assigned_at NULLS FIRST, a.name
				LIMIT 1 FOR UPDATE OF a SKIP LOCKED
			), assigned AS (
				UPDATE tickets SET assignee = (SELECT name FROM pick), updated_at = now()
				WHERE id = $1 AND assignee IS NULL AND EXISTS (SELECT 1 FROM pick)
				RETURNING assignee
			), touched AS (
				UPDATE agents SET last_assigned_at = clock_timestamp() WHERE name = (SELECT assignee FROM assigned)
			)
			SELECT (SELECT assignee FROM assigned), EXISTS (SELECT 1 FROM pick)`, ticketID, team).Scan(&agent, &picked)
		switch {
		case err != nil:
			return "", fmt.Errorf("assign %s: %w", ticketID, err)
		case agent == nil && picked:
			return "", nil // someone has it already
		case agent != nil:
			// Our own +1 is in the agent's row now; before it, the load
			// must have been the team's least.
			if err := s.db.QueryRow(ctx, `SELECT (SELECT open_tickets - 1 FROM agents WHERE name = $1) <=
				coalesce((SELECT min(a.open_tickets) FROM agents a JOIN agent_teams t ON t.agent = a.name
				 WHERE t.team = $2 AND a.disabled_at IS NULL AND a.name <> $1), 2147483647)`, *agent, team).Scan(&fair); err != nil {
				return "", fmt.Errorf("assign %s: %w", ticketID, err)
			}
			if fair {
				if _, err := s.db.Exec(ctx, `RELEASE SAVEPOINT helpdesk_assign`); err != nil {
					return "", fmt.Errorf("assign %s: %w", ticketID, err)
				}
				return *agent, nil
			}
		default:
			var anyone bool
			if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agents a JOIN agent_teams t ON t.agent = a.name
				WHERE t.team = $1 AND a.disabled_at IS NULL)`, team).Scan(&anyone); err != nil || !anyone {
				return "", err
			}
		}
		if _, err := s.db.Exec(ctx, `ROLLBACK TO SAVEPOINT helpdesk_assign`); err != nil {
			return "", fmt.Errorf("assign %s: %w", ticketID, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("assign %s: %w", ticketID, ctx.Err())
		case <-time.After(wait):
		}
	}
}
