package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
)

func cmdProvider(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("provider", "provider",
		"Shows each AI provider's circuit breaker (closed: calls go; open: nobody calls until the next\n"+
			"probe) and the pace its quota allows, as every process shares them.", getenv, stdout, stderr)
	db := databaseSetting(fs)
	if err := fs.parseNoArgs(args); err != nil {
		return err
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	list, err := store.New(pool).ListProviders(ctx)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no provider called yet")
		return nil
	}
	for _, p := range list {
		printProvider(stdout, p)
	}
	return nil
}

func printProvider(w io.Writer, p *store.Provider) {
	fmt.Fprintf(w, "%s\n  breaker: %s since %s", p.Provider, p.State, p.ChangedAt.Format(time.RFC3339))
	if p.State == store.BreakerOpen && p.NextProbeAt != nil {
		fmt.Fprintf(w, ", next probe %s", p.NextProbeAt.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "; %d failures in a row\n", p.Failures)
	if p.LastError != nil {
		fmt.Fprintf(w, "  last error: %s\n", *p.LastError)
	}
	pace := "unpaced"
	if p.CallInterval > 0 {
		pace = fmt.Sprintf("one call every %s", p.CallInterval.Round(time.Millisecond))
	}
	if p.QuotaLimit != nil && p.QuotaRemaining != nil {
		pace += fmt.Sprintf(" (quota %d, %d left", *p.QuotaLimit, *p.QuotaRemaining)
		if p.QuotaResetAt != nil {
			pace += ", whole again at " + p.QuotaResetAt.Format(time.RFC3339)
		}
		pace += ")"
	}
	if time.Until(p.BlockedUntil) > 0 {
		pace += "; no calls until " + p.BlockedUntil.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "  pace: %s\n", pace)
}
