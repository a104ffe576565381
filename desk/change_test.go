package desk_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestChangeTicket(t *testing.T) {
	t.Parallel()

	t.Run("EachFieldThatChangesIsAnEventByItsActor", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		w.agent(t, "alice", "billing", "shipping")
		ticket := w.open(t, "Parcel", "Hi.")
		status, assignee, team, priority := vocab.StatusPending, "alice", "shipping", 2
		got, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Status: &status, Assignee: &assignee, Team: &team, Priority: &priority})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != status || deref(got.Assignee) != "alice" || deref(got.Team) != "shipping" || *got.Priority != 2 {
			t.Errorf("ticket %+v", got)
		}
		want := []string{"status:open→pending", "assignee:→alice", "team:→shipping", "priority:→2"}
		if events := w.events(t, ticket.ID); !slices.Equal(events, want) {
			t.Errorf("events %v, want %v", events, want)
		}
	})

	t.Run("AStatusChangeTheTableForbidsChangesNothing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		w.agent(t, "alice", "billing")
		ticket := w.open(t, "Done", "Hi.")
		closed, open, assignee := vocab.StatusClosed, vocab.StatusOpen, "alice"
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Status: &closed}); err != nil {
			t.Fatal(err)
		}
		_, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Status: &open, Assignee: &assignee})
		if !errors.Is(err, desk.ErrInvalidTransition) {
			t.Errorf("err = %v, want ErrInvalidTransition", err)
		}
		if got := w.ticket(t, ticket.ID); got.Status != vocab.StatusClosed || got.Assignee != nil {
			t.Errorf("ticket %s assigned %v: the refused change wrote something", got.Status, got.Assignee)
		}
	})

	t.Run("AnUnknownAgentOrTeamIsRefused", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		w.agent(t, "alice", "billing")
		ticket := w.open(t, "Who?", "Hi.")
		nobody, nowhere := "nobody", "nowhere"
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Assignee: &nobody}); !errors.Is(err, desk.ErrUnknownAgent) {
			t.Errorf("unknown agent: err = %v", err)
		}
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Team: &nowhere}); !errors.Is(err, desk.ErrUnknownTeam) {
			t.Errorf("unknown team: err = %v", err)
		}
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), "T-1", &desk.Change{Team: &nowhere}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown ticket: err = %v", err)
		}
	})
}

func TestAddNote(t *testing.T) {
	t.Parallel()

	t.Run("ANoteIsKeptAndNeverMailed", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		ticket := w.open(t, "Parcel", "Hi.")
		note, err := w.desk.AddNote(w.ctx, vocab.Agent("alice"), ticket.ID, "Courier says Monday.")
		if err != nil {
			t.Fatal(err)
		}
		if note.Direction != vocab.DirectionNote || note.EmailMessageID != nil || note.Direction.Public() {
			t.Errorf("note %+v", note)
		}
		if len(w.queue.of("email")) != 0 || len(w.queue.of("notify")) != 0 {
			t.Errorf("a note queued mail: %+v", w.queue.jobs)
		}
	})
}

// Each edge checks what it is sent in its own words; the use cases check
// it again, so that an edge that forgets cannot make PostgreSQL refuse a
// write or store a priority that is none.
func TestWhatNoTicketCanHoldIsRefusedWhateverTheEdge(t *testing.T) {
	t.Parallel()
	w := newWorld(t, true)
	w.agent(t, "alice", "billing")
	ticket := w.open(t, "Parcel", "Hi.")
	before := len(w.messages(t, ticket.ID))
	for _, text := range []string{"", "a\x00b", "\xff\xfe"} {
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: text}); !errors.Is(err, desk.ErrInvalidText) {
			t.Errorf("a reply of %.10q: err = %v, want ErrInvalidText", text, err)
		}
		if _, err := w.desk.AddNote(w.ctx, vocab.Agent("alice"), ticket.ID, text); !errors.Is(err, desk.ErrInvalidText) {
			t.Errorf("a note of %.10q: err = %v, want ErrInvalidText", text, err)
		}
	}
	if err := desk.CheckText(strings.Repeat("a", desk.MaxTextBytes+1)); !errors.Is(err, desk.ErrInvalidText) {
		t.Errorf("text of MaxTextBytes+1 bytes, as the API and the console take it: err = %v", err)
	}
	if after := len(w.messages(t, ticket.ID)); after != before {
		t.Errorf("%d messages, want the %d before", after, before)
	}
	for _, p := range []int{0, 5, -1} {
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Priority: &p}); !errors.Is(err, desk.ErrInvalidPriority) {
			t.Errorf("priority %d: err = %v, want ErrInvalidPriority", p, err)
		}
	}
	if got := w.ticket(t, ticket.ID); got.Priority != nil && (*got.Priority < 1 || *got.Priority > 4) {
		t.Errorf("priority %d written", *got.Priority)
	}
	alice := &store.Agent{Name: "alice", Teams: []string{"billing"}}
	if _, err := w.desk.AddSavedReply(w.ctx, alice, &desk.SavedReplyParams{Title: "Re\x00fund", Body: "Refunded."}); !errors.Is(err, desk.ErrInvalidSavedReply) {
		t.Errorf("a saved reply with a NUL: err = %v, want ErrInvalidSavedReply", err)
	}
}
