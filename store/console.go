package store

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueueParams pick a page of the console's queue.
type QueueParams struct {
	Agent string   // who looks
	Teams []string // the agent's teams
	// View is mine (assigned to Agent, open), unassigned (open, nobody's, of
	// Teams), open, pending, due (a running SLA clock due within a day or
	// breached), or all.
	View     string
	Status   string
	Team     string
	Assignee string
	Priority int16
	Search   string // a ticket number, a customer's address, or words of the subject
	Limit    int
	Offset   int
}

// QueueRow is a ticket in a queue, with what the list shows of it.
type QueueRow struct {
	Ticket
	CustomerName  string
	CustomerEmail string
	Waiting       time.Time  // the customer's newest message (or the opening)
	Due           *time.Time // the soonest running SLA clock
	Breached      bool
}

// Views are the queue views, in the order the console shows them.
var Views = []string{"mine", "unassigned", "open", "pending", "due", "all"}

var ticketNumberPattern = regexp.MustCompile(`^(?i)t-[0-9]{1,18}$`)

// queueWhere is the WHERE clause and arguments of a view and filters.
func queueWhere(p *QueueParams, view string) (string, []any) {
	where, args := []string{"t.merged_into IS NULL"}, []any{}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	switch view {
	case "mine":
		add("t.assignee = $?", p.Agent)
		where = append(where, "t.status = 'open'")
	case "unassigned":
		where = append(where, "t.status = 'open'", "t.assignee IS NULL")
		add("(t.team IS NULL OR t.team = ANY($?))", p.Teams)
	case "open":
		where = append(where, "t.status = 'open'")
	case "pending":
		where = append(where, "t.status = 'pending'")
	case "due":
		where = append(where, `t.id IN (SELECT ticket_id FROM ticket_slas WHERE breached
			OR least(first_response_due, next_response_due, resolution_due) < now() + interval '1 day')`)
	}
	if p.Status != "" {
		add("t.status = $?", p.Status)
	}
	if p.Team != "" {
		add("t.team = $?", p.Team)
	}
	if p.Assignee != "" {
		add("t.assignee = $?", p.Assignee)
	}
	if p.Priority != 0 {
		add("t.priority = $?", p.Priority)
	}
	if q := strings.TrimSpace(p.Search); q != "" {
		switch {
		case ticketNumberPattern.MatchString(q):
			add("t.id = $?", strings.ToUpper(q))
		case strings.Contains(q, "@"):
			add("c.email ILIKE $?", "%"+likeEscape(q)+"%")
		default:
			for _, w := range strings.Fields(q) {
				add("t.subject ILIKE $?", "%"+likeEscape(w)+"%")
			}
		}
	}
	return strings.Join(where, " AND "), args
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// CountCap bounds what a queue counts: a count stops at CountCap + 1
// (past the page asked for, for a total), so that a page costs the same on
// a desk of a thousand tickets as on one of a million (counting a million
// took 130 ms, five views' counts half a second).
const CountCap = 1000

// Queue queues a page of a view, newest customer message first, and how
// many tickets the view holds with these filters, counted up to the
// page's end and CountCap beyond: more than Offset + CountCap says only
// "more".
//
// The page's LIMIT and OFFSET are written into the statement, as the
// count's is: a plan kept for a prepared statement cannot know a LIMIT or
// OFFSET that is a parameter and costs it as a tenth of the rows, which
// looks dearer than the plans made for the values, so every view was
// planned anew (0.2–0.5 ms of planning, against 0.15–0.2 of running it, on
// 20,000 tickets).
func (b *Batch) Queue(p *QueueParams, rows *[]*QueueRow, total *int) {
	where, args := queueWhere(p, p.View)
	// Every ticket has its customer (a foreign key, not null), so a LEFT
	// JOIN counts the same, and PostgreSQL leaves it out unless a search
	// reads the customer's email: at a million tickets, half the pages a
	// count reads.
	b.b.Queue(`SELECT count(*) FROM (SELECT FROM tickets t LEFT JOIN customers c ON c.id = t.customer_id WHERE `+where+
		` LIMIT `+strconv.Itoa(p.Offset+CountCap+1)+`) capped`, args...).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(total); err != nil {
			return fmt.Errorf("queue: %w", err)
		}
		return nil
	})
	cols := ticketColumnsOf("t")
	queueRows(b, "queue", func(row pgx.Row) (*QueueRow, error) {
		var q QueueRow
		return &q, row.Scan(append(ticketFields(&q.Ticket), &q.CustomerName, &q.CustomerEmail, &q.Waiting, &q.Due, &q.Breached)...)
	}, func(l []*QueueRow) { *rows = l },
		`SELECT `+cols+`, c.name, c.email, coalesce(t.last_customer_message_at, t.created_at),
		least(sl.first_response_due, sl.next_response_due, sl.resolution_due), coalesce(sl.breached, false)
		FROM tickets t JOIN customers c ON c.id = t.customer_id LEFT JOIN ticket_slas sl ON sl.ticket_id = t.id
		WHERE `+where+` ORDER BY coalesce(t.last_customer_message_at, t.created_at) DESC, t.id DESC
		LIMIT `+strconv.Itoa(p.Limit)+` OFFSET `+strconv.Itoa(p.Offset), args...)
}

// QueueCounts queues a count of each view for the agent, without filters,
// up to CountCap + 1; into gets them by view.
func (b *Batch) QueueCounts(agent string, teams []string, into map[string]int) {
	for _, v := range Views {
		where, args := queueWhere(&QueueParams{Agent: agent, Teams: teams}, v)
		b.b.Queue(`SELECT count(*) FROM (SELECT FROM tickets t WHERE `+where+` LIMIT `+strconv.Itoa(CountCap+1)+`) capped`, args...).QueryRow(func(row pgx.Row) error {
			var n int
			if err := row.Scan(&n); err != nil {
				return fmt.Errorf("queue counts: %w", err)
			}
			into[v] = n
			return nil
		})
	}
}

// AnyTicketSLA queues whether any ticket is timed (the console shows "Due
// soon" then); into gets it.
func (b *Batch) AnyTicketSLA(into *bool) {
	b.b.Queue(`SELECT EXISTS (SELECT 1 FROM ticket_slas)`).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(into); err != nil {
			return fmt.Errorf("any ticket timed: %w", err)
		}
		return nil
	})
}

// QueuePage is what the console's queue page shows: a page of a view
// (QueueParams) and its count, every view's count for the agent, whether
// any ticket is timed, and the teams and agents to filter by.
type QueuePage struct {
	Rows   []*QueueRow
	Total  int
	Counts map[string]int
	Timed  bool
	Teams  []string
	Agents []*Agent
}

// QueuePage reads a queue page in one round trip.
func (s *Store) QueuePage(ctx context.Context, p *QueueParams) (*QueuePage, error) {
	page := &QueuePage{Counts: map[string]int{}}
	err := exec(ctx, s, func(b *Batch) {
		b.Queue(p, &page.Rows, &page.Total)
		b.QueueCounts(p.Agent, p.Teams, page.Counts)
		b.AnyTicketSLA(&page.Timed)
		b.Teams(&page.Teams)
		b.ListAgents(&page.Agents)
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// NewestMessage reads the id of a ticket's newest customer message or
// reply: what an agent must have seen before answering.
func (b *Batch) NewestMessage(ticketID string, into *int64) {
	b.b.Queue(`SELECT coalesce(max(id), 0) FROM messages WHERE ticket_id = $1 AND direction IN ('inbound', 'outbound')`, ticketID).
		QueryRow(func(row pgx.Row) error { return row.Scan(into) })
}

// SavedReply is a reply text agents insert and adapt.
type SavedReply struct {
	ID        int64     `json:"id"`
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	Team      *string   `json:"team"`  // a team's, for its agents
	Owner     *string   `json:"owner"` // an agent's own
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

const savedReplyColumns = `id, title, body, team, owner, created_by, created_at`

// InsertSavedReply adds a saved reply.
func (s *Store) InsertSavedReply(ctx context.Context, r *SavedReply) (*SavedReply, error) {
	rows, err := s.db.Query(ctx, `INSERT INTO saved_replies (title, body, team, owner, created_by) VALUES ($1, $2, $3, $4, $5)
		RETURNING `+savedReplyColumns, r.Title, r.Body, r.Team, r.Owner, r.CreatedBy)
	if err != nil {
		return nil, fmt.Errorf("saved reply: %w", err)
	}
	out, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByPos[SavedReply])
	if err != nil {
		return nil, fmt.Errorf("saved reply: %w", interpretError(err))
	}
	return out, nil
}

// SavedRepliesFor lists the saved replies an agent may use: its own and
// its teams', by title.
func (s *Store) SavedRepliesFor(ctx context.Context, agent string, teams []string) ([]*SavedReply, error) {
	rows, err := s.db.Query(ctx, `SELECT `+savedReplyColumns+` FROM saved_replies WHERE owner = $1 OR team = ANY($2) ORDER BY title, id`,
		agent, teams)
	if err != nil {
		return nil, fmt.Errorf("saved replies: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[SavedReply])
	if err != nil {
		return nil, fmt.Errorf("saved replies: %w", err)
	}
	return list, nil
}

// DeleteSavedReply removes a saved reply the agent may use: its own, or
// its teams'. ErrNotFound otherwise.
func (s *Store) DeleteSavedReply(ctx context.Context, id int64, agent string, teams []string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM saved_replies WHERE id = $1 AND (owner = $2 OR team = ANY($3))`, id, agent, teams)
	if err != nil {
		return fmt.Errorf("delete saved reply: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("saved reply %d: %w", id, ErrNotFound)
	}
	return nil
}

// Presence is an agent at a ticket.
type Presence struct {
	Agent    string    `json:"agent"`
	Activity string    `json:"activity"` // viewing, replying
	SeenAt   time.Time `json:"seen_at"`
}

// SeePresence records that the agent is at the ticket and returns the
// other agents seen there within fresh.
func (s *Store) SeePresence(ctx context.Context, ticketID, agent, activity string, fresh time.Duration) ([]*Presence, error) {
	var (
		b    Batch
		list []*Presence
	)
	b.b.Queue(`INSERT INTO ticket_presence (ticket_id, agent, activity) VALUES ($1, $2, $3)
		ON CONFLICT (ticket_id, agent) DO UPDATE SET activity = $3, seen_at = now()`, ticketID, agent, activity)
	b.b.Queue(`SELECT agent, activity, seen_at FROM ticket_presence WHERE ticket_id = $1 AND agent <> $2
		AND seen_at > now() - $3::interval ORDER BY agent`, ticketID, agent, fresh.String()).Query(func(rows pgx.Rows) error {
		var err error
		list, err = pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[Presence])
		return err
	})
	if err := s.Send(ctx, &b); err != nil {
		return nil, fmt.Errorf("presence on %s: %w", ticketID, err)
	}
	return list, nil
}
