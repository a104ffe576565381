package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
)

// ticketNumber is what a ticket's number looks like.
var ticketNumber = regexp.MustCompile(`^T-[0-9]{1,18}$`)

func cmdTicket(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ticket", "ticket similar ID [-status solved|closed|any] [-limit N]",
		"similar   lists the tickets most like ID by their embeddings (cosine similarity), best first:\n"+
			"          solved ones by default; the ticket must be triaged", getenv, stdout, stderr)
	db := databaseSetting(fs)
	status := fs.String("status", "solved", "similar: solved, closed or any")
	limit := fs.Int("limit", 5, "similar: how many, 1 to 50")
	sub, id, rest := subcommand(args, "similar")
	if err := fs.parse(rest); err != nil {
		return err
	}
	var err error
	if id, err = fs.nameAmongFlags(id); err != nil {
		return err
	}
	switch {
	case sub != "similar":
		fs.Usage()
		return usageErrorf("want ticket similar ID")
	case fs.NArg() > 0:
		return usageErrorf("unexpected argument %q: ticket similar takes one ID", fs.Arg(0))
	case !ticketNumber.MatchString(id):
		return usageErrorf("ticket similar takes a ticket's number, such as T-500001")
	case *status != "solved" && *status != "closed" && *status != "any":
		return usageErrorf("-status %q: want solved, closed or any", *status)
	case *limit < 1 || *limit > 50:
		return usageErrorf("-limit %d: want 1 to 50", *limit)
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	similar, err := desk.New(pool, nil, desk.Config{}).SimilarTickets(ctx, id, *status, *limit)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return usageErrorf("no ticket %s", id)
	case errors.Is(err, desk.ErrNotEmbedded):
		return usageErrorf("%v; try again once it is triaged", err)
	case err != nil:
		return err
	}
	if len(similar) == 0 {
		fmt.Fprintf(stderr, "no %s ticket is like %s yet\n", *status, id)
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TICKET\tSCORE\tSTATUS\tTEAM\tSOLVED\tSUBJECT")
	for _, s := range similar {
		team, solved := "-", "-"
		if s.Team != nil {
			team = *s.Team
		}
		if s.SolvedAt != nil {
			solved = s.SolvedAt.Format(time.DateOnly)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.TicketID, strconv.FormatFloat(float64(s.Score), 'f', 3, 32), s.Status, team, solved, s.Subject)
	}
	return w.Flush()
}
