package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// team is ana and ben in billing, and a customer.
func team(t testing.TB) (*pgxpool.Pool, *store.Store) {
	t.Helper()
	pool, st := withAda(t)
	ctx := context.Background()
	for _, name := range []string{"ana", "ben"} {
		if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: name, DisplayName: name, Email: name + "@example.com",
			Teams: []string{"billing"}}); err != nil {
			t.Fatal(err)
		}
	}
	return pool, st
}

func newTicket(t *testing.T, st *store.Store) string {
	t.Helper()
	tk, err := st.InsertTicket(context.Background(), &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Invoice"})
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// assign assigns the ticket in a transaction of its own, as triage does
// in its step's.
func assign(ctx context.Context, pool *pgxpool.Pool, ticketID string) (agent string, err error) {
	err = store.Run(ctx, pool, func(tx *store.Tx) error {
		agent, err = tx.Store().AssignToTeam(ctx, ticketID, "billing")
		return err
	})
	return agent, err
}

// requireLoads checks each agent's kept load against a count of its tickets.
func requireLoads(t *testing.T, pool *pgxpool.Pool, step string) {
	t.Helper()
	var wrong int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM agents a WHERE a.open_tickets <>
		(SELECT count(*) FROM tickets k WHERE k.assignee = a.name AND k.status IN ('open', 'pending'))`).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 {
		t.Errorf("after %s: %d agents' loads differ from their tickets", step, wrong)
	}
}

func TestAgentLoadFollowsEveryChange(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	var ids []string
	for range 4 {
		id := newTicket(t, st)
		if _, err := assign(ctx, pool, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	requireLoads(t, pool, "four assignments")
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"pending", func() error { return st.SetTicketStatus(ctx, ids[0], vocab.StatusPending) }},
		{"pending again", func() error { return st.SetTicketStatus(ctx, ids[0], vocab.StatusPending) }},
		{"solved", func() error { return st.SetTicketStatus(ctx, ids[0], vocab.StatusSolved) }},
		{"reopened", func() error { return st.SetTicketStatus(ctx, ids[0], vocab.StatusOpen) }},
		{"reassigned", func() error { return st.SetTicketAssignee(ctx, ids[1], "ana") }},
		{"unassigned", func() error { return st.SetTicketAssignee(ctx, ids[2], "") }},
		{"closed", func() error { return st.SetTicketStatus(ctx, ids[3], vocab.StatusClosed) }},
		{"deleted", func() error { _, err := pool.Exec(ctx, `DELETE FROM tickets WHERE id = $1`, ids[1]); return err }},
		{"inserted assigned", func() error {
			_, err := pool.Exec(ctx, `INSERT INTO tickets (id, customer_id, subject, assignee) VALUES ('T-9', 'C-0001', 'Moved in', 'ben')`)
			return err
		}},
		{"inserted assigned and solved", func() error {
			_, err := pool.Exec(ctx, `INSERT INTO tickets (id, customer_id, subject, assignee, status) VALUES ('T-10', 'C-0001', 'Old', 'ana', 'solved')`)
			return err
		}},
		{"deleted unassigned", func() error { _, err := pool.Exec(ctx, `DELETE FROM tickets WHERE id = $1`, ids[2]); return err }},
		{"deleted assigned", func() error { _, err := pool.Exec(ctx, `DELETE FROM tickets WHERE id = 'T-9'`); return err }},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		requireLoads(t, pool, step.name)
	}
}

func TestAssignmentsOfOneTeamDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	first, second := newTicket(t, st), newTicket(t, st)
	ctx := context.Background()
	tx := store.Begin(pool)
	defer tx.Rollback(ctx)
	a, err := tx.Store().AssignToTeam(ctx, first, "billing")
	if err != nil {
		t.Fatal(err)
	}
	// The first transaction is still open, holding its agent: the second
	// assignment takes the other one at once. A wait here would last until
	// the deadline, far longer than any assignment takes.
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	b, err := assign(waitCtx, pool, second)
	if err != nil {
		t.Fatalf("the second assignment waited: %v", err)
	}
	if a == b || a == "" || b == "" {
		t.Errorf("assigned %q and %q, want both agents", a, b)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	requireLoads(t, pool, "both")
}
