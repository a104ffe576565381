package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TestAStoreSetterFindsItsTicketOrSaysSo holds the Store's ticket setters,
// which lock nothing, to ErrNotFound for a ticket that is not there; their
// Batch forms, for a ticket the caller holds locked, check nothing.
func TestAStoreSetterFindsItsTicketOrSaysSo(t *testing.T) {
	t.Parallel()
	_, st := team(t)
	ctx := context.Background()
	id := newTicket(t, st)
	for _, tc := range []struct {
		name string
		set  func(id string) error
	}{
		{"Status", func(id string) error { return st.SetTicketStatus(ctx, id, vocab.StatusPending) }},
		{"Assignee", func(id string) error { return st.SetTicketAssignee(ctx, id, "ana") }},
		{"Team", func(id string) error { return st.SetTicketTeam(ctx, id, "billing") }},
		{"Priority", func(id string) error { return st.SetTicketPriority(ctx, id, 2) }},
		{"TriageJob", func(id string) error { return st.SetTicketTriageJob(ctx, id, 7) }},
		{"FirstResponse", func(id string) error { return st.AgentResponded(ctx, id) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.set(id); err != nil {
				t.Errorf("on %s: %v", id, err)
			}
			if err := tc.set("T-999999999"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("on a ticket that is not there: %v, want ErrNotFound", err)
			}
		})
	}
}
