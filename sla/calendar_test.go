package sla_test

import (
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/sla"
)

func calendar(t *testing.T, tz, hours string, holidays ...string) *sla.Calendar {
	t.Helper()
	c, err := sla.NewCalendar("test", tz, hours, holidays)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCalendarAdd(t *testing.T) {
	t.Parallel()
	const office = "Mon-Fri 09:00-17:00"
	for _, c := range []struct {
		name, tz, hours string
		holidays        []string
		from            string
		target          time.Duration
		want            string
	}{
		// Chatwoot's own example.
		{"FridayAfternoonRollsToMonday", "UTC", office, nil, "2026-01-16T16:30:00Z", time.Hour, "2026-01-19T09:30:00Z"},
		{"WithinTheDay", "UTC", office, nil, "2026-01-14T10:00:00Z", 2 * time.Hour, "2026-01-14T12:00:00Z"},
		{"EndingExactlyAtClosing", "UTC", office, nil, "2026-01-14T16:00:00Z", time.Hour, "2026-01-14T17:00:00Z"},
		{"BeforeOpeningStartsAtOpening", "UTC", office, nil, "2026-01-14T06:00:00Z", time.Hour, "2026-01-14T10:00:00Z"},
		{"AtTheWeekendStartsMonday", "UTC", office, nil, "2026-01-17T12:00:00Z", 30 * time.Minute, "2026-01-19T09:30:00Z"},
		{"ALunchBreakIsSkipped", "Europe/Berlin", "Mon-Fri 09:00-12:00,13:00-17:00", nil,
			"2026-01-14T11:30:00+01:00", time.Hour, "2026-01-14T13:30:00+01:00"},
		{"AHolidayIsSkipped", "Europe/Berlin", office, []string{"2026-12-25"},
			"2026-12-24T16:00:00+01:00", 2 * time.Hour, "2026-12-28T10:00:00+01:00"},
		{"TwoHolidaysAndAWeekend", "Europe/Berlin", office, []string{"2026-12-24", "2026-12-25"},
			"2026-12-23T16:30:00+01:00", time.Hour, "2026-12-28T09:30:00+01:00"},
		{"ATargetLongerThanAWeek", "UTC", office, nil, "2026-01-12T09:00:00Z", 50 * time.Hour, "2026-01-20T11:00:00Z"},
		{"AWrappingDayRange", "UTC", "Fri-Mon 10:00-14:00", nil, "2026-01-13T12:00:00Z", 5 * time.Hour, "2026-01-17T11:00:00Z"},
		// Daylight saving time: business hours are wall-clock hours.
		{"BerlinSpringForwardKeepsWallClock", "Europe/Berlin", office, nil,
			"2026-03-27T16:00:00+01:00", 2 * time.Hour, "2026-03-30T10:00:00+02:00"},
		{"BerlinFallBackKeepsWallClock", "Europe/Berlin", office, nil,
			"2026-10-23T16:00:00+02:00", 2 * time.Hour, "2026-10-26T10:00:00+01:00"},
		{"NewYorkSpringForwardKeepsWallClock", "America/New_York", office, nil,
			"2026-03-06T16:00:00-05:00", 2 * time.Hour, "2026-03-09T10:00:00-04:00"},
		{"NewYorkFallBackKeepsWallClock", "America/New_York", office, nil,
			"2026-10-30T16:00:00-04:00", 2 * time.Hour, "2026-11-02T10:00:00-05:00"},
		// A whole-day calendar counts real hours: 23 on the spring day, 25
		// on the autumn one.
		{"MidnightIntervalsOverSpringForwardCountRealTime", "Europe/Berlin", "Mon-Sun 00:00-24:00", nil,
			"2026-03-28T12:00:00+01:00", 24 * time.Hour, "2026-03-29T13:00:00+02:00"},
		{"MidnightIntervalsOverFallBackCountRealTime", "America/New_York", "Mon-Sun 00:00-24:00", nil,
			"2026-10-31T12:00:00-04:00", 24 * time.Hour, "2026-11-01T11:00:00-05:00"},
		{"MidnightIntervalsAcrossMidnight", "UTC", "Mon-Sun 00:00-24:00", nil,
			"2026-01-14T23:30:00Z", time.Hour, "2026-01-15T00:30:00Z"},
		{"AnOvernightShiftWrittenAsTwo", "UTC", "Fri 22:00-24:00; Sat 00:00-06:00", nil,
			"2026-01-16T23:00:00Z", 2 * time.Hour, "2026-01-17T01:00:00Z"},
		{"ZeroTargetIsNow", "UTC", office, nil, "2026-01-17T12:00:00Z", 0, "2026-01-17T12:00:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cal := calendar(t, c.tz, c.hours, c.holidays...)
			got, err := cal.Add(at(t, c.from), c.target)
			if err != nil {
				t.Fatal(err)
			}
			if want := at(t, c.want); !got.Equal(want) {
				t.Errorf("Add(%s, %s) = %s, want %s", c.from, c.target, got.In(cal.Location).Format(time.RFC3339), c.want)
			}
			if back := cal.Between(at(t, c.from), got); back != c.target {
				t.Errorf("Between(from, due) = %s, want the target %s back", back, c.target)
			}
		})
	}
}

func TestTwentyFourSevenAddsRealTime(t *testing.T) {
	t.Parallel()
	cal := sla.TwentyFourSeven()
	for _, from := range []string{"2026-03-29T00:30:00Z", "2026-10-25T00:59:59Z", "2026-12-31T23:59:00Z"} {
		for _, d := range []time.Duration{time.Minute, 25 * time.Hour, 9 * 24 * time.Hour} {
			if got, _ := cal.Add(at(t, from), d); !got.Equal(at(t, from).Add(d)) {
				t.Errorf("24x7 Add(%s, %s) = %s", from, d, got)
			}
		}
	}
}

func TestCalendarSettingsAreChecked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ tz, hours, holiday, want string }{
		{"Mars/Olympus", "Mon 09:00-17:00", "", "time zone"},
		{"", "Mon 09:00-17:00", "", "time zone"},
		{"UTC", "Mon 17:00-09:00", "", "ending after it starts"},
		{"UTC", "Mon 09:00-25:00", "", "interval"},
		{"UTC", "Funday 09:00-17:00", "", "day"},
		{"UTC", "Mon 09:00-12:00,11:00-13:00", "", "overlap"},
		{"UTC", "", "", "no business hours"},
		{"UTC", "Mon-Fri", "", "want days and intervals"},
		{"UTC", "Mon 09:00-17:00", "25.12.2026", "holiday"},
	} {
		_, err := sla.NewCalendar("x", c.tz, c.hours, []string{c.holiday})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewCalendar(%q, %q, %q) = %v, want an error naming %q", c.tz, c.hours, c.holiday, err, c.want)
		}
	}
	if _, err := sla.NewCalendar("x", "UTC", "Mon 09:00-17:00", []string{"2026-01-05"}); err != nil {
		t.Error(err)
	}
}

func TestHoursReadBackAsWritten(t *testing.T) {
	t.Parallel()
	for hours, want := range map[string]string{
		"mon-fri 09:00-12:00,13:00-17:00;Sat 10:00-14:00": "Mon-Fri 09:00-12:00,13:00-17:00; Sat 10:00-14:00",
		"Mon,Wed 09:00-17:00":                             "Mon 09:00-17:00; Wed 09:00-17:00",
		"Mon-Sun 00:00-24:00":                             "Mon-Sun 00:00-24:00",
		"Fri-Mon 10:00-14:00":                             "Mon 10:00-14:00; Fri-Sun 10:00-14:00",
	} {
		if got := calendar(t, "UTC", hours).HoursString(); got != want {
			t.Errorf("HoursString() of %q = %q, want %q", hours, got, want)
		}
		if again := calendar(t, "UTC", want).HoursString(); again != want {
			t.Errorf("%q reads back as %q", want, again)
		}
	}
}
