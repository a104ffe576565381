package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TestHotQueriesHaveAnIndex runs the queries that each ticket, message,
// queue page or clock makes, records them, and explains each with
// sequential scans turned off: a plan that still scans whole a table that
// grows with the tickets (tickets, messages, their events, deliveries,
// recipients, attachments, triage's results) has no index to use, and at
// a million rows it reads them all.
func TestHotQueriesHaveAnIndex(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx, trips := storetest.CountTrips(context.Background())
	first, second := newTicket(t, st), newTicket(t, st)
	for _, step := range []func() error{
		func() error { _, err := assign(ctx, pool, first); return err },
		func() error { _, err := st.GetTicket(ctx, first); return err },
		func() error { _, err := st.ListMessages(ctx, first); return err },
		func() error { _, err := st.MessageByEmailID(ctx, "<x@example.com>"); return err },
		func() error { _, err := st.CustomerByEmail(ctx, "ada@example.com"); return err },
		func() error {
			_, err := st.EmbeddedVectors(ctx, "", 100)
			return err
		},
		func() error { _, err := st.EmbeddedIDs(ctx); return err },
		func() error {
			h, err := st.ChangeHorizon(ctx)
			if err == nil {
				_, _, err = st.VectorsChangedSince(ctx, h, []store.TicketChange{{ID: first, ChangedBy: h}})
			}
			return err
		},
		func() error {
			h, err := st.ChangeHorizon(ctx)
			if err == nil {
				_, _, err = st.CustomerChangesSince(ctx, "C-0001", time.Now().Add(-time.Hour), h, 64)
			}
			return err
		},
		func() error { _, err := st.SolvedBefore(ctx, time.Now(), 100); return err },
		func() error { // what renders a reply, read with the mail
			var (
				reads  store.Batch
				thread store.ThreadIDs
				agent  *store.Agent
				quoted *store.Message
				files  []*store.AttachmentFile
			)
			reads.ReplyThread(first, 1, &thread)
			reads.AuthorAgent(1, &agent)
			reads.QuotedMessage(first, 1, &quoted)
			reads.FilesToRender(1, &files)
			return st.Send(ctx, &reads)
		},
		func() error { // what the console's ticket page reads of the store
			var (
				reads  store.Batch
				msgs   []*store.Message
				events []*store.TicketEvent
			)
			reads.ListMessages(first, &msgs)
			reads.ListOutboundEmails(first, map[int64]*store.OutboundEmail{})
			reads.AttachmentsOfTicket(first, map[int64][]*store.Attachment{})
			reads.ListTicketEvents(first, &events)
			return st.Send(ctx, &reads)
		},
		func() error { _, err := st.GetTicketSLA(ctx, first); return err },
		func() error { // what a triage job reads before its steps
			var (
				reads store.Batch
				read  store.TriageRead
			)
			reads.TriageRead(&store.TriageReadParams{TicketID: first, JobID: 1, Provider: "p", Inbound: 16, Outbound: 4}, &read)
			return st.Send(ctx, &reads)
		},
		func() error { // what it reads at its end, to tell the agents
			var (
				reads   store.Batch
				triaged store.Triaged
			)
			reads.TriagedRead(first, &triaged)
			return st.Send(ctx, &reads)
		},
		func() error {
			for _, p := range []store.ListTicketsParams{{Status: vocab.StatusOpen}, {Team: "billing"}, {Assignee: "ana"}, {CustomerID: "C-0001"},
				{SLABreached: true}, {SLADueWithin: time.Hour}} {
				p.Limit = 50
				if _, err := st.ListTickets(ctx, &p); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			for _, v := range []string{"mine", "unassigned", "open", "pending", "due"} {
				if _, err := st.QueuePage(ctx, &store.QueueParams{Agent: "ana", Teams: []string{"billing"}, View: v, Limit: 50}); err != nil {
					return err
				}
			}
			_, err := st.QueuePage(ctx, &store.QueueParams{View: "all", Search: first, Limit: 50})
			return err
		},
		func() error {
			return store.Run(ctx, pool, func(tx *store.Tx) error {
				tx.Later(func(b *store.Batch) { b.Merge(second, first) })
				return nil
			})
		},
	} {
		if err := step(); err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatal(err)
		}
	}
	// The "all" view's count holds nearly every ticket and stops at
	// CountCap + 1: the first rows of the table serve it as well as an index.
	allCount := "SELECT count(*) FROM (SELECT FROM tickets t WHERE t.merged_into IS NULL LIMIT"
	for _, s := range trips.Statements() {
		sql := strings.TrimSpace(s.SQL)
		verb := strings.ToUpper(strings.Fields(sql)[0])
		if verb != "SELECT" && verb != "UPDATE" && verb != "DELETE" && verb != "WITH" || strings.HasPrefix(sql, allCount) {
			continue
		}
		plan := explain(t, pool, sql, s.Args)
		for _, table := range []string{"Seq Scan on tickets", "Seq Scan on messages", "Seq Scan on ticket_events",
			"Seq Scan on outbound_emails", "Seq Scan on outbound_recipients", "Seq Scan on attachments", "Seq Scan on ticket_embeddings", "Seq Scan on ai_runs"} {
			if strings.Contains(plan, table) {
				t.Errorf("%s\nscans a table whole:\n%s", strings.Join(strings.Fields(sql), " "), plan)
			}
		}
	}
}

func explain(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	tx := beginWith(t, pool, "enable_seqscan = off")
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}

// beginWith begins a transaction on pool with setting (SET LOCAL's
// "name = value") in force; the caller rolls it back.
func beginWith(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, setting string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL `+setting); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatal(err)
	}
	return tx
}
