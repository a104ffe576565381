package desk

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// classifyAndAssignTx records the team and priority triage chose and
// gives the ticket to the least busy active agent of that team (fewest
// open and pending tickets; ties: assigned least recently), unless it has
// an assignee already, in the caller's transaction: the one that saves
// the classification. The caller holds one of the team's slots (take)
// until that transaction has ended. It returns the agent, "" for none, and
// a function to call once the transaction has ended (also with an error):
// the agent is held, as about to have one more, until then.
//
// Other assignments of the same transaction (a group of steps,
// store.Combiner) are counted twice, once in the agents' rows the
// transaction sees and once as held: that changes no pick. The pick is
// the least loaded of the agents no other transaction holds, and the
// agents of this one are among those, so what decides whether it may
// have the ticket is the load of the agents other transactions hold,
// counted once each. So a pick that waits waits for another transaction,
// never for a step of its own group, and two groups never wait for each
// other: each would need an agent the other holds to have fewer tickets
// than every agent it holds itself.
func (d *Desk) classifyAndAssignTx(ctx context.Context, tx *store.Tx, slots *assignSlots, ticketID, team string, priority int) (agent string, held func(), err error) {
	// A try that finds no agent it may give the ticket to waits for
	// another assignment of the team to end, one that ended since the try
	// began included: ended is the try's.
	var ended <-chan struct{}
	agent, agents, err := tx.Store().AssignToTeam(ctx, &store.AssignParams{
		TicketID: ticketID, Team: team, Priority: priority,
		Busy: func() []string {
			var busy []string
			busy, ended = slots.busy()
			return busy
		},
		Await: func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ended:
				return nil
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	if err != nil {
		return "", func() {}, err // agents is not known: the bound stays as it was
	}
	slots.resize(agents)
	if agent == "" {
		return "", func() {}, nil
	}
	event(tx, ticketID, vocab.System, "assignee", "", agent)
	return agent, slots.hold(agent), nil
}

// assignTeams holds, per team, this process's assignments in flight.
type assignTeams struct {
	mu    sync.Mutex
	teams map[string]*assignSlots
}

// team returns team's slots.
func (t *assignTeams) team(team string) *assignSlots {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.teams[team]
	if s == nil {
		if t.teams == nil {
			t.teams = map[string]*assignSlots{}
		}
		// One at a time until the first assignment learns the team's size.
		s = &assignSlots{slots: make(chan struct{}, 1), held: map[string]int{}, ended: make(chan struct{})}
		t.teams[team] = s
	}
	return s
}

// assignSlots are a team's assignments in flight in this process: no
// more than the team has active agents. Each holds the agent it picked
// until its transaction ends, and while every agent is held another
// assignment would find none free and try again after a wait (at 50
// triage workers and a team of three, 4.6 tries for every ticket
// assigned, each a statement and a trip); here it waits for a slot
// instead, woken as soon as one is given back, and costs PostgreSQL
// nothing meanwhile. The agents held are
// told to the store's fairness check (busy): each is about to have one
// more. Other processes' assignments are not counted here; the store
// passes by the agents they hold and checks against what they committed.
type assignSlots struct {
	mu    sync.Mutex
	slots chan struct{} // a slot taken is a value sent; nil: no bound
	held  map[string]int
	ended chan struct{} // closed, and made anew, when an assignment ends
}

// take waits for a slot and returns its release, which may be called
// more than once.
func (s *assignSlots) take(ctx context.Context) (func(), error) {
	s.mu.Lock()
	slots := s.slots
	s.mu.Unlock()
	if slots == nil {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
		var once sync.Once
		return func() {
			once.Do(func() {
				<-slots
				s.mu.Lock()
				close(s.ended)
				s.ended = make(chan struct{})
				s.mu.Unlock()
			})
		}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// resize makes room for n assignments at once, the team's active agents
// as the store's pick counted them (any number for n < 1: a team without
// agents holds nobody), for later takes; slots taken before are given
// back to the set they came from.
func (s *assignSlots) resize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case n < 1:
		s.slots = nil
	case cap(s.slots) != n || s.slots == nil:
		s.slots = make(chan struct{}, n)
	}
}

// hold marks agent as being given a ticket until the returned function
// is called.
func (s *assignSlots) hold(agent string) func() {
	s.mu.Lock()
	s.held[agent]++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.held[agent]--; s.held[agent] == 0 {
				delete(s.held, agent)
			}
			s.mu.Unlock()
		})
	}
}

// busy lists the agents held, and returns the channel closed when the
// next assignment ends.
func (s *assignSlots) busy() ([]string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.held))
	for name := range s.held {
		names = append(names, name)
	}
	return names, s.ended
}

// Autoclose closes the tickets solved before the time, each in a
// transaction of its own with its event, and returns how many it closed.
func (d *Desk) Autoclose(ctx context.Context, before time.Time) (int, error) {
	closed := 0
	for {
		ids, err := store.New(d.pool).SolvedBefore(ctx, before, 100)
		if err != nil {
			return closed, err
		}
		if len(ids) == 0 {
			return closed, nil
		}
		for _, id := range ids {
			err := store.Run(ctx, d.pool, func(tx *store.Tx) error {
				st := tx.Store()
				t, err := st.LockTicket(ctx, id)
				if err != nil {
					return err
				}
				if t.Status != vocab.StatusSolved || t.SolvedAt == nil || !t.SolvedAt.Before(before) {
					return nil // the customer wrote meanwhile
				}
				closed++
				setStatus(tx, t, vocab.System, vocab.StatusClosed)
				return nil
			})
			if err != nil {
				return closed, fmt.Errorf("autoclose %s: %w", id, err)
			}
		}
	}
}
