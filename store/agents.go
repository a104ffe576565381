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
	// An address is one mailbox whatever its case, and mail is matched to
	// agents without regard to it: another agent's address in other case
	// is a conflict, as the same address is by the unique constraint.
	tag, err := s.db.Exec(ctx,
		`INSERT INTO agents (name, display_name, email, signature, admin)
		SELECT $1, $2, $3, coalesce($4, ''), coalesce($5, false)
		WHERE NOT EXISTS (SELECT 1 FROM agents WHERE lower(email) = lower($3) AND name <> $1)
		ON CONFLICT (name) DO UPDATE SET display_name = EXCLUDED.display_name, email = EXCLUDED.email,
			signature = coalesce($4, agents.signature), admin = coalesce($5, agents.admin)`,
		p.Name, p.DisplayName, p.Email, p.Signature, p.Admin)
	if err == nil && tag.RowsAffected() == 0 {
		err = fmt.Errorf("%w: %s is another agent's address", ErrConflict, p.Email)
	}
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
	if err := row.Scan(a.fields()...); err != nil {
		return nil, interpretError(err)
	}
	return &a, nil
}

// fields are where a row of agentColumns is scanned.
func (a *Agent) fields() []any {
	return []any{&a.Name, &a.DisplayName, &a.Email, &a.Signature, &a.Admin, &a.DisabledAt, &a.CreatedAt, &a.Teams}
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

// AgentToMail is an agent who hears of a ticket, with the numbers of the
// mail that tells them: its message's and its job's.
type AgentToMail struct {
	*Agent
	MessageID, JobID int64
}

// AgentsToMail queues the read of who hears of the ticket: its assignee
// if active, else the active agents of its team, and with admins the
// team's active admins as well (an SLA breach), each once, by name; into
// gets them, each with the numbers of the mail that tells them, drawn in
// the same statement, so that telling them needs no trip of its own to
// number their mails. A number drawn for a mail that is not written is a
// gap in its sequence, as a rollback leaves.
func (b *Batch) AgentsToMail(ticketID string, admins bool, into *[]AgentToMail) {
	b.b.Queue(`SELECT m.* FROM tickets t, LATERAL (`+agentsToMailOf("t", "$2")+`) m WHERE t.id = $1 ORDER BY m.name`, ticketID, admins).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AgentToMail, error) {
			var (
				a Agent
				m = AgentToMail{Agent: &a}
			)
			err := row.Scan(append(a.fields(), &m.MessageID, &m.JobID)...)
			return m, err
		})
		if err != nil {
			return fmt.Errorf("agents of %s: %w", ticketID, err)
		}
		*into = list
		return nil
	})
}

// agentsToMailOf selects AgentsToMail's agents of ticket t, a row of
// tickets in scope, by name, each with its mail's numbers; admins is the
// SQL of whether the team's admins hear of it too.
func agentsToMailOf(t, admins string) string {
	return `SELECT ` + agentColumns + `, ` + nextMessageID + `, ` + nextJobID + `
		FROM agents a
		WHERE a.disabled_at IS NULL AND (a.name = ` + t + `.assignee
			OR (a.name IN (SELECT g.agent FROM agent_teams g WHERE g.team = ` + t + `.team)
				AND (NOT EXISTS (SELECT 1 FROM agents x WHERE x.name = ` + t + `.assignee AND x.disabled_at IS NULL)
					OR (` + admins + ` AND a.admin))))
		ORDER BY a.name`
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

// AssignParams is a ticket triage classified, for AssignToTeam.
type AssignParams struct {
	TicketID string
	// Team and Priority are triage's, written with the assignee: a ticket
	// update that changes an indexed column writes an entry in each of
	// its indexes, and one write for both costs half of two.
	Team     string
	Priority int
	// Busy, when set, names the agents of the team that other
	// transactions of this process are giving a ticket right now, each to
	// have one more when they commit.
	Busy func() []string
	// Await, when set, waits between tries: until another assignment of
	// the team has ended, or for at most d. Without it a try waits d.
	Await func(ctx context.Context, d time.Duration) error
}

// AssignToTeam records the ticket's team and priority and gives it, if
// nobody has it, to the active agent of the team with the fewest open and
// pending tickets (ties: assigned least recently, then by name), in the
// caller's transaction. It returns the agent ("" for none) and how many
// active agents the team has.
//
// Each agent's load is a row kept by a trigger (migration 022), so the
// pick reads the team's agents, not its tickets; it locks the agent it
// picks, and a concurrent assignment takes the next one instead of
// waiting (FOR NO KEY UPDATE SKIP LOCKED). The agent is given the ticket
// only if it has no more than any other of the team, counting one more
// for each Busy agent; otherwise nothing is written and the pick is made
// again once the agents being given tickets right now have them. The
// loads other than the one locked are the pick's snapshot's, older than
// the locked row's, so a fresh read checks again after the write, which
// is undone (a savepoint) if it finds one with fewer. So the loads stay
// within one of each other, as when assignments took turns; a Busy
// agent's transaction that rolls back leaves one agent two ahead until the
// next assignments even it out.
//
// The agent stays locked until the caller's commit, and every other
// assignment of the team passes it by meanwhile: so the savepoint, the
// write and its check go in one trip, with what waits in the transaction,
// and the savepoint's release waits for the transaction's next trip (most
// often its commit's).
func (s *Store) AssignToTeam(ctx context.Context, p *AssignParams) (agent string, agents int, err error) {
	tx, ok := s.db.(*Tx)
	if !ok {
		return "", 0, fmt.Errorf("assign %s: not in a transaction", p.TicketID)
	}
	const (
		savepoint = `SAVEPOINT helpdesk_assign`
		release   = `RELEASE SAVEPOINT helpdesk_assign`
		undo      = `ROLLBACK TO SAVEPOINT helpdesk_assign`
	)
	await := p.Await
	if await == nil {
		await = func(ctx context.Context, d time.Duration) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
				return nil
			}
		}
	}
	var pending []string // the last try's undoing, which goes with the next one
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		var (
			b                   Batch
			given               *string
			done, locked, fresh bool
			busy                []string
		)
		if p.Busy != nil {
			busy = p.Busy()
		}
		for _, sql := range append(pending, savepoint) {
			b.b.Queue(sql)
		}
		b.b.Queue(assignPickSQL, p.TicketID, p.Team, p.Priority, busy).QueryRow(func(row pgx.Row) error {
			return row.Scan(&given, &done, &locked, &agents)
		})
		b.b.Queue(assignFairSQL, p.TicketID, p.Team, busy).QueryRow(func(row pgx.Row) error {
			return row.Scan(&fresh)
		})
		if err := tx.send(ctx, &b, false); err != nil {
			return "", 0, fmt.Errorf("assign %s: %w", p.TicketID, err)
		}
		switch {
		case done && given == nil:
			// Someone has it already, or the team has nobody: the team
			// and priority are written all the same. (Or the ticket is
			// gone, and the caller's transaction finds out.)
			tx.Later(func(b *Batch) { b.b.Queue(release) })
			return "", agents, nil
		case done && fresh:
			tx.Later(func(b *Batch) { b.b.Queue(release) })
			return *given, agents, nil
		case !locked:
			// Every agent of the team is being given a ticket: nothing is
			// written or locked, and the undoing goes with the next try.
			pending = []string{undo, release}
		default:
			// The agent locked had more than another: let it go before waiting.
			var back Batch
			back.b.Queue(undo)
			back.b.Queue(release)
			if err := tx.send(ctx, &back, false); err != nil {
				return "", 0, fmt.Errorf("assign %s: %w", p.TicketID, err)
			}
			pending = nil
		}
		if err := await(ctx, wait); err != nil {
			return "", 0, fmt.Errorf("assign %s: %w", p.TicketID, err)
		}
	}
}

// assignPickSQL locks ticket $1 and, if it has no assignee, the least busy
// agent of team $2 that no other assignment holds (was, pick). If that
// agent has, as locked, no more open tickets than any other active agent
// of the team, counting one more for each agent of $4 (Busy), or if there
// is nobody to give the ticket to (it has an assignee, or the team nobody
// active), it writes team $2 and priority $3 on the ticket, and the agent
// as its assignee. It returns the agent given the ticket, or NULL; whether
// it is done (it wrote, or the ticket is gone); whether an agent was
// locked; and how many active agents the team has. (was reads the ticket's newest assignee, which RETURNING
// cannot give.)
const assignPickSQL = `WITH was AS (
		SELECT assignee FROM tickets WHERE id = $1 FOR NO KEY UPDATE
	), team AS (
		SELECT a.name, a.open_tickets + CASE WHEN a.name = ANY($4::text[]) THEN 1 ELSE 0 END AS load
		FROM agents a JOIN agent_teams t ON t.agent = a.name
		WHERE t.team = $2 AND a.disabled_at IS NULL
	), pick AS (
		SELECT a.name, a.open_tickets FROM agents a JOIN agent_teams t ON t.agent = a.name
		WHERE t.team = $2 AND a.disabled_at IS NULL AND EXISTS (SELECT 1 FROM was WHERE assignee IS NULL)
		ORDER BY a.open_tickets, a.last_assigned_at NULLS FIRST, a.name
		LIMIT 1 FOR NO KEY UPDATE OF a SKIP LOCKED
	), fair AS (
		SELECT p.name FROM pick p
		WHERE p.open_tickets <= coalesce((SELECT min(t.load) FROM team t WHERE t.name <> p.name), 2147483647)
	), assigned AS (
		UPDATE tickets SET team = $2, priority = $3, updated_at = now(),
			assignee = coalesce((SELECT assignee FROM was), (SELECT name FROM fair))
		WHERE id = $1 AND (EXISTS (SELECT 1 FROM fair) OR NOT EXISTS (SELECT 1 FROM was WHERE assignee IS NULL)
			OR NOT EXISTS (SELECT 1 FROM team))
		RETURNING assignee
	), touched AS (
		UPDATE agents SET last_assigned_at = clock_timestamp()
		WHERE name = (SELECT name FROM fair) AND EXISTS (SELECT 1 FROM assigned)
	)
	SELECT (SELECT name FROM fair WHERE EXISTS (SELECT 1 FROM assigned)),
		EXISTS (SELECT 1 FROM assigned) OR NOT EXISTS (SELECT 1 FROM was),
		EXISTS (SELECT 1 FROM pick),
		(SELECT count(*) FROM team)`

// assignFairSQL, run after assignPickSQL with a snapshot of its own, says
// whether the ticket's assignee had, before its +1 (in its row by now, by
// the trigger), no more open tickets than any other active agent of team
// $2, counting one more for each agent of $3 (Busy). Its answer means
// nothing when the pick gave the ticket to nobody.
const assignFairSQL = `SELECT coalesce((SELECT a.open_tickets - 1 <=
		coalesce((SELECT min(o.open_tickets + CASE WHEN o.name = ANY($3::text[]) THEN 1 ELSE 0 END)
		 FROM agents o JOIN agent_teams t ON t.agent = o.name
		 WHERE t.team = $2 AND o.disabled_at IS NULL AND o.name <> a.name), 2147483647)
	FROM tickets k JOIN agents a ON a.name = k.assignee WHERE k.id = $1), false)`
