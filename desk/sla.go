package desk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"regexp"
	"sync"
	"time"

	"github.com/helpdesk-dev/helpdesk/sla"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Why an SLA setting is refused.
var (
	ErrInvalidSLA      = errors.New("invalid SLA setting")
	ErrUnknownCalendar = errors.New("no such calendar")
)

// calendarName is what a stored calendar may be called.
var calendarName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// The events of the clocks, for webhooks.
const (
	EventSLAWarning  = "sla.warning"
	EventSLABreached = "sla.breached"
)

// SLAAlerted is the data of sla.warning and sla.breached.
type SLAAlerted struct {
	TicketID string     `json:"ticket_id"`
	Target   sla.Target `json:"target"`
	DueAt    time.Time  `json:"due_at"`
	Priority *int16     `json:"priority"`
	Team     *string    `json:"team"`
	Assignee *string    `json:"assignee"`
}

// CalendarParams are a calendar to add or replace.
type CalendarParams struct {
	Name     string
	TimeZone string
	Hours    string   // as sla.ParseHours reads them
	Holidays []string // YYYY-MM-DD
}

// SetCalendar adds or replaces a calendar (admins), checked as the
// clocks will read it; the tickets timed by it are timed again.
func (d *Desk) SetCalendar(ctx context.Context, actor vocab.Actor, p *CalendarParams) (*store.Calendar, error) {
	if p.Name == sla.Builtin {
		return nil, fmt.Errorf("%w: %s is built in", ErrInvalidSLA, sla.Builtin)
	}
	if !calendarName.MatchString(p.Name) {
		return nil, fmt.Errorf("%w: calendar name %q: want lower-case letters, digits, - and _", ErrInvalidSLA, p.Name)
	}
	c, err := sla.NewCalendar(p.Name, p.TimeZone, p.Hours, p.Holidays)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSLA, err)
	}
	st := store.New(d.pool)
	stored := &store.Calendar{Name: c.Name, TimeZone: p.TimeZone, Hours: c.HoursString(), Holidays: c.Holidays}
	if err := st.UpsertCalendar(ctx, stored); err != nil {
		return nil, err
	}
	d.log.Info("calendar set", "calendar", c.Name, "by", actor, "time_zone", p.TimeZone, "hours", stored.Hours)
	policies, err := st.ListSLAPolicies(ctx)
	if err != nil {
		return nil, err
	}
	for _, pol := range policies {
		if pol.Calendar == c.Name {
			if err := d.retimeTickets(ctx, pol.Priority, pol.Team); err != nil {
				return nil, err
			}
		}
	}
	return st.GetCalendar(ctx, c.Name)
}

// Calendars lists the stored calendars; the built-in 24x7 is not stored.
func (d *Desk) Calendars(ctx context.Context) ([]*store.Calendar, error) {
	return store.New(d.pool).ListCalendars(ctx)
}

// calendar returns the calendar of the name, the built-in 24x7 for "".
func (d *Desk) calendar(ctx context.Context, name string) (*sla.Calendar, error) {
	if name == "" || name == sla.Builtin {
		return sla.TwentyFourSeven(), nil
	}
	c, err := store.New(d.pool).GetCalendar(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCalendar, name)
	} else if err != nil {
		return nil, err
	}
	return toCalendar(c)
}

func toCalendar(c *store.Calendar) (*sla.Calendar, error) {
	if c == nil {
		return sla.TwentyFourSeven(), nil
	}
	return sla.NewCalendar(c.Name, c.TimeZone, c.Hours, c.Holidays)
}

// Due returns when target of business time has passed after from, in the
// calendar of the name, in its time zone.
func (d *Desk) Due(ctx context.Context, calendar string, from time.Time, target time.Duration) (time.Time, error) {
	c, err := d.calendar(ctx, calendar)
	if err != nil {
		return time.Time{}, err
	}
	due, err := c.Add(from, target)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", ErrInvalidSLA, err)
	}
	return due.In(c.Location), nil
}

// maxTarget bounds a target: a year of business time.
const maxTarget = 366 * 24 * time.Hour

// SetSLAPolicy adds or replaces the policy of a priority and team
// (admins). The tickets it times now are timed again from their start.
func (d *Desk) SetSLAPolicy(ctx context.Context, actor vocab.Actor, p *store.SLAPolicy) (*store.SLAPolicy, error) {
	if p.Priority < 1 || p.Priority > 4 {
		return nil, fmt.Errorf("%w: priority %d: want 1 (most urgent) to 4", ErrInvalidSLA, p.Priority)
	}
	// Each target's own range first: a negative one is named as such, not
	// taken for one left unset.
	for _, t := range []time.Duration{p.FirstResponse, p.NextResponse, p.Resolution, p.WarnBefore} {
		if t < 0 || t > maxTarget || t%time.Second != 0 {
			return nil, fmt.Errorf("%w: %s: a target is whole seconds from 1s to %s", ErrInvalidSLA, t, maxTarget)
		}
	}
	if p.FirstResponse == 0 && p.NextResponse == 0 && p.Resolution == 0 {
		return nil, fmt.Errorf("%w: set at least one of first response, next response and resolution", ErrInvalidSLA)
	}
	if p.Calendar == "" {
		p.Calendar = sla.Builtin
	}
	if _, err := d.calendar(ctx, p.Calendar); err != nil {
		return nil, err
	}
	st := store.New(d.pool)
	if p.Team != "" {
		if err := requireTeam(ctx, st, p.Team); err != nil {
			return nil, err
		}
	}
	saved, err := st.UpsertSLAPolicy(ctx, p)
	if err != nil {
		return nil, err
	}
	d.slaOn.set(true)
	d.log.Info("sla policy set", "priority", saved.Priority, "team", saved.Team, "by", actor,
		"first_response", saved.FirstResponse, "next_response", saved.NextResponse, "resolution", saved.Resolution, "calendar", saved.Calendar)
	return saved, d.retimeTickets(ctx, saved.Priority, saved.Team)
}

// DeleteSLAPolicy removes the policy of a priority and team (admins); the
// tickets it timed are timed by what remains, or not at all.
func (d *Desk) DeleteSLAPolicy(ctx context.Context, actor vocab.Actor, priority int16, team string) error {
	if err := store.New(d.pool).DeleteSLAPolicy(ctx, priority, team); err != nil {
		return err
	}
	d.log.Info("sla policy deleted", "priority", priority, "team", team, "by", actor)
	return d.retimeTickets(ctx, priority, team)
}

// SLAPolicies lists the policies.
func (d *Desk) SLAPolicies(ctx context.Context) ([]*store.SLAPolicy, error) {
	return store.New(d.pool).ListSLAPolicies(ctx)
}

// retimeTickets queues a look at the clocks of every ticket a policy of
// the priority and team times.
func (d *Desk) retimeTickets(ctx context.Context, priority int16, team string) error {
	ids, err := store.New(d.pool).TicketsUnderPolicy(ctx, priority, team)
	if err != nil {
		return err
	}
	for start := 0; start < len(ids); start += 500 {
		batch := ids[start:min(start+500, len(ids))]
		err := store.Run(ctx, d.pool, func(tx *store.Tx) error {
			for _, id := range batch {
				if _, err := d.jobs.EnqueueSLATx(ctx, tx, id, time.Time{}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// slaSwitch caches whether any policy exists, so that a deployment
// without SLAs pays nothing for them: it is read again at most every
// recheck (Config.SLARecheck), and set at once when this process adds a
// policy.
type slaSwitch struct {
	recheck time.Duration
	mu      sync.Mutex
	on      bool
	checked time.Time
}

const defaultSLARecheck = 5 * time.Second

func (s *slaSwitch) set(on bool) {
	s.mu.Lock()
	s.on, s.checked = on, time.Now()
	s.mu.Unlock()
}

// get returns the cached answer and whether it is fresh.
func (s *slaSwitch) get() (on, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.on, !s.checked.IsZero() && time.Since(s.checked) < s.recheck
}

// retimeTx asks, once per transaction and ticket, for the ticket's
// clocks to be computed again after the transaction's changes: a job
// queued just before the commit. When the switch's answer is old, the
// question rides with the transaction's next trip.
func (d *Desk) retimeTx(tx *store.Tx, ticketID string) {
	on, fresh := d.slaOn.get()
	if fresh && !on {
		return
	}
	var exists *bool
	if !fresh {
		exists = new(bool)
		tx.Later(func(b *store.Batch) { b.AnySLAPolicy(exists) })
	}
	tx.BeforeCommit("sla:"+ticketID, func(ctx context.Context) error {
		if exists != nil {
			d.slaOn.set(*exists)
			if !*exists {
				return nil
			}
		}
		_, err := d.jobs.EnqueueSLATx(ctx, tx, ticketID, time.Time{})
		return err
	})
}

// SLABreach is a breach as the ticket shows it.
type SLABreach struct {
	Target     sla.Target `json:"target"`
	DueAt      time.Time  `json:"due_at"`
	AnsweredAt *time.Time `json:"met_at"` // when the promise was kept late; null while it is not
}

// Retimed is what a look at a ticket's clocks did.
type Retimed struct {
	Breaches []SLAAlerted // the breaches sent by this look
	Warnings []SLAAlerted // the warnings sent by this look
	Next     time.Time    // when the clocks are looked at again; zero for never
}

// RetimeTicket computes a ticket's clocks from its history and policy,
// keeps them, sends each warning and breach whose time has come (once:
// sla_alerts holds what went out), and queues the next look. A warning
// or breach from before the policy was set, or from before the desk had
// the fetched mail that started its clock, is shown but not sent.
func (d *Desk) RetimeTicket(ctx context.Context, ticketID string) (out *Retimed, err error) {
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		out = &Retimed{}
		st := tx.Store()
		h, err := st.LockSLAHistory(ctx, ticketID)
		if err != nil {
			return err
		}
		if h.Policy == nil || h.Ticket.MergedInto != nil {
			tx.Later(func(b *store.Batch) { b.DeleteTicketSLA(ticketID) })
			return nil
		}
		cal, err := toCalendar(h.Calendar)
		if err != nil {
			return err
		}
		history := historyOf(h)
		state, err := sla.Compute(policyOf(h.Policy), cal, history)
		if err != nil {
			return err
		}
		kept := &store.TicketSLA{TicketID: ticketID, PolicyID: &h.Policy.ID}
		for _, target := range sla.Targets {
			c := state.Current(target)
			if c == nil {
				continue
			}
			switch target {
			case sla.FirstResponse:
				kept.FirstResponseDue = c.Due
			case sla.NextResponse:
				kept.NextResponseDue = c.Due
			case sla.Resolution:
				kept.ResolutionDue, kept.Paused = c.Due, c.Paused
			}
		}
		breaches := []SLABreach{}
		for _, c := range state.Breaches(h.Now) {
			b := SLABreach{Target: c.Target, DueAt: *c.BreachAt}
			if c.Met != nil && c.Met.After(*c.BreachAt) {
				b.AnsweredAt = c.Met
			}
			breaches = append(breaches, b)
		}
		kept.Breached = len(breaches) > 0
		if kept.Breaches, err = json.Marshal(breaches); err != nil {
			return err
		}
		tx.Later(func(b *store.Batch) { b.UpsertTicketSLA(kept) })

		for _, c := range state.Clocks {
			for _, a := range []struct {
				kind string
				at   *time.Time
			}{{"warning", c.WarnAt}, {"breached", c.BreachAt}} {
				// What came before the policy, or before the desk had the
				// mail that started the clock (a backlog fetched from a
				// mailbox), is shown, not sent: it is news to nobody.
				if a.at == nil || a.at.After(h.Now) || a.at.Before(h.Policy.UpdatedAt.Add(-time.Second)) ||
					a.at.Before(filedAt(h, history.Opened, c.Start)) {
					continue
				}
				if a.kind == "warning" && (!c.Running || !c.BreachAt.After(h.Now)) {
					continue // answered, paused or late already: nothing to warn of
				}
				due := *c.BreachAt
				sent, err := st.ClaimSLAAlert(ctx, &store.SLAAlert{TicketID: ticketID, Target: string(c.Target), Kind: a.kind,
					ClockStart: c.Start, DueAt: due})
				if err != nil {
					return err
				}
				if !sent {
					continue
				}
				alert := SLAAlerted{TicketID: ticketID, Target: c.Target, DueAt: due, Priority: h.Ticket.Priority, Team: h.Ticket.Team,
					Assignee: h.Ticket.Assignee}
				if err := d.slaAlertTx(ctx, tx, &h.Ticket, a.kind, alert, cal); err != nil {
					return err
				}
				if a.kind == "warning" {
					out.Warnings = append(out.Warnings, alert)
				} else {
					out.Breaches = append(out.Breaches, alert)
				}
			}
		}
		if out.Next = state.Next(h.Now); !out.Next.IsZero() {
			if _, err := d.jobs.EnqueueSLATx(ctx, tx, ticketID, out.Next); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sla of %s: %w", ticketID, err)
	}
	for _, a := range out.Breaches {
		d.log.Warn("sla breached", "ticket_id", a.TicketID, "target", a.Target, "due_at", a.DueAt)
	}
	return out, nil
}

// slaAlertTx tells of a warning or a breach: an event, a webhook event, a
// mail to the assignee (else the team) and, for a breach, to the team's
// admins too.
func (d *Desk) slaAlertTx(ctx context.Context, tx *store.Tx, t *store.Ticket, kind string, a SLAAlerted, cal *sla.Calendar) error {
	what, eventType, word := "sla.warning", EventSLAWarning, "SLA warning"
	if kind == "breached" {
		what, eventType, word = "sla.breached", EventSLABreached, "SLA breached"
	}
	event(tx, t.ID, vocab.System, what, "", fmt.Sprintf("%s due %s", a.Target, a.DueAt.UTC().Format(time.RFC3339)))
	emit(tx, eventType, a)
	var (
		agents []store.AgentToMail
		thread agentThread
		reads  store.Batch
	)
	reads.AgentsToMail(t.ID, kind == "breached", &agents)
	thread.read(&reads, t.ID)
	if err := tx.Store().Send(ctx, &reads); err != nil {
		return err
	}
	label := map[sla.Target]string{sla.FirstResponse: "first response", sla.NextResponse: "next response", sla.Resolution: "resolution"}[a.Target]
	due := a.DueAt.In(cal.Location).Format("Mon 2 Jan 15:04 MST")
	subject := fmt.Sprintf("[%s] %s: %s due %s", t.ID, word, label, due)
	lead := fmt.Sprintf("The %s of %s %q is due %s.", label, t.ID, t.Subject, due)
	if kind == "breached" {
		subject = fmt.Sprintf("[%s] %s: %s was due %s", t.ID, word, label, due)
		lead = fmt.Sprintf("The %s of %s %q was due %s and is late.", label, t.ID, t.Subject, due)
	}
	text := lead + "\n\n" + d.howToAnswer(t)
	htmlBody := "<p>" + html.EscapeString(lead) + "</p>"
	for _, ag := range agents {
		if err := d.writeAgentMailTx(ctx, tx, t, ag, thread, subject, text, htmlBody); err != nil {
			return err
		}
	}
	return nil
}

// TicketSLA returns a ticket's clocks as last computed; nil when no
// policy times it.
func (d *Desk) TicketSLA(ctx context.Context, ticketID string) (*store.TicketSLA, error) {
	s, err := store.New(d.pool).GetTicketSLA(ctx, ticketID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return s, err
}

func policyOf(p *store.SLAPolicy) sla.Policy {
	return sla.Policy{FirstResponse: p.FirstResponse, NextResponse: p.NextResponse, Resolution: p.Resolution, WarnBefore: p.WarnBefore}
}

// historyOf is the ticket's history as its clocks count it. A ticket
// opened by a fetched mail opened when the mail reached its mailbox: the
// earliest fetched mail (one that came before it was filed), if it came
// before the ticket was.
func historyOf(h *store.SLAHistory) sla.History {
	out := sla.History{Opened: h.Ticket.CreatedAt, Customer: h.Customer, Replies: h.Replies}
	for i, at := range h.Customer {
		if at.Before(h.Filed[i]) {
			if at.Before(out.Opened) {
				out.Opened = at
			}
			break
		}
	}
	for _, s := range h.Statuses {
		out.Statuses = append(out.Statuses, sla.StatusChange{At: s.At, To: sla.Status(s.To)})
	}
	return out
}

// filedAt is when the desk had what started a clock that started at
// start: the ticket, or the customer's message, as filed. A mail fetched
// late started its clocks when it reached its mailbox, before that.
func filedAt(h *store.SLAHistory, opened, start time.Time) time.Time {
	if start.Equal(opened) {
		return h.Ticket.CreatedAt
	}
	for i, at := range h.Customer {
		if at.Equal(start) {
			return h.Filed[i]
		}
	}
	return start
}
