package desk_test

import (
	"errors"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestOpenTicket(t *testing.T) {
	t.Parallel()

	t.Run("ANewTicketHasItsFirstMessageAndItsTriageJob", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket, jobID, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "Late parcel", Body: "Where is it?"})
		if err != nil {
			t.Fatal(err)
		}
		got := w.ticket(t, ticket.ID)
		msgs := w.messages(t, ticket.ID)
		if got.Status != vocab.StatusOpen || got.TriageJobID == nil || *got.TriageJobID != jobID || got.LastCustomerMessageAt == nil {
			t.Errorf("ticket %+v, job %d", got, jobID)
		}
		if len(msgs) != 1 || msgs[0].Author != vocab.Customer(ada.ID) || msgs[0].Direction != vocab.DirectionInbound || msgs[0].EmailMessageID == nil {
			t.Errorf("messages %+v: want the customer's, with a thread root", msgs)
		}
		if j := w.queue.of("triage"); len(j) != 1 || j[0].TicketID != ticket.ID {
			t.Errorf("queued %+v, want one triage job of %s", j, ticket.ID)
		}
	})

	t.Run("AnUnknownCustomerWritesNothing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		_, _, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: "C-9999", Subject: "Who?", Body: "Hi."})
		if !errors.Is(err, store.ErrUnknownCustomer) {
			t.Errorf("err = %v, want ErrUnknownCustomer", err)
		}
		if list, _ := w.st.ListTickets(w.ctx, &store.ListTicketsParams{Limit: 10}); len(list) != 0 {
			t.Errorf("%d tickets written", len(list))
		}
	})

	t.Run("WithoutAnAcknowledgementTheTicketCostsTwoRoundTrips", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ctx, trips := storetest.CountTrips(w.ctx)
		if _, _, err := w.desk.OpenTicket(ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "Count", Body: "Hi."}); err != nil {
			t.Fatal(err)
		}
		// BEGIN with the numbers; the rows with COMMIT (the queue's insert is River's, not counted here).
		if trips.N() != 2 {
			t.Errorf("%d round trips, want 2:\n%s", trips.N(), trips)
		}
	})

	t.Run("AnAgentsTicketForACustomerIsNotAcknowledged", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Ack = &desk.AckConfig{} })
		w.agent(t, "alice", "billing")
		ticket, _, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "On the phone", Body: "Ada called.",
			Author: vocab.Agent("alice")})
		if err != nil {
			t.Fatal(err)
		}
		if acks := ofDirection(w.messages(t, ticket.ID), vocab.DirectionAcknowledgement); len(acks) != 0 || len(w.queue.of("email")) != 0 {
			t.Errorf("acknowledgements %d, email jobs %d: want none for an agent's ticket", len(acks), len(w.queue.of("email")))
		}
	})
}

func TestCustomerMessage(t *testing.T) {
	t.Parallel()

	t.Run("ClosedTicketMessageOpensFollowUp", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		closed := w.open(t, "Old question", "Hi.")
		status := vocab.StatusClosed
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), closed.ID, &desk.Change{Status: &status}); err != nil {
			t.Fatal(err)
		}
		out, err := w.desk.AddCustomerMessage(w.ctx, &desk.CustomerMessageParams{TicketID: closed.ID, Author: vocab.Customer(ada.ID), Body: "Again."})
		if err != nil {
			t.Fatal(err)
		}
		follow := w.ticket(t, out.TicketID)
		if !out.FollowUp || out.TicketID == closed.ID || follow.FollowUpOf == nil || *follow.FollowUpOf != closed.ID {
			t.Errorf("filed %+v as %+v: want a follow-up of %s", out, follow, closed.ID)
		}
		if w.ticket(t, closed.ID).Status != vocab.StatusClosed || len(w.messages(t, closed.ID)) != 1 {
			t.Error("the closed ticket changed")
		}
	})

	t.Run("APendingTicketReopensAndIsTriagedAgain", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Question", "Hi.")
		pending := vocab.StatusPending
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Status: &pending}); err != nil {
			t.Fatal(err)
		}
		out, err := w.desk.AddCustomerMessage(w.ctx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: vocab.Customer(ada.ID), Body: "More."})
		if err != nil {
			t.Fatal(err)
		}
		got := w.ticket(t, ticket.ID)
		if got.Status != vocab.StatusOpen || out.JobID == 0 || *got.TriageJobID != out.JobID || len(w.queue.of("triage")) != 2 {
			t.Errorf("ticket %s, triage job %v (message's %d), %d triage jobs: want open and triaged again",
				got.Status, got.TriageJobID, out.JobID, len(w.queue.of("triage")))
		}
	})

	t.Run("AnAutoReplyIsStoredAndStartsNothing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Question", "Hi.")
		solved := vocab.StatusSolved
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Status: &solved}); err != nil {
			t.Fatal(err)
		}
		out, err := w.desk.AddCustomerMessage(w.ctx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: vocab.Customer(ada.ID),
			Body: "I am out of office.", Automatic: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := w.ticket(t, ticket.ID); got.Status != vocab.StatusSolved || out.JobID != 0 || len(w.queue.of("triage")) != 1 {
			t.Errorf("ticket %s, job %d: want it solved still and untriaged", got.Status, out.JobID)
		}
	})
}
