package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
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

func newTicket(t testing.TB, st *store.Store) string {
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
	return assignWith(ctx, pool, &store.AssignParams{TicketID: ticketID, Team: "billing", Priority: 2})
}

// assignWith is assign with the parameters given.
func assignWith(ctx context.Context, pool *pgxpool.Pool, p *store.AssignParams) (agent string, err error) {
	err = store.Run(ctx, pool, func(tx *store.Tx) error {
		agent, _, err = tx.Store().AssignToTeam(ctx, p)
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
	a, _, err := tx.Store().AssignToTeam(ctx, &store.AssignParams{TicketID: first, Team: "billing", Priority: 2})
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

// giveAna gives ana n open tickets of her own.
func giveAna(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO tickets (id, customer_id, subject, assignee)
		SELECT 'T-' || (900000 + g), 'C-0001', 'Ana''s', 'ana' FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
}

// holdBen opens a transaction that is giving ben a ticket, and returns
// it still open.
func holdBen(t *testing.T, pool *pgxpool.Pool, st *store.Store) *store.Tx {
	t.Helper()
	ctx := context.Background()
	tx := store.Begin(pool)
	t.Cleanup(func() { tx.Rollback(ctx) })
	if agent, _, err := tx.Store().AssignToTeam(ctx, &store.AssignParams{TicketID: newTicket(t, st), Team: "billing", Priority: 2}); err != nil || agent != "ben" {
		t.Fatalf("the first assignment gave ben's ticket to %q (%v)", agent, err)
	}
	return tx
}

func TestAssignmentKeepsLoadsWithinOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnAgentAheadIsPassedByUntilTheOthersHaveTheirsAndHeldByNobodyMeanwhile", func(t *testing.T) {
		t.Parallel()
		pool, st := team(t)
		giveAna(t, pool, 2)
		first := holdBen(t, pool, st)
		// Only ana is free, and two ahead of ben: the ticket must wait for ben.
		second := newTicket(t, st)
		waited, proceed := make(chan struct{}), make(chan struct{})
		let := sync.OnceFunc(func() { close(proceed) })
		t.Cleanup(let)
		got := make(chan string, 1)
		var once sync.Once
		go func() {
			agent, err := assignWith(ctx, pool, &store.AssignParams{TicketID: second, Team: "billing", Priority: 2,
				Await: func(ctx context.Context, d time.Duration) error {
					// The first wait lasts until the test has looked.
					once.Do(func() { close(waited); <-proceed })
					time.Sleep(d)
					return ctx.Err()
				}})
			if err != nil {
				t.Error(err)
			}
			got <- agent
		}()
		select {
		case <-waited:
		case agent := <-got:
			t.Fatalf("the ticket went to %q at once, ana two ahead of ben", agent)
		}
		// While it waits, it holds ana no more: her own changes go through.
		if _, err := pool.Exec(ctx, `SELECT 1 FROM agents WHERE name = 'ana' FOR UPDATE NOWAIT`); err != nil {
			t.Errorf("ana is held by the assignment that waits: %v", err)
		}
		if err := first.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		let()
		if agent := <-got; agent != "ben" {
			t.Errorf("the second ticket went to %q, want ben (ana had two, ben one)", agent)
		}
		requireLoads(t, pool, "both")
		var team string
		var priority int
		if err := pool.QueryRow(ctx, `SELECT team, priority FROM tickets WHERE id = $1`, second).Scan(&team, &priority); err != nil || team != "billing" || priority != 2 {
			t.Errorf("the ticket's team %q and priority %d (%v), want billing and 2", team, priority, err)
		}
	})

	t.Run("AnAgentBeingGivenATicketCountsItAlready", func(t *testing.T) {
		t.Parallel()
		pool, st := team(t)
		giveAna(t, pool, 1)
		first := holdBen(t, pool, st)
		// Ana has one and ben, about to, one: ana may have the next at once.
		agent, err := assignWith(ctx, pool, &store.AssignParams{TicketID: newTicket(t, st), Team: "billing", Priority: 2,
			Busy: func() []string { return []string{"ben"} },
			Await: func(context.Context, time.Duration) error {
				return errors.New("waited, though ben is counted as busy")
			}})
		if err != nil || agent != "ana" {
			t.Fatalf("gave the ticket to %q (%v), want ana at once", agent, err)
		}
		if err := first.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		requireLoads(t, pool, "both")
	})

	t.Run("ATicketSomeoneHasKeepsItsAssigneeAndTakesTheClassification", func(t *testing.T) {
		t.Parallel()
		pool, st := team(t)
		id := newTicket(t, st)
		if err := st.SetTicketAssignee(ctx, id, "ana"); err != nil {
			t.Fatal(err)
		}
		agent, err := assignWith(ctx, pool, &store.AssignParams{TicketID: id, Team: "billing", Priority: 1})
		if err != nil || agent != "" {
			t.Fatalf("assigned %q (%v), want nobody new", agent, err)
		}
		var assignee, team string
		var priority int
		if err := pool.QueryRow(ctx, `SELECT assignee, team, priority FROM tickets WHERE id = $1`, id).Scan(&assignee, &team, &priority); err != nil ||
			assignee != "ana" || team != "billing" || priority != 1 {
			t.Errorf("assignee %q, team %q, priority %d (%v); want ana, billing, 1", assignee, team, priority, err)
		}
		requireLoads(t, pool, "kept")
	})
}

// TestWhoHearsOfATicketIsEachAgentOnceWithTheirMailsNumbers: the team's
// active agents while nobody is assigned or the assignee is disabled, the
// assignee alone once someone active is, and on a breach the team's
// active admins too, an admin who is the assignee told once; each with
// numbers of their own for their mail. The end of a triage reads the
// same agents with the rest of what it tells them (TriagedRead).
func TestWhoHearsOfATicketIsEachAgentOnceWithTheirMailsNumbers(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	for _, a := range []struct {
		name  string
		teams []string
	}{{"cy", []string{"billing"}}, {"dee", []string{"billing"}}, {"eve", []string{"shipping"}}} {
		if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: a.name, DisplayName: a.name, Email: a.name + "@example.com",
			Teams: a.teams}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"ben", "dee", "eve"} {
		if err := st.SetAdmin(ctx, name, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DisableAgent(ctx, "dee"); err != nil { // an admin, but disabled
		t.Fatal(err)
	}
	ticket := newTicket(t, st)
	if _, err := pool.Exec(ctx, `UPDATE tickets SET team = 'billing' WHERE id = $1`, ticket); err != nil {
		t.Fatal(err)
	}
	hear := func(admins bool) []string {
		t.Helper()
		var (
			b       store.Batch
			to      []store.AgentToMail
			triaged store.Triaged
		)
		b.AgentsToMail(ticket, admins, &to)
		b.TriagedRead(ticket, &triaged)
		if err := st.Send(ctx, &b); err != nil {
			t.Fatal(err)
		}
		if got, want := agentNames(triaged.Agents), agentNames(to); !admins && !slices.Equal(got, want) {
			t.Errorf("the triaged read tells %v, AgentsToMail %v", got, want)
		}
		numbers := map[int64]bool{}
		for _, a := range append(slices.Clone(to), triaged.Agents...) {
			if a.MessageID == 0 || a.JobID == 0 || numbers[a.MessageID] || numbers[-a.JobID] {
				t.Errorf("%s's mail numbered %d, job %d: want numbers of its own", a.Name, a.MessageID, a.JobID)
			}
			numbers[a.MessageID], numbers[-a.JobID] = true, true
		}
		return agentNames(to)
	}
	for _, tc := range []struct {
		name     string
		assignee string
		admins   bool
		want     []string
	}{
		{"NobodyAssignedTheTeam", "", false, []string{"ana", "ben", "cy"}},
		{"NobodyAssignedABreachTheTeamOnce", "", true, []string{"ana", "ben", "cy"}},
		{"AssignedTheAssigneeAlone", "ana", false, []string{"ana"}},
		{"AssignedABreachTheAssigneeAndTheTeamsActiveAdmins", "ana", true, []string{"ana", "ben"}},
		{"AssignedToAnAdminABreachTellsThemOnce", "ben", true, []string{"ben"}},
		{"AssignedToADisabledAgentTheTeam", "dee", false, []string{"ana", "ben", "cy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, `UPDATE tickets SET assignee = nullif($2, '') WHERE id = $1`, ticket, tc.assignee); err != nil {
				t.Fatal(err)
			}
			if got := hear(tc.admins); !slices.Equal(got, tc.want) {
				t.Errorf("told %v, want %v", got, tc.want)
			}
		})
	}
}

func agentNames(to []store.AgentToMail) []string {
	var names []string
	for _, a := range to {
		names = append(names, a.Name)
	}
	return names
}
