package sla

import (
	"slices"
	"time"
)

// Target is one promise of a policy.
type Target string

// The targets a policy may set.
const (
	FirstResponse Target = "first_response" // the first agent's reply after the ticket opens
	NextResponse  Target = "next_response"  // an agent's reply after each customer message that waits for us
	Resolution    Target = "resolution"     // solved, not counting the time it is pending
)

// Targets lists them in the order they are shown.
var Targets = []Target{FirstResponse, NextResponse, Resolution}

// Policy is the targets of a priority (and maybe a team); a zero target
// is not promised.
type Policy struct {
	FirstResponse, NextResponse, Resolution time.Duration
	// WarnBefore is how long before a due time the warning goes; zero is
	// 20 % of the target.
	WarnBefore time.Duration
}

// Of returns the policy's target t.
func (p Policy) Of(t Target) time.Duration {
	switch t {
	case FirstResponse:
		return p.FirstResponse
	case NextResponse:
		return p.NextResponse
	default:
		return p.Resolution
	}
}

// Lead is how long before the target's due time its warning goes: never
// before the clock starts.
func (p Policy) Lead(target time.Duration) time.Duration {
	lead := p.WarnBefore
	if lead <= 0 {
		lead = target / 5
	}
	return min(lead, target)
}

// Status is a ticket's status as the clocks see it.
type Status string

// The statuses that stop or pause a clock; any other runs it.
const (
	Pending Status = "pending" // pauses resolution
	Solved  Status = "solved"  // stops every clock
	Closed  Status = "closed"  // stops every clock
)

// History is what happened to a ticket that the clocks count: each list
// in order of time.
type History struct {
	Opened   time.Time
	Customer []time.Time // the customer's messages, automatic replies left out
	Replies  []time.Time // agents' replies to the customer (not notes, not the service's own)
	Statuses []StatusChange
}

// StatusChange is a ticket moved to a status.
type StatusChange struct {
	At time.Time
	To Status
}

// Clock is one run of a target: the first response, one wait for a next
// response, or the resolution.
type Clock struct {
	Target Target
	Start  time.Time // when this run began: the key of its warning and breach
	// Due is when the target is breached if nothing stops the clock
	// first; nil while the clock is paused or after it stopped.
	Due *time.Time
	// WarnAt and BreachAt are when the clock reached its warning and its
	// target, if it has or will without a stop (they may be in the
	// future); nil if it stopped before.
	WarnAt, BreachAt *time.Time
	Met              *time.Time // when the promise was kept (an agent's reply, the ticket solved)
	Running, Paused  bool
}

// State is all the clocks of a ticket under a policy.
type State struct {
	Clocks []Clock
}

// Current returns the latest clock of the target, if there is one.
func (s State) Current(t Target) *Clock {
	for i := len(s.Clocks) - 1; i >= 0; i-- {
		if s.Clocks[i].Target == t {
			return &s.Clocks[i]
		}
	}
	return nil
}

// Breaches are the clocks that reached their target by now.
func (s State) Breaches(now time.Time) []Clock {
	var out []Clock
	for _, c := range s.Clocks {
		if c.BreachAt != nil && !c.BreachAt.After(now) {
			out = append(out, c)
		}
	}
	return out
}

// Next is the earliest warning or breach after now, zero for none: when
// the clocks must be looked at again.
func (s State) Next(now time.Time) time.Time {
	var next time.Time
	for _, c := range s.Clocks {
		for _, at := range []*time.Time{c.WarnAt, c.BreachAt} {
			if at != nil && at.After(now) && (next.IsZero() || at.Before(next)) {
				next = *at
			}
		}
	}
	return next
}

// span is a stretch of time during which a clock ran; an open one has a
// zero end.
type span struct{ from, to time.Time }

// Compute replays a ticket's history under the policy and the calendar.
// Everything is counted from when it happened, so a changed priority or
// team recomputes from the ticket's start, not from now. A solved or
// closed ticket stops every clock; pending pauses only resolution.
func Compute(p Policy, c *Calendar, h History) (State, error) {
	var s State
	// stops are the times the ticket was solved or closed; runs the
	// stretches it was neither pending, solved nor closed.
	var stops []time.Time
	runs := []span{{from: h.Opened}}
	for _, sc := range h.Statuses {
		open := &runs[len(runs)-1]
		running := open.to.IsZero()
		switch sc.To {
		case Solved, Closed:
			stops = append(stops, sc.At)
			fallthrough
		case Pending:
			if running {
				open.to = sc.At
			}
		default:
			if !running {
				runs = append(runs, span{from: sc.At})
			}
		}
	}
	stoppedAfter := func(t time.Time) *time.Time {
		for _, at := range stops {
			if !at.Before(t) {
				return &at
			}
		}
		return nil
	}

	// The first response, and a next response for each wait.
	if p.FirstResponse > 0 {
		var met *time.Time
		if len(h.Replies) > 0 {
			met = &h.Replies[0]
		}
		if err := s.add(p, c, FirstResponse, h.Opened, met, stoppedAfter(h.Opened)); err != nil {
			return s, err
		}
	}
	if p.NextResponse > 0 && len(h.Replies) > 0 {
		var waitFrom *time.Time
		events := mergeTimes(h.Customer, h.Replies[1:])
		for _, e := range events {
			switch {
			case e.customer && e.at.After(h.Replies[0]) && waitFrom == nil:
				at := e.at
				waitFrom = &at
			case !e.customer && waitFrom != nil:
				met := e.at
				if err := s.add(p, c, NextResponse, *waitFrom, &met, stoppedAfter(*waitFrom)); err != nil {
					return s, err
				}
				waitFrom = nil
			}
		}
		if waitFrom != nil {
			if err := s.add(p, c, NextResponse, *waitFrom, nil, stoppedAfter(*waitFrom)); err != nil {
				return s, err
			}
		}
	}

	// Resolution: the stretches it ran, counted together.
	if p.Resolution > 0 {
		clock := Clock{Target: Resolution, Start: h.Opened}
		last := runs[len(runs)-1]
		clock.Running = last.to.IsZero()
		clock.Paused = !clock.Running && len(h.Statuses) > 0 && h.Statuses[len(h.Statuses)-1].To == Pending
		if !clock.Running && !clock.Paused {
			at := h.Statuses[len(h.Statuses)-1].At
			clock.Met = &at
		}
		var err error
		if clock.BreachAt, err = reach(c, runs, p.Resolution); err != nil {
			return s, err
		}
		if clock.WarnAt, err = reach(c, runs, p.Resolution-p.Lead(p.Resolution)); err != nil {
			return s, err
		}
		if clock.Running {
			clock.Due = clock.BreachAt
		}
		if clock.Met != nil && clock.BreachAt != nil && clock.BreachAt.After(*clock.Met) {
			clock.BreachAt = nil
		}
		s.Clocks = append(s.Clocks, clock)
	}
	return s, nil
}

// add appends a response clock from start that stops at met or stop,
// whichever comes first.
func (s *State) add(p Policy, c *Calendar, t Target, start time.Time, met, stop *time.Time) error {
	clock := Clock{Target: t, Start: start, Met: met}
	run := span{from: start}
	switch {
	case met != nil && (stop == nil || !stop.Before(*met)):
		run.to = *met
	case stop != nil:
		run.to = *stop
		if met == nil {
			clock.Met = stop // solved without an answer: nothing is owed any more
		}
	}
	clock.Running = run.to.IsZero()
	target := p.Of(t)
	var err error
	if clock.BreachAt, err = reach(c, []span{run}, target); err != nil {
		return err
	}
	if clock.WarnAt, err = reach(c, []span{run}, target-p.Lead(target)); err != nil {
		return err
	}
	if clock.Running {
		clock.Due = clock.BreachAt
	}
	s.Clocks = append(s.Clocks, clock)
	return nil
}

// reach returns the instant at which the clock, running during runs,
// has counted amount of business time; nil if the runs end before. The
// last run may be open.
func reach(c *Calendar, runs []span, amount time.Duration) (*time.Time, error) {
	for _, r := range runs {
		if r.to.IsZero() {
			at, err := c.Add(r.from, amount)
			return &at, err
		}
		in := c.Between(r.from, r.to)
		if amount < in { // a reply exactly at the due time keeps the promise
			at, err := c.Add(r.from, amount)
			return &at, err
		}
		amount -= in
	}
	return nil, nil
}

type timed struct {
	at       time.Time
	customer bool
}

// mergeTimes lists the customer's messages and the replies in order of
// time; at the same instant the reply comes first.
func mergeTimes(customer, replies []time.Time) []timed {
	out := make([]timed, 0, len(customer)+len(replies))
	for _, t := range customer {
		out = append(out, timed{t, true})
	}
	for _, t := range replies {
		out = append(out, timed{t, false})
	}
	slices.SortStableFunc(out, func(a, b timed) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.customer == b.customer {
			return 0
		}
		if a.customer {
			return 1
		}
		return -1
	})
	return out
}
