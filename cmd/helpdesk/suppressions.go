package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
)

func cmdSuppressions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("suppressions", "suppressions [-clear ADDRESS]",
		"Lists the addresses that bounced for good: replies to them fail at once, before any SMTP,\n"+
			"until they expire (HELPDESK_SUPPRESS_DAYS) or an agent clears them with -clear.", getenv, stdout, stderr)
	db := databaseSetting(fs)
	clear := fs.String("clear", "", "take this address off the list")
	if err := fs.parseNoArgs(args); err != nil {
		return err
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	if *clear != "" {
		if err := st.ClearSuppression(ctx, *clear); errors.Is(err, store.ErrNotFound) {
			return usageErrorf("%s is not suppressed", *clear)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s cleared: replies to it are sent again\n", *clear)
		return nil
	}
	list, err := st.ListSuppressions(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ADDRESS\tSINCE\tUNTIL\tTICKET\tSTATUS")
	for _, s := range list {
		ticket := "-"
		if s.TicketID != nil {
			ticket = *s.TicketID
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Address, s.CreatedAt.Format(time.DateOnly), s.ExpiresAt.Format(time.DateOnly), ticket, s.Status)
	}
	return w.Flush()
}
