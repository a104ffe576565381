package sla_test

import (
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/sla"
)

// t0 is a Monday 09:00 UTC; the clocks below are minutes after it.
var t0 = time.Date(2026, 1, 12, 9, 0, 0, 0, time.UTC)

func after(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

func mins(ns ...int) []time.Time {
	out := make([]time.Time, len(ns))
	for i, n := range ns {
		out[i] = after(n)
	}
	return out
}

func compute(t *testing.T, p sla.Policy, c *sla.Calendar, h sla.History) sla.State {
	t.Helper()
	s, err := sla.Compute(p, c, h)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func equal(a *time.Time, b time.Time) bool { return a != nil && a.Equal(b) }

var hour = sla.Policy{FirstResponse: time.Hour, NextResponse: time.Hour, Resolution: 4 * time.Hour}

func TestClocks(t *testing.T) {
	t.Parallel()
	always := sla.TwentyFourSeven()

	t.Run("AFirstResponseInTimeIsMetWithoutABreach", func(t *testing.T) {
		t.Parallel()
		s := compute(t, hour, always, sla.History{Opened: after(0), Customer: mins(0), Replies: mins(30)})
		fr := s.Current(sla.FirstResponse)
		if fr.Running || !equal(fr.Met, after(30)) || fr.BreachAt != nil || fr.WarnAt != nil || len(s.Breaches(after(200))) != 0 {
			t.Errorf("first response %+v, breaches %v", fr, s.Breaches(after(200)))
		}
	})

	t.Run("ATicketLeftAloneWarnsAtFourFifthsAndBreachesAtTheTarget", func(t *testing.T) {
		t.Parallel()
		s := compute(t, hour, always, sla.History{Opened: after(0), Customer: mins(0)})
		fr := s.Current(sla.FirstResponse)
		if !fr.Running || !equal(fr.Due, after(60)) || !equal(fr.WarnAt, after(48)) || !equal(fr.BreachAt, after(60)) {
			t.Errorf("first response %+v", fr)
		}
		if got := s.Next(after(0)); !got.Equal(after(48)) {
			t.Errorf("next look at %s, want the warning at +48m", got)
		}
		if got := s.Next(after(48)); !got.Equal(after(60)) {
			t.Errorf("after the warning the next look is at %s, want the breach at +60m", got)
		}
		if len(s.Breaches(after(59))) != 0 || len(s.Breaches(after(60))) != 1 {
			t.Errorf("breaches at 59m %v and 60m %v", s.Breaches(after(59)), s.Breaches(after(60)))
		}
	})

	t.Run("AnAnswerAfterTheDueTimeIsStillABreach", func(t *testing.T) {
		t.Parallel()
		s := compute(t, hour, always, sla.History{Opened: after(0), Customer: mins(0), Replies: mins(90)})
		if fr := s.Current(sla.FirstResponse); !equal(fr.BreachAt, after(60)) || !equal(fr.Met, after(90)) {
			t.Errorf("first response %+v", fr)
		}
	})

	t.Run("AnAnswerExactlyAtTheDueTimeKeepsThePromise", func(t *testing.T) {
		t.Parallel()
		s := compute(t, hour, always, sla.History{Opened: after(0), Customer: mins(0), Replies: mins(60)})
		if fr := s.Current(sla.FirstResponse); fr.BreachAt != nil {
			t.Errorf("first response %+v", fr)
		}
	})

	t.Run("EachCustomerMessageThatWaitsStartsANextResponseClock", func(t *testing.T) {
		t.Parallel()
		// Replied at 10; the customer writes at 20 and 25 (one wait, from
		// 20); replied at 50; writes at 100 and nobody answers.
		s := compute(t, hour, always, sla.History{Opened: after(0), Customer: mins(0, 20, 25, 100), Replies: mins(10, 50)})
		var next []sla.Clock
		for _, c := range s.Clocks {
			if c.Target == sla.NextResponse {
				next = append(next, c)
			}
		}
		if len(next) != 2 || !next[0].Start.Equal(after(20)) || !equal(next[0].Met, after(50)) || next[0].BreachAt != nil ||
			!next[1].Start.Equal(after(100)) || !next[1].Running || !equal(next[1].Due, after(160)) {
			t.Errorf("next response clocks %+v", next)
		}
	})

	t.Run("NoNextResponseClockBeforeTheFirstResponse", func(t *testing.T) {
		t.Parallel()
		s := compute(t, hour, always, sla.History{Opened: after(0), Customer: mins(0, 5, 10)})
		if c := s.Current(sla.NextResponse); c != nil {
			t.Errorf("next response %+v before anyone answered", c)
		}
	})

	t.Run("PendingPausesResolutionAndAReopenResumesIt", func(t *testing.T) {
		t.Parallel()
		// Open 0–60, pending 60–180, open again from 180: 60 of the 240
		// minutes are used, so it is due at 180+180 = 360.
		h := sla.History{Opened: after(0), Customer: mins(0, 180), Replies: mins(60),
			Statuses: []sla.StatusChange{{At: after(60), To: sla.Pending}, {At: after(180), To: "open"}}}
		paused := compute(t, hour, always, sla.History{Opened: h.Opened, Customer: mins(0), Replies: h.Replies, Statuses: h.Statuses[:1]})
		if r := paused.Current(sla.Resolution); !r.Paused || r.Due != nil || r.BreachAt != nil {
			t.Errorf("while pending: %+v", r)
		}
		if got := paused.Next(after(61)); !got.IsZero() {
			t.Errorf("a paused clock wakes at %s", got)
		}
		r := compute(t, hour, always, h).Current(sla.Resolution)
		if !r.Running || !equal(r.Due, after(360)) || !equal(r.WarnAt, after(312)) {
			t.Errorf("after the reopen: %+v, want due at +360m", r)
		}
	})

	t.Run("SolvedStopsEveryClock", func(t *testing.T) {
		t.Parallel()
		// Solved at 30 without a reply: nothing runs on (chatwoot#10178).
		s := compute(t, hour, always, sla.History{Opened: after(0), Customer: mins(0),
			Statuses: []sla.StatusChange{{At: after(30), To: sla.Solved}}})
		for _, c := range s.Clocks {
			if c.Running || c.Due != nil || c.BreachAt != nil {
				t.Errorf("%s after solved: %+v", c.Target, c)
			}
		}
		if got := s.Next(after(30)); !got.IsZero() {
			t.Errorf("a solved ticket wakes at %s", got)
		}
	})

	t.Run("AReopenAfterSolvedResumesResolutionWithWhatWasUsed", func(t *testing.T) {
		t.Parallel()
		s := compute(t, hour, always, sla.History{Opened: after(0), Customer: mins(0, 500), Replies: mins(10),
			Statuses: []sla.StatusChange{{At: after(200), To: sla.Solved}, {At: after(500), To: "open"}}})
		if r := s.Current(sla.Resolution); !r.Running || !equal(r.Due, after(540)) {
			t.Errorf("resolution %+v, want due at +540m: 200 used, 40 left", r)
		}
		if c := s.Current(sla.NextResponse); !c.Running || !equal(c.Due, after(560)) {
			t.Errorf("the customer's message at 500 waits for a next response: %+v", c)
		}
	})

	t.Run("ClocksRunOnlyInBusinessHours", func(t *testing.T) {
		t.Parallel()
		office := calendar(t, "UTC", "Mon-Fri 09:00-17:00")
		// Opened Friday 16:30 with a 1h first response: due Monday 09:30.
		friday := time.Date(2026, 1, 16, 16, 30, 0, 0, time.UTC)
		s := compute(t, sla.Policy{FirstResponse: time.Hour, WarnBefore: 10 * time.Minute}, office, sla.History{Opened: friday})
		fr := s.Current(sla.FirstResponse)
		if !equal(fr.Due, time.Date(2026, 1, 19, 9, 30, 0, 0, time.UTC)) || !equal(fr.WarnAt, time.Date(2026, 1, 19, 9, 20, 0, 0, time.UTC)) {
			t.Errorf("first response %+v", fr)
		}
	})

	t.Run("APriorityChangeRecomputesFromTheStart", func(t *testing.T) {
		t.Parallel()
		h := sla.History{Opened: after(0), Customer: mins(0)}
		urgent := compute(t, sla.Policy{FirstResponse: 15 * time.Minute}, always, h).Current(sla.FirstResponse)
		if !equal(urgent.Due, after(15)) {
			t.Errorf("due %v, want +15m from the opening, whenever the priority changed", urgent.Due)
		}
	})

	t.Run("TheWarningLeadIsAtMostTheTarget", func(t *testing.T) {
		t.Parallel()
		s := compute(t, sla.Policy{FirstResponse: 10 * time.Minute, WarnBefore: time.Hour}, always, sla.History{Opened: after(0)})
		if fr := s.Current(sla.FirstResponse); !equal(fr.WarnAt, after(0)) {
			t.Errorf("warn at %v, want the opening", fr.WarnAt)
		}
	})
}
