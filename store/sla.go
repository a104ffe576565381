package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Calendar is a calendar as stored; sla.NewCalendar makes it usable.
type Calendar struct {
	Name      string    `json:"name"`
	TimeZone  string    `json:"time_zone"`
	Hours     string    `json:"hours"`
	Holidays  []string  `json:"holidays"` // YYYY-MM-DD
	UpdatedAt time.Time `json:"updated_at"`
}

// UpsertCalendar adds or replaces a calendar.
func (s *Store) UpsertCalendar(ctx context.Context, c *Calendar) error {
	holidays := c.Holidays
	if holidays == nil {
		holidays = []string{}
	}
	_, err := s.db.Exec(ctx, `INSERT INTO calendars (name, time_zone, hours, holidays) VALUES ($1, $2, $3, $4::text[]::date[])
		ON CONFLICT (name) DO UPDATE SET time_zone = $2, hours = $3, holidays = $4::text[]::date[], updated_at = now()`,
		c.Name, c.TimeZone, c.Hours, holidays)
	if err != nil {
		return fmt.Errorf("calendar %s: %w", c.Name, interpretError(err))
	}
	return nil
}

const calendarColumns = `name, time_zone, hours, array(SELECT to_char(d, 'YYYY-MM-DD') FROM unnest(holidays) d ORDER BY d), updated_at`

// GetCalendar returns a stored calendar; ErrNotFound for none.
func (s *Store) GetCalendar(ctx context.Context, name string) (*Calendar, error) {
	var c Calendar
	err := s.db.QueryRow(ctx, `SELECT `+calendarColumns+` FROM calendars WHERE name = $1`, name).
		Scan(&c.Name, &c.TimeZone, &c.Hours, &c.Holidays, &c.UpdatedAt)
	if err != nil {
		return nil, fmt.Errorf("calendar %s: %w", name, interpretError(err))
	}
	return &c, nil
}

// ListCalendars returns the stored calendars by name.
func (s *Store) ListCalendars(ctx context.Context) ([]*Calendar, error) {
	rows, err := s.db.Query(ctx, `SELECT `+calendarColumns+` FROM calendars ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("calendars: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[Calendar])
	if err != nil {
		return nil, fmt.Errorf("calendars: %w", err)
	}
	return list, nil
}

// SLAPolicy is the targets of a priority, for one team or ("") for every
// team without its own.
type SLAPolicy struct {
	ID            int64         `json:"id"`
	Priority      int16         `json:"priority"`
	Team          string        `json:"team"`
	FirstResponse time.Duration `json:"-"`
	NextResponse  time.Duration `json:"-"`
	Resolution    time.Duration `json:"-"`
	WarnBefore    time.Duration `json:"-"` // 0: 20 % of each target
	Calendar      string        `json:"calendar"`
	UpdatedAt     time.Time     `json:"updated_at"`
}

const policyColumns = `id, priority, team, first_response_ms, next_response_ms, resolution_ms, warn_before_ms, calendar, updated_at`

func scanPolicy(row pgx.Row) (*SLAPolicy, error) {
	var (
		p              SLAPolicy
		fr, nr, re, wb int64
	)
	if err := row.Scan(&p.ID, &p.Priority, &p.Team, &fr, &nr, &re, &wb, &p.Calendar, &p.UpdatedAt); err != nil {
		return nil, interpretError(err)
	}
	p.FirstResponse, p.NextResponse, p.Resolution, p.WarnBefore = ms(fr), ms(nr), ms(re), ms(wb)
	return &p, nil
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// UpsertSLAPolicy adds or replaces the policy of p's priority and team.
func (s *Store) UpsertSLAPolicy(ctx context.Context, p *SLAPolicy) (*SLAPolicy, error) {
	out, err := scanPolicy(s.db.QueryRow(ctx, `INSERT INTO sla_policies
		(priority, team, first_response_ms, next_response_ms, resolution_ms, warn_before_ms, calendar)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (priority, team) DO UPDATE SET first_response_ms = $3, next_response_ms = $4, resolution_ms = $5,
			warn_before_ms = $6, calendar = $7, updated_at = now()
		RETURNING `+policyColumns,
		p.Priority, p.Team, p.FirstResponse.Milliseconds(), p.NextResponse.Milliseconds(), p.Resolution.Milliseconds(),
		p.WarnBefore.Milliseconds(), p.Calendar))
	if err != nil {
		return nil, fmt.Errorf("sla policy: %w", err)
	}
	return out, nil
}

// DeleteSLAPolicy removes the policy of the priority and team; ErrNotFound
// for none.
func (s *Store) DeleteSLAPolicy(ctx context.Context, priority int16, team string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM sla_policies WHERE priority = $1 AND team = $2`, priority, team)
	if err != nil {
		return fmt.Errorf("delete sla policy: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("sla policy for priority %d: %w", priority, ErrNotFound)
	}
	return nil
}

// ListSLAPolicies returns every policy by priority, then team.
func (s *Store) ListSLAPolicies(ctx context.Context) ([]*SLAPolicy, error) {
	rows, err := s.db.Query(ctx, `SELECT `+policyColumns+` FROM sla_policies ORDER BY priority, team`)
	if err != nil {
		return nil, fmt.Errorf("sla policies: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*SLAPolicy, error) { return scanPolicy(row) })
	if err != nil {
		return nil, fmt.Errorf("sla policies: %w", err)
	}
	return list, nil
}

// AnySLAPolicy reads whether there is a policy at all.
func (b *Batch) AnySLAPolicy(into *bool) {
	b.b.Queue(`SELECT EXISTS (SELECT 1 FROM sla_policies)`).QueryRow(func(row pgx.Row) error { return row.Scan(into) })
}

// TicketsUnderPolicy returns the tickets, not closed, that a policy of
// the priority and team ("" for any) would time.
func (s *Store) TicketsUnderPolicy(ctx context.Context, priority int16, team string) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT id FROM tickets
		WHERE priority = $1 AND ($2 = '' OR team = $2) AND status <> 'closed' AND merged_into IS NULL ORDER BY id`, priority, team)
	if err != nil {
		return nil, fmt.Errorf("tickets under policy: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("tickets under policy: %w", err)
	}
	return ids, nil
}

// SLAHistory is what the clocks of a ticket count.
type SLAHistory struct {
	Ticket   Ticket
	Policy   *SLAPolicy // nil: no policy times this ticket
	Calendar *Calendar  // nil: the built-in 24x7
	// Customer is when each of the customer's messages came: when a
	// fetched mail reached its mailbox, else when it was filed; Filed is
	// when each was filed, in the same order (later than Customer only
	// for a fetched mail).
	Customer, Filed []time.Time
	Replies         []time.Time
	Statuses        []StatusAt
	Now             time.Time // the database's
}

// StatusAt is a ticket moved to a status.
type StatusAt struct {
	At time.Time
	To string
}

// LockSLAHistory locks the ticket and reads its history and policy in one
// trip: the ticket's own policy for its team first, else its priority's.
func (s *Store) LockSLAHistory(ctx context.Context, ticketID string) (*SLAHistory, error) {
	var (
		h SLAHistory
		b Batch
	)
	b.LockTicket(ticketID, &h.Ticket)
	b.b.Queue(`SELECT `+policyColumns+` FROM sla_policies p
		WHERE p.priority = (SELECT priority FROM tickets WHERE id = $1)
		  AND p.team IN ('', coalesce((SELECT team FROM tickets WHERE id = $1), ''))
		ORDER BY p.team DESC LIMIT 1`, ticketID).QueryRow(func(row pgx.Row) error {
		p, err := scanPolicy(row)
		if errors.Is(err, ErrNotFound) {
			return nil // no policy times it
		}
		h.Policy = p
		return err
	})
	b.b.Queue(`SELECT `+calendarColumns+` FROM calendars WHERE name = (
		SELECT p.calendar FROM sla_policies p
		WHERE p.priority = (SELECT priority FROM tickets WHERE id = $1)
		  AND p.team IN ('', coalesce((SELECT team FROM tickets WHERE id = $1), ''))
		ORDER BY p.team DESC LIMIT 1)`, ticketID).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[Calendar])
		if len(list) > 0 {
			h.Calendar = list[0]
		}
		return err
	})
	// The customer's messages wait for us; agents' replies answer them.
	// Automatic mail and the service's own messages count for neither.
	// A fetched mail counts from when it reached its mailbox (arrived_at).
	b.b.Queue(`SELECT coalesce(arrived_at, created_at) AS at, created_at, direction = 'inbound' FROM messages
		WHERE ticket_id = $1 AND ((direction = 'inbound' AND NOT auto_submitted) OR (direction = 'outbound' AND author LIKE 'agent:%'))
		ORDER BY at, id`, ticketID).Query(func(rows pgx.Rows) error {
		var (
			at, filed time.Time
			inbound   bool
		)
		_, err := pgx.ForEachRow(rows, []any{&at, &filed, &inbound}, func() error {
			if inbound {
				h.Customer, h.Filed = append(h.Customer, at), append(h.Filed, filed)
			} else {
				h.Replies = append(h.Replies, at)
			}
			return nil
		})
		return err
	})
	b.b.Queue(`SELECT created_at, to_value FROM ticket_events WHERE ticket_id = $1 AND what = 'status' AND to_value IS NOT NULL
		ORDER BY id`, ticketID).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[StatusAt])
		h.Statuses = list
		return err
	})
	b.Now(&h.Now)
	if err := s.Send(ctx, &b); err != nil {
		return nil, fmt.Errorf("sla history of %s: %w", ticketID, err)
	}
	return &h, nil
}

// TicketSLA is a ticket's clocks as last computed.
type TicketSLA struct {
	TicketID         string          `json:"-"`
	PolicyID         *int64          `json:"policy"`
	FirstResponseDue *time.Time      `json:"first_response_due"`
	NextResponseDue  *time.Time      `json:"next_response_due"`
	ResolutionDue    *time.Time      `json:"resolution_due"`
	Paused           bool            `json:"paused"`
	Breaches         json.RawMessage `json:"breaches"`
	Breached         bool            `json:"-"`
	ComputedAt       time.Time       `json:"computed_at"`
}

// UpsertTicketSLA keeps a ticket's clocks.
func (b *Batch) UpsertTicketSLA(s *TicketSLA) {
	b.b.Queue(`INSERT INTO ticket_slas (ticket_id, policy_id, first_response_due, next_response_due, resolution_due, paused, breaches, breached, computed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now())
		ON CONFLICT (ticket_id) DO UPDATE SET policy_id = $2, first_response_due = $3, next_response_due = $4, resolution_due = $5,
			paused = $6, breaches = $7, breached = $8, computed_at = now()`,
		s.TicketID, s.PolicyID, s.FirstResponseDue, s.NextResponseDue, s.ResolutionDue, s.Paused, s.Breaches, s.Breached)
}

// DeleteTicketSLA forgets a ticket's clocks: no policy times it now.
func (b *Batch) DeleteTicketSLA(ticketID string) {
	b.b.Queue(`DELETE FROM ticket_slas WHERE ticket_id = $1`, ticketID)
}

// GetTicketSLA returns a ticket's clocks; ErrNotFound when no policy
// times it.
func (s *Store) GetTicketSLA(ctx context.Context, ticketID string) (*TicketSLA, error) {
	t := TicketSLA{TicketID: ticketID}
	err := s.db.QueryRow(ctx, `SELECT policy_id, first_response_due, next_response_due, resolution_due, paused, breaches, breached, computed_at
		FROM ticket_slas WHERE ticket_id = $1`, ticketID).
		Scan(&t.PolicyID, &t.FirstResponseDue, &t.NextResponseDue, &t.ResolutionDue, &t.Paused, &t.Breaches, &t.Breached, &t.ComputedAt)
	if err != nil {
		return nil, fmt.Errorf("sla of %s: %w", ticketID, interpretError(err))
	}
	return &t, nil
}

// SLAAlert is a warning or breach to send once.
type SLAAlert struct {
	TicketID   string
	Target     string
	Kind       string // warning, breached
	ClockStart time.Time
	DueAt      time.Time
}

// ClaimSLAAlert records the alert unless it went out before; sent says
// whether this call is the one to send it.
func (s *Store) ClaimSLAAlert(ctx context.Context, a *SLAAlert) (sent bool, err error) {
	tag, err := s.db.Exec(ctx, `INSERT INTO sla_alerts (ticket_id, target, kind, clock_start, due_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT DO NOTHING`, a.TicketID, a.Target, a.Kind, a.ClockStart, a.DueAt)
	if err != nil {
		return false, fmt.Errorf("sla alert: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// SLADueSeconds returns, per target, the seconds until due of every
// ticket's running clock.
func (s *Store) SLADueSeconds(ctx context.Context) (map[string][]float64, error) {
	rows, err := s.db.Query(ctx, `SELECT t.target, extract(epoch FROM t.due - now())::float8 FROM ticket_slas s
		CROSS JOIN LATERAL (VALUES ('first_response', s.first_response_due), ('next_response', s.next_response_due),
			('resolution', s.resolution_due)) AS t (target, due)
		WHERE t.due IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("sla due: %w", err)
	}
	out := map[string][]float64{}
	var (
		target string
		secs   float64
	)
	_, err = pgx.ForEachRow(rows, []any{&target, &secs}, func() error {
		out[target] = append(out[target], secs)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sla due: %w", err)
	}
	return out, nil
}
