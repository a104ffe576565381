package desk

import (
	"context"
	"fmt"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// assignTx gives the ticket to the least busy active agent of its team
// (fewest open and pending tickets; ties: assigned least recently), unless
// it has an assignee already, in the caller's transaction: the one that
// saves the team triage chose. It returns the agent, "" for none.
func (d *Desk) assignTx(ctx context.Context, tx *store.Tx, ticketID, team string) (string, error) {
	agent, err := tx.Store().AssignToTeam(ctx, ticketID, team)
	if err != nil || agent == "" {
		return "", err
	}
	event(tx, ticketID, vocab.System, "assignee", "", agent)
	return agent, nil
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
