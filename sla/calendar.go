// Package sla is the arithmetic of service-level clocks: business-hour calendars and the due times, warnings and breaches of a ticket's targets.
//
// It is a package of its own, below desk and free of the database,
// because calendar arithmetic is where every helpdesk has shipped bugs
// (daylight saving, midnight, holidays, clocks that run after a ticket
// is solved): here it is pure functions of times, tested as tables.
package sla

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even on a machine without zoneinfo
)

// Interval is a span of business hours in a day, in minutes after
// midnight wall-clock time: [Start, End), End at most 24:00.
type Interval struct{ Start, End int }

// Calendar is when the clocks run: weekly business hours in a time zone,
// minus holidays. The zero Calendar is not usable; see TwentyFourSeven
// and NewCalendar.
type Calendar struct {
	Name     string
	Location *time.Location
	Week     [7][]Interval // by time.Weekday
	Holidays []string      // YYYY-MM-DD in Location, sorted
	always   bool
}

// Builtin is the name of the calendar that never stops.
const Builtin = "24x7"

// TwentyFourSeven is the built-in calendar: every hour of every day, UTC.
func TwentyFourSeven() *Calendar {
	c := &Calendar{Name: Builtin, Location: time.UTC, always: true}
	for d := range c.Week {
		c.Week[d] = []Interval{{0, 24 * 60}}
	}
	return c
}

// ErrNoHours is a calendar whose clocks would never run.
var ErrNoHours = errors.New("the calendar has no business hours")

// NewCalendar checks and makes a calendar: tz an IANA name such as
// Europe/Berlin, hours as ParseHours reads them, holidays as YYYY-MM-DD.
func NewCalendar(name, tz, hours string, holidays []string) (*Calendar, error) {
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" || tz == "Local" {
		return nil, fmt.Errorf("time zone %q: want an IANA name such as Europe/Berlin or UTC", tz)
	}
	week, err := ParseHours(hours)
	if err != nil {
		return nil, err
	}
	c := &Calendar{Name: name, Location: loc, Week: week}
	for _, h := range holidays {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, err := time.Parse(time.DateOnly, h); err != nil {
			return nil, fmt.Errorf("holiday %q: want a date such as 2026-12-25", h)
		}
		c.Holidays = append(c.Holidays, h)
	}
	slices.Sort(c.Holidays)
	c.Holidays = slices.Compact(c.Holidays)
	return c, nil
}

var dayNames = []string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// ParseHours reads weekly hours: groups separated by ";", each days and
// intervals, as "Mon-Fri 09:00-12:00,13:00-17:00; Sat 10:00-14:00". Days
// are Mon … Sun, a range (Mon-Fri, Fri-Mon wraps) or a list (Mon,Wed).
// An interval ends after it starts and at 24:00 at the latest; one across
// midnight is written as two ("Fri 22:00-24:00; Sat 00:00-06:00").
func ParseHours(s string) ([7][]Interval, error) {
	var week [7][]Interval
	found := false
	for _, group := range strings.Split(s, ";") {
		group = strings.TrimSpace(group)
		if group == "" {
			continue
		}
		daysText, spans, ok := strings.Cut(group, " ")
		if !ok {
			return week, fmt.Errorf("hours %q: want days and intervals, such as \"Mon-Fri 09:00-17:00\"", group)
		}
		days, err := parseDays(daysText)
		if err != nil {
			return week, err
		}
		for _, span := range strings.Split(spans, ",") {
			iv, err := parseInterval(strings.TrimSpace(span))
			if err != nil {
				return week, err
			}
			for _, d := range days {
				week[d] = append(week[d], iv)
			}
			found = true
		}
	}
	if !found {
		return week, fmt.Errorf("hours %q: %w", s, ErrNoHours)
	}
	for d := range week {
		slices.SortFunc(week[d], func(a, b Interval) int { return a.Start - b.Start })
		for i := 1; i < len(week[d]); i++ {
			if week[d][i].Start < week[d][i-1].End {
				return week, fmt.Errorf("hours %q: intervals overlap on %s", s, dayNames[d])
			}
		}
	}
	return week, nil
}

func parseDays(s string) ([]time.Weekday, error) {
	day := func(name string) (time.Weekday, error) {
		for i, n := range dayNames {
			if strings.EqualFold(n, name) {
				return time.Weekday(i), nil
			}
		}
		return 0, fmt.Errorf("day %q: want Mon, Tue, Wed, Thu, Fri, Sat or Sun", name)
	}
	var out []time.Weekday
	for _, part := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(part, "-")
		a, err := day(from)
		if err != nil {
			return nil, err
		}
		if !isRange {
			out = append(out, a)
			continue
		}
		b, err := day(to)
		if err != nil {
			return nil, err
		}
		for d := a; ; d = (d + 1) % 7 {
			out = append(out, d)
			if d == b {
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func parseInterval(s string) (Interval, error) {
	from, to, ok := strings.Cut(s, "-")
	a, errA := parseClock(from)
	b, errB := parseClock(to)
	if !ok || errA != nil || errB != nil || b <= a {
		return Interval{}, fmt.Errorf("interval %q: want HH:MM-HH:MM within a day, ending after it starts (24:00 at the latest)", s)
	}
	return Interval{a, b}, nil
}

func parseClock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, errH := strconv.Atoi(h)
	mm, errM := strconv.Atoi(m)
	if !ok || len(h) != 2 || len(m) != 2 || errH != nil || errM != nil || hh < 0 || mm < 0 || mm > 59 || hh*60+mm > 24*60 {
		return 0, errors.New("bad clock time")
	}
	return hh*60 + mm, nil
}

// HoursString writes the week back as ParseHours reads it, days in a row
// with the same hours as one range ("Mon-Fri 09:00-17:00; Sat 10:00-14:00").
func (c *Calendar) HoursString() string {
	order := []time.Weekday{1, 2, 3, 4, 5, 6, 0}
	spans := func(d time.Weekday) string {
		out := make([]string, len(c.Week[d]))
		for i, iv := range c.Week[d] {
			out[i] = fmt.Sprintf("%02d:%02d-%02d:%02d", iv.Start/60, iv.Start%60, iv.End/60, iv.End%60)
		}
		return strings.Join(out, ",")
	}
	var groups []string
	for i := 0; i < len(order); {
		d := order[i]
		j := i
		for j+1 < len(order) && spans(order[j+1]) == spans(d) {
			j++
		}
		if len(c.Week[d]) > 0 {
			days := dayNames[d]
			if j > i {
				days += "-" + dayNames[order[j]]
			}
			groups = append(groups, days+" "+spans(d))
		}
		i = j + 1
	}
	return strings.Join(groups, "; ")
}

// maxDays bounds a walk through the calendar: targets are at most a year
// of business time, and a calendar with hours has some in every week
// unless holidays take years of them.
const maxDays = 5 * 366

// Add returns the instant at which d of business time has passed after
// from. Business time is real elapsed time inside the calendar's
// intervals, so a 00:00-24:00 day counts 23 or 25 hours on the days
// daylight saving time changes, and the 24x7 calendar adds d exactly.
func (c *Calendar) Add(from time.Time, d time.Duration) (time.Time, error) {
	if c.always || d <= 0 {
		return from.Add(max(d, 0)), nil
	}
	local := from.In(c.Location)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, c.Location)
	for i := 0; i < maxDays; i++ {
		for _, span := range c.spans(day) {
			start, end := span[0], span[1]
			if !end.After(from) {
				continue
			}
			if start.Before(from) {
				start = from
			}
			if avail := end.Sub(start); d <= avail {
				return start.Add(d), nil
			}
			d -= end.Sub(start)
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Time{}, fmt.Errorf("calendar %s: %w within %d days", c.Name, ErrNoHours, maxDays)
}

// Between returns the business time from from to to; zero if to is not
// after from.
func (c *Calendar) Between(from, to time.Time) time.Duration {
	if !to.After(from) {
		return 0
	}
	if c.always {
		return to.Sub(from)
	}
	var sum time.Duration
	local := from.In(c.Location)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, c.Location)
	for i := 0; i < maxDays && day.Before(to); i++ {
		for _, span := range c.spans(day) {
			start, end := span[0], span[1]
			if start.Before(from) {
				start = from
			}
			if end.After(to) {
				end = to
			}
			if end.After(start) {
				sum += end.Sub(start)
			}
		}
		day = day.AddDate(0, 0, 1)
	}
	return sum
}

// spans are a day's intervals as instants, none on a holiday. A wall
// time that daylight saving skips is taken as time.Date takes it.
func (c *Calendar) spans(day time.Time) [][2]time.Time {
	if _, holiday := slices.BinarySearch(c.Holidays, day.Format(time.DateOnly)); holiday {
		return nil
	}
	y, m, d := day.Date()
	at := func(minute int) time.Time {
		if minute == 24*60 {
			return time.Date(y, m, d+1, 0, 0, 0, 0, c.Location)
		}
		return time.Date(y, m, d, minute/60, minute%60, 0, 0, c.Location)
	}
	var out [][2]time.Time
	for _, iv := range c.Week[day.Weekday()] {
		out = append(out, [2]time.Time{at(iv.Start), at(iv.End)})
	}
	return out
}
