package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/sla"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// cli is who a command acts as, in logs.
const cli = vocab.Actor("cli")

// slaDesk opens the database and the use cases with a queue that can
// time tickets again.
func slaDesk(ctx context.Context, db *store.Config) (*desk.Desk, func(), error) {
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	queue, err := jobs.NewQueue(pool, jobs.Config{})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	// The command says what it did on stdout; the desk's log lines would say it twice.
	return desk.New(pool, queue, desk.Config{Logger: slog.New(slog.DiscardHandler)}), pool.Close, nil
}

// slaError turns a refused setting into a usage error.
func slaError(err error) error {
	if errors.Is(err, desk.ErrInvalidSLA) || errors.Is(err, desk.ErrUnknownCalendar) || errors.Is(err, desk.ErrUnknownTeam) {
		return usageErrorf("%v", err)
	}
	return err
}

func cmdSLA(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sla", "sla set -priority N [-first-response D] [-next-response D] [-resolution D] [-warn D|20%] [-team TEAM] [-calendar NAME] |\n"+
		"       sla list | sla delete -priority N [-team TEAM] | sla due -from TIME -target D [-calendar NAME]",
		"set       sets the targets of a priority (1 most urgent … 4), for every team or for -team:\n"+
			"          first response (an agent's first reply), next response (a reply after each customer\n"+
			"          message that waits for us) and resolution (solved; pending pauses it). Durations such as\n"+
			"          1h or 30m count in -calendar's business hours (default 24x7). Warnings go -warn before\n"+
			"          each due time (default 20% of the target). Open tickets are timed again from their start.\n"+
			"list      lists the policies\n"+
			"delete    removes the policy of a priority (and -team)\n"+
			"due       prints when -target falls due after -from (RFC 3339) in -calendar, in its time zone", getenv, stdout, stderr)
	db := databaseSetting(fs)
	priority := fs.Int("priority", 0, "set, delete: the priority, 1 to 4")
	team := fs.String("team", "", "set, delete: the team's own policy; unset: every team without one")
	first := fs.Duration("first-response", 0, "set: the first response target")
	next := fs.Duration("next-response", 0, "set: the next response target")
	resolution := fs.Duration("resolution", 0, "set: the resolution target")
	warn := fs.String("warn", "20%", "set: how long before each due time the warning goes, or 20%")
	calendar := fs.String("calendar", sla.Builtin, "set, due: the calendar the targets count in")
	from := fs.String("from", "", "due: the start, RFC 3339, such as 2026-01-16T16:30:00+01:00")
	target := fs.Duration("target", 0, "due: the target")
	sub, _, rest := subcommand(args)
	if err := fs.parse(rest); err != nil {
		return err
	}
	switch {
	case sub != "set" && sub != "list" && sub != "delete" && sub != "due":
		fs.Usage()
		return usageErrorf("want sla set, list, delete or due")
	case fs.NArg() > 0:
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	case (sub == "set" || sub == "delete") && (*priority < 1 || *priority > 4):
		return usageErrorf("-priority %d: want 1 (most urgent) to 4", *priority)
	}
	p := &store.SLAPolicy{Priority: int16(*priority), Team: *team, FirstResponse: *first, NextResponse: *next, Resolution: *resolution,
		Calendar: *calendar}
	if *warn != "20%" && *warn != "" {
		d, err := time.ParseDuration(*warn)
		if err != nil || d <= 0 {
			return usageErrorf("-warn %q: want a duration such as 10m, or 20%%", *warn)
		}
		p.WarnBefore = d
	}
	var start time.Time
	if sub == "due" {
		var err error
		if start, err = time.Parse(time.RFC3339, *from); err != nil {
			return usageErrorf("-from %q: want an RFC 3339 time such as 2026-01-16T16:30:00+01:00", *from)
		}
		if *target <= 0 {
			return usageErrorf("-target: want a positive duration such as 1h")
		}
	}
	cases, closeDB, err := slaDesk(ctx, db)
	if err != nil {
		return err
	}
	defer closeDB()
	switch sub {
	case "set":
		saved, err := cases.SetSLAPolicy(ctx, cli, p)
		if err != nil {
			return slaError(err)
		}
		fmt.Fprintf(stdout, "sla policy for priority %d%s: %s\n", saved.Priority, teamLabel(saved.Team), describePolicy(saved))
	case "delete":
		err := cases.DeleteSLAPolicy(ctx, cli, int16(*priority), *team)
		if errors.Is(err, store.ErrNotFound) {
			return usageErrorf("there is no policy for priority %d%s", *priority, teamLabel(*team))
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "sla policy for priority %d%s deleted\n", *priority, teamLabel(*team))
	case "list":
		list, err := cases.SLAPolicies(ctx)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Fprintln(stderr, "no SLA policy yet: helpdesk sla set -priority 1 -first-response 1h sets one")
			return nil
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "PRIORITY\tTEAM\tFIRST RESPONSE\tNEXT RESPONSE\tRESOLUTION\tWARN\tCALENDAR")
		for _, p := range list {
			team := p.Team
			if team == "" {
				team = "*"
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Priority, team, orDash(p.FirstResponse), orDash(p.NextResponse), orDash(p.Resolution),
				warnLabel(p.WarnBefore), p.Calendar)
		}
		return w.Flush()
	case "due":
		due, err := cases.Due(ctx, *calendar, start, *target)
		if err != nil {
			return slaError(err)
		}
		fmt.Fprintln(stdout, due.Format(time.RFC3339))
	}
	return nil
}

func cmdCalendar(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("calendar", "calendar set NAME -tz ZONE -hours \"Mon-Fri 09:00-12:00,13:00-17:00\" [-holidays 2026-12-25,2026-12-26] | calendar list",
		"set       adds or replaces a calendar of business hours: -tz an IANA zone (Europe/Berlin), -hours\n"+
			"          groups of days and intervals separated by \";\" (\"Mon-Fri 09:00-17:00; Sat 10:00-14:00\"; an\n"+
			"          interval ends by 24:00, a night shift is two), -holidays dates without hours. 24x7 is built in.\n"+
			"list      lists the calendars", getenv, stdout, stderr)
	db := databaseSetting(fs)
	tz := fs.String("tz", "", "set: the time zone, an IANA name such as Europe/Berlin")
	hours := fs.String("hours", "", "set: the weekly business hours")
	holidays := fs.String("holidays", "", "set: dates without business hours, separated by commas")
	sub, name, rest := subcommand(args, "set")
	if err := fs.parse(rest); err != nil {
		return err
	}
	var err error
	if sub == "set" {
		if name, err = fs.nameAmongFlags(name); err != nil {
			return err
		}
	}
	switch {
	case sub != "set" && sub != "list":
		fs.Usage()
		return usageErrorf("want calendar set or list")
	case fs.NArg() > 0:
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	case sub == "set" && name == "":
		return usageErrorf("calendar set takes the calendar's NAME")
	}
	cases, closeDB, err := slaDesk(ctx, db)
	if err != nil {
		return err
	}
	defer closeDB()
	if sub == "list" {
		list, err := cases.Calendars(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tTIME ZONE\tHOURS\tHOLIDAYS")
		fmt.Fprintf(w, "%s\tUTC\tevery hour of every day\t-\n", sla.Builtin)
		for _, c := range list {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Name, c.TimeZone, c.Hours, orDashList(c.Holidays))
		}
		return w.Flush()
	}
	var days []string
	if *holidays != "" {
		days = strings.Split(*holidays, ",")
	}
	c, err := cases.SetCalendar(ctx, cli, &desk.CalendarParams{Name: name, TimeZone: *tz, Hours: *hours, Holidays: days})
	if err != nil {
		return slaError(err)
	}
	fmt.Fprintf(stdout, "calendar %s (%s): %s; holidays %s\n", c.Name, c.TimeZone, c.Hours, orDashList(c.Holidays))
	return nil
}

func teamLabel(team string) string {
	if team == "" {
		return ""
	}
	return " in team " + team
}

func describePolicy(p *store.SLAPolicy) string {
	return fmt.Sprintf("first response %s, next response %s, resolution %s, warning %s before, calendar %s",
		orDash(p.FirstResponse), orDash(p.NextResponse), orDash(p.Resolution), warnLabel(p.WarnBefore), p.Calendar)
}

func orDash(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.String()
}

func warnLabel(d time.Duration) string {
	if d == 0 {
		return "20%"
	}
	return d.String()
}

func orDashList(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ",")
}
