package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/helpdesk-dev/helpdesk/jobs"
)

func cmdJobs(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("jobs", "jobs [flags] show ID | dead | retry ID",
		"show ID    prints one job's state, attempts and last error\n"+
			"dead       prints the dead letters grouped by their last error, largest group first\n"+
			"retry ID   sends a failed or dead-letter job back with a whole attempt budget,\n"+
			"           as POST /v1/jobs/{id}/retry does", getenv, stdout, stderr)
	db := databaseSetting(fs)
	// A retried job gets its kind's whole budget, as serve has it.
	var jobsConfig jobs.Config
	fs.declare(pick(jobsConfig.Settings(), "HELPDESK_TRIAGE_MAX_ATTEMPTS", "HELPDESK_EMAIL_MAX_ATTEMPTS")...)
	if err := fs.parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return usageErrorf("missing subcommand: show, dead or retry")
	}
	var id int64
	switch rest[0] {
	case "dead":
		if len(rest) != 1 {
			return usageErrorf("`jobs dead` takes no argument")
		}
	case "show", "retry":
		if len(rest) != 2 {
			return usageErrorf("`jobs %s` takes one job id", rest[0])
		}
		var err error
		if id, err = strconv.ParseInt(rest[1], 10, 64); err != nil || id <= 0 {
			return usageErrorf("job id must be a positive integer, got %q", rest[1])
		}
	default:
		return usageErrorf("unknown subcommand %q: want show, dead or retry", rest[0])
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	queue, err := jobs.NewQueue(pool, jobsConfig)
	if err != nil {
		return err
	}

	switch rest[0] {
	case "show":
		s, err := queue.Get(ctx, id)
		if err != nil {
			return err
		}
		printStatus(stdout, s)
	case "retry":
		s, err := queue.Retry(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "job %d sent back with a whole budget: ", id)
		printStatus(stdout, s)
	case "dead":
		groups, err := queue.DeadLetters(ctx)
		if err != nil {
			return err
		}
		printDeadLetters(stdout, groups)
	}
	return nil
}

func printStatus(w io.Writer, s jobs.Status) {
	last := "none"
	if s.LastError != nil {
		last = *s.LastError
	} else if n := len(s.Errors); n > 0 {
		last = fmt.Sprintf("none (%d earlier error%s)", n, map[bool]string{true: "", false: "s"}[n == 1])
	}
	fmt.Fprintf(w, "job %d (%s of %s): %s, attempt %d of %d, last error: %s\n",
		s.JobID, s.Kind, s.TicketID, s.State, s.Attempt, s.MaxAttempts, last)
}

func printDeadLetters(w io.Writer, groups []jobs.DeadLetterGroup) {
	if len(groups) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	total := 0
	fmt.Fprintf(w, "%6s  %s\n", "COUNT", "LAST ERROR")
	for _, g := range groups {
		total += g.Count
		fmt.Fprintf(w, "%6d  %s\n", g.Count, g.LastError)
		ids := make([]string, 0, min(len(g.JobIDs), 20))
		for _, id := range g.JobIDs[:min(len(g.JobIDs), 20)] {
			ids = append(ids, strconv.FormatInt(id, 10))
		}
		more := ""
		if len(g.JobIDs) > 20 {
			more = fmt.Sprintf(" and %d more", len(g.JobIDs)-20)
		}
		fmt.Fprintf(w, "%6s  jobs %s%s\n", "", strings.Join(ids, ", "), more)
	}
	fmt.Fprintf(w, "%6d  dead letters in all; `helpdesk jobs retry ID` sends one back\n", total)
}
