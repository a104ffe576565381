package desk

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

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
		teams.size("billing", 2)
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
		teams.size("general", 0)
		for range 3 {
			if _, err := takeWithin(s, 10*time.Second); err != nil {
				t.Fatalf("an assignment to a team without agents waited: %v", err)
			}
		}
		teams.size("general", 1) // an agent joined
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
		teams.size("billing", 2)
		s := teams.team("billing")
		done, err := s.take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done = s.hold("ana", done)
		busy, ended := s.busy()
		if !slices.Equal(busy, []string{"ana"}) {
			t.Fatalf("busy %v, want ana", busy)
		}
		select {
		case <-ended:
			t.Fatal("woken before any assignment ended")
		default:
		}
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
	assign := func(broken bool) error {
		return store.Run(ctx, pool, func(tx *store.Tx) error {
			if broken {
				if err := tx.Rollback(ctx); err != nil {
					return err
				}
			}
			_, done, err := d.classifyAndAssignTx(ctx, tx, "T-404", "billing", 2) // no such ticket: nothing to give
			done()
			return err
		})
	}
	if err := assign(false); err != nil {
		t.Fatal(err)
	}
	s := d.assigning.team("billing")
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

// A classify step that assigns takes its team's slot, which another step
// of the same group could hold until the group commits: it is saved
// alone, not through the combiner, and never waits for a group.
func TestAnAssigningClassifyIsSavedOutsideTheCombiner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	if _, err := st.InsertCustomer(ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "ada@example.com", Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: "ana", DisplayName: "ana", Email: "ana@support.example.com",
		Teams: []string{"billing"}}); err != nil {
		t.Fatal(err)
	}
	job := int64(7)
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Refund", TriageJobID: &job})
	if err != nil {
		t.Fatal(err)
	}
	d := New(pool, nil, Config{AutoAssign: true})
	d.steps = store.NewCombiner(pool, 1, 32)
	// The combiner's one group is at the database until released.
	held, release, busy := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		busy <- d.steps.Run(ctx, func(*store.Tx) error { close(held); <-release; return nil })
	}()
	<-held
	defer func() {
		close(release)
		if err := <-busy; err != nil {
			t.Error(err)
		}
	}()
	saved := make(chan error, 1)
	go func() {
		_, err := d.SaveTriageStep(ctx, &TriageResult{JobID: job, TicketID: ticket.ID, Task: TaskClassify, Output: "billing",
			Classification: &provider.Classification{Team: "billing", Priority: 2}})
		saved <- err
	}()
	select {
	case err := <-saved:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the assigning classify waited for the combiner's group")
	}
	got, err := st.GetTicket(ctx, ticket.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Assignee == nil || *got.Assignee != "ana" {
		t.Errorf("assignee %v, want ana", got.Assignee)
	}
}
