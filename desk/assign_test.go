package desk_test

import (
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestAutoclose(t *testing.T) {
	t.Parallel()

	t.Run("ASolvedTicketClosesOnlyAfterItsTimeWithAnEvent", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		solvedOne, openOne := w.open(t, "Solved", "Hi."), w.open(t, "Open", "Hi.")
		solved := vocab.StatusSolved
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), solvedOne.ID, &desk.Change{Status: &solved}); err != nil {
			t.Fatal(err)
		}
		if n, err := w.desk.Autoclose(w.ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
			t.Errorf("closed %d (%v) before the time", n, err)
		}
		n, err := w.desk.Autoclose(w.ctx, time.Now().Add(time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("closed %d (%v), want 1", n, err)
		}
		if w.ticket(t, solvedOne.ID).Status != vocab.StatusClosed || w.ticket(t, openOne.ID).Status != vocab.StatusOpen {
			t.Error("autoclose closed the wrong ticket")
		}
		events, _ := w.st.ListTicketEvents(w.ctx, solvedOne.ID)
		if last := events[len(events)-1]; last.Actor != vocab.System || deref(last.To) != "closed" {
			t.Errorf("last event %+v, want the system closing it", last)
		}
	})

	t.Run("ACustomerWhoWroteKeepsTheTicket", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Solved", "Hi.")
		solved := vocab.StatusSolved
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Status: &solved}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.desk.AddCustomerMessage(w.ctx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: vocab.Customer(ada.ID), Body: "Not yet."}); err != nil {
			t.Fatal(err)
		}
		if n, _ := w.desk.Autoclose(w.ctx, time.Now().Add(time.Hour)); n != 0 || w.ticket(t, ticket.ID).Status != vocab.StatusOpen {
			t.Errorf("closed %d; the ticket is %s, want open", n, w.ticket(t, ticket.ID).Status)
		}
	})
}
