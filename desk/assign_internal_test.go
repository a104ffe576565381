package desk

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestAssignSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ATeamHasOneAssignmentInFlightUntilItsSizeIsKnownThenOneAnAgent", func(t *testing.T) {
		t.Parallel()
		var teams assignTeams
		s := teams.team("billing")
		first, err := s.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := takeSoon(s); err == nil {
			t.Fatal("a second assignment went while the team's size was unknown")
		}
		teams.team("billing").resize(2)
		second, err := s.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		third, err := s.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := takeSoon(s); err == nil {
			t.Fatal("a third assignment went with two agents, both being given tickets")
		}
		first() // from the set before the resize: gives nothing of the new one back
		if _, err := takeSoon(s); err == nil {
			t.Fatal("a slot of the old size was given to the new set")
		}
		second()
		second() // once only
		if _, err := takeWithin(s, 10*time.Second); err != nil {
			t.Fatalf("no slot after one was given back: %v", err)
		}
		third()
	})

	t.Run("ATeamWithoutAgentsIsNotHeldToOneAtATime", func(t *testing.T) {
		t.Parallel()
		var teams assignTeams
		s := teams.team("general")
		if _, err := s.take(ctx); err != nil {
			t.Fatal(err)
		}
		teams.team("general").resize(0)
		for range 3 {
			if _, err := takeWithin(s, 10*time.Second); err != nil {
				t.Fatalf("an assignment to a team without agents waited: %v", err)
			}
		}
		teams.team("general").resize(1) // an agent joined
		if _, err := s.take(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := takeSoon(s); err == nil {
			t.Fatal("a second assignment went with the team's one agent being given a ticket")
		}
	})

	t.Run("AnAssignmentWaitingIsWokenWhenAnotherEnds", func(t *testing.T) {
		t.Parallel()
		var teams assignTeams
		teams.team("billing").resize(2)
		s := teams.team("billing")
		done, err := s.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held := s.hold("ana")
		busy, ended := s.busy()
		if !slices.Equal(busy, []string{"ana"}) {
			t.Fatalf("busy %v, want ana", busy)
		}
		select {
		case <-ended:
			t.Fatal("woken before any assignment ended")
		default:
		}
		held()
		done()
		<-ended // a wait would last until the test's deadline
		if busy, _ := s.busy(); len(busy) != 0 {
			t.Errorf("busy %v after ana's transaction ended", busy)
		}
	})

	t.Run("AWaitForASlotEndsWithItsContext", func(t *testing.T) {
		t.Parallel()
		var teams assignTeams
		s := teams.team("billing")
		if _, err := s.take(ctx); err != nil {
			t.Fatal(err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.take(cancelled); !errors.Is(err, context.Canceled) {
			t.Fatalf("take with a cancelled context: %v", err)
		}
	})
}

// An assignment that fails learns nothing of its team's size: the team
// keeps the bound it had; it is not left unbounded, as a team without agents is.
func TestAFailedAssignmentKeepsItsTeamsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	for _, name := range []string{"ana", "ben"} {
		if err := store.New(pool).UpsertAgent(ctx, &store.UpsertAgentParams{Name: name, DisplayName: name,
			Email: name + "@support.example.com", Teams: []string{"billing"}}); err != nil {
			t.Fatal(err)
		}
	}
	d := New(pool, nil, Config{AutoAssign: true})
	s := d.assigning.team("billing")
	assign := func(broken bool) error {
		release, err := s.take(ctx)
		if err != nil {
			return err
		}
		defer release()
		return store.Run(ctx, pool, func(tx *store.Tx) error {
			if broken {
				if err := tx.Rollback(ctx); err != nil {
					return err
				}
			}
			_, held, err := d.classifyAndAssignTx(ctx, tx, s, "T-404", "billing", 2) // no such ticket: nothing to give
			held()
			return err
		})
	}
	if err := assign(false); err != nil {
		t.Fatal(err)
	}
	bound := func() int { // 0: none
		s.mu.Lock()
		defer s.mu.Unlock()
		return cap(s.slots)
	}
	if got := bound(); got != 2 {
		t.Fatalf("%d slots after an assignment counted two agents", got)
	}
	if err := assign(true); err == nil {
		t.Fatal("an assignment in a transaction that is over did not fail")
	}
	if got := bound(); got != 2 {
		t.Errorf("after a failed assignment the team's bound is %d slots (0: none), want 2", got)
	}
}

// takeSoon takes a slot, or gives up after a moment: for checking that
// none is free.
func takeSoon(s *assignSlots) (func(), error) { return takeWithin(s, 50*time.Millisecond) }

func takeWithin(s *assignSlots, d time.Duration) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.take(ctx)
}

// Classify steps that assign commit together, as other steps do: each
// takes its team's slot before it joins a group (store.Combiner), so a
// group never waits for a slot its own steps hold, and more steps than
// the team has agents wait for a slot outside it. Each agent gets as
// many tickets as the others, and nobody is left held.
func TestAssigningClassifySteps(t *testing.T) {
	t.Parallel()
	agents := []string{"ana", "ben", "cyd"}
	classify := func(d *Desk, ticket *store.Ticket) error {
		_, err := d.SaveTriageStep(context.Background(), &TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: TaskClassify,
			Output: "billing", Classification: &provider.Classification{Team: "billing", Priority: 2}})
		return err
	}

	t.Run("CommitTogetherOneAGroupForEachOfTheTeamsSlots", func(t *testing.T) {
		t.Parallel()
		w := newAssigningDesk(t, agents, 2*len(agents))
		release := w.holdSteps(t)
		saved := make(chan error, len(w.tickets))
		for _, ticket := range w.tickets {
			go func() { saved <- classify(w.d, ticket) }()
		}
		// One step a slot waits in the combiner; the others wait for a slot.
		// (Steps saved on their own, past the combiner, end instead.)
		w.awaitQueued(saved, len(agents))
		if n := w.d.steps.Waiting(); n != len(agents) {
			t.Errorf("%d assigning steps waited in the combiner, want %d: one for each of the team's slots", n, len(agents))
		}
		release()
		for range w.tickets {
			if err := <-saved; err != nil {
				t.Fatal(err)
			}
		}
		var together int
		if err := w.pool.QueryRow(w.ctx, `SELECT max(n) FROM (SELECT count(*) n FROM ai_runs GROUP BY xmin::text) s`).Scan(&together); err != nil {
			t.Fatal(err)
		}
		if together != len(agents) {
			t.Errorf("at most %d steps committed in one transaction, want the %d that waited", together, len(agents))
		}
		w.requireGiven(t, map[string]int{"ana": 2, "ben": 2, "cyd": 2})
	})

	// A group holds its agents' rows until it commits; a step of another
	// group passes them by and is given the agent nobody holds.
	t.Run("InTwoGroupsDoNotWaitForEachOther", func(t *testing.T) {
		t.Parallel()
		w := newAssigningDesk(t, agents, len(agents))
		w.d.steps = store.NewCombiner(w.pool, 2, 32)
		releaseFirst, releaseSecond := w.holdSteps(t), w.holdSteps(t)
		saved := make(chan error, len(w.tickets))
		for _, ticket := range w.tickets[:2] {
			go func() { saved <- classify(w.d, ticket) }()
		}
		w.awaitQueued(saved, 2)
		// The first group: two steps, then a unit that sends what they
		// wrote and keeps the group open, their agents' rows locked.
		open, closeGroup, grouped := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			grouped <- w.d.steps.Run(w.ctx, func(tx *store.Tx) error {
				err := tx.Flush(w.ctx)
				close(open)
				<-closeGroup
				return err
			})
		}()
		w.awaitQueued(saved, 3)
		releaseFirst()
		<-open
		// The second group: the third step, given the agent nobody holds
		// while the first group is still open.
		releaseSecond()
		third := make(chan error, 1)
		go func() { third <- classify(w.d, w.tickets[2]) }()
		waited := false
		select {
		case err := <-third:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(20 * time.Second): // far past the milliseconds it takes
			t.Error("the second group's step waited for the first group to commit")
			waited = true
		}
		close(closeGroup)
		if err := <-grouped; err != nil {
			t.Fatal(err)
		}
		if waited { // it ends once the first group commits
			if err := <-third; err != nil {
				t.Fatal(err)
			}
		}
		for range w.tickets[:2] {
			if err := <-saved; err != nil {
				t.Fatal(err)
			}
		}
		w.requireGiven(t, map[string]int{"ana": 1, "ben": 1, "cyd": 1})
	})

	t.Run("RunAgainAloneAfterTheirGroupRolledBackHoldNobody", func(t *testing.T) {
		t.Parallel()
		w := newAssigningDesk(t, agents, len(agents))
		if err := classify(w.d, w.tickets[0]); err != nil { // ana's
			t.Fatal(err)
		}
		release := w.holdSteps(t)
		saved := make(chan error, len(w.tickets))
		for _, ticket := range w.tickets[1:] {
			go func() { saved <- classify(w.d, ticket) }()
		}
		w.awaitQueued(saved, 2)
		// Last in the group, a second delivery of the first ticket's step:
		// its result is there, so the group rolls back, after the others
		// held their agents, and each step runs again alone.
		go func() { saved <- classify(w.d, w.tickets[0]) }()
		w.awaitQueued(saved, 3)
		release()
		for range w.tickets {
			if err := <-saved; err != nil {
				t.Fatal(err)
			}
		}
		w.requireGiven(t, map[string]int{"ana": 1, "ben": 1, "cyd": 1})
	})
}

// assigningDesk is a desk that gives tickets to agents, its steps' combiner
// of one group, and tickets of a customer to classify.
type assigningDesk struct {
	ctx     context.Context
	pool    *pgxpool.Pool
	d       *Desk
	tickets []*store.Ticket
}

func newAssigningDesk(t *testing.T, agents []string, tickets int) *assigningDesk {
	t.Helper()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	if _, err := st.InsertCustomer(ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "ada@example.com", Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range agents {
		if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: name, DisplayName: name, Email: name + "@support.example.com",
			Teams: []string{"billing"}}); err != nil {
			t.Fatal(err)
		}
	}
	w := &assigningDesk{ctx: ctx, pool: pool, d: New(pool, nil, Config{AutoAssign: true})}
	for i := range tickets {
		job := int64(100 + i)
		ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Refund", TriageJobID: &job})
		if err != nil {
			t.Fatal(err)
		}
		w.tickets = append(w.tickets, ticket)
	}
	w.d.assigning.team("billing").resize(len(agents)) // as the team's first assignment would have learnt
	w.d.steps = store.NewCombiner(pool, 1, 32)
	return w
}

// holdSteps keeps the combiner's one group at the database until the
// returned function is called.
func (w *assigningDesk) holdSteps(t *testing.T) (release func()) {
	t.Helper()
	held, let, busy := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		busy <- w.d.steps.Run(w.ctx, func(*store.Tx) error { close(held); <-let; return nil })
	}()
	<-held
	return func() {
		close(let)
		if err := <-busy; err != nil {
			t.Fatal(err)
		}
	}
}

// awaitQueued waits until n steps wait in the held combiner or have
// ended (saved): a step that ends instead of waiting, saved past the
// combiner, ends the wait too, for the test to fail, not hang.
func (w *assigningDesk) awaitQueued(saved chan error, n int) {
	for w.d.steps.Waiting()+len(saved) < n {
		time.Sleep(time.Millisecond)
	}
}

// requireGiven checks how many of the tickets each agent has, and that no
// agent is held as being given one.
func (w *assigningDesk) requireGiven(t *testing.T, want map[string]int) {
	t.Helper()
	given := map[string]int{}
	for _, ticket := range w.tickets {
		got, err := store.New(w.pool).GetTicket(w.ctx, ticket.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Assignee == nil {
			t.Fatalf("%s was given to nobody", ticket.ID)
		}
		given[*got.Assignee]++
	}
	if !maps.Equal(given, want) {
		t.Errorf("tickets given %v, want %v", given, want)
	}
	if busy, _ := w.d.assigning.team("billing").busy(); len(busy) != 0 {
		t.Errorf("%v still held after every step ended", busy)
	}
}
