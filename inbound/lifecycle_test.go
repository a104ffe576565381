package inbound_test

import (
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestCustomerMailMovesTheTicket(t *testing.T) {
	t.Parallel()
	mailAbout := func(ticketID, id string) []byte {
		return []byte("From: Ada Lovelace <ada.lovelace@example.com>\r\nTo: support+" + ticketID + "@helpdesk.example.com\r\n" +
			"Subject: Re: Refund\r\nMessage-ID: " + id + "\r\n\r\nStill waiting.\r\n")
	}

	t.Run("AMailOnAPendingTicketReopensIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID := b.openAPITicket(t, "C-0001", "Refund")
		status := vocab.StatusPending
		if _, err := b.Desk(b.queue).ChangeTicket(b.Ctx, "agent:alice", ticketID, &desk.Change{Status: &status}); err != nil {
			t.Fatal(err)
		}
		out := b.receive(t, mailAbout(ticketID, "<again.1@example.com>"), "support+"+ticketID+"@helpdesk.example.com")
		tk, _ := b.Store.GetTicket(b.Ctx, ticketID)
		if out.Kind != "reply" || out.TicketID != ticketID || tk.Status != vocab.StatusOpen || tk.LastCustomerMessageAt == nil {
			t.Errorf("outcome %+v, ticket %s", out, tk.Status)
		}
	})

	t.Run("AMailOnAClosedTicketOpensAFollowUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID := b.openAPITicket(t, "C-0001", "Refund")
		status := vocab.StatusClosed
		if _, err := b.Desk(b.queue).ChangeTicket(b.Ctx, "agent:alice", ticketID, &desk.Change{Status: &status}); err != nil {
			t.Fatal(err)
		}
		out := b.receive(t, mailAbout(ticketID, "<again.2@example.com>"), "support+"+ticketID+"@helpdesk.example.com")
		if out.Kind != "follow_up" || out.TicketID == ticketID {
			t.Fatalf("outcome %+v, want a follow-up ticket", out)
		}
		followUp, _ := b.Store.GetTicket(b.Ctx, out.TicketID)
		if followUp.FollowUpOf == nil || *followUp.FollowUpOf != ticketID || followUp.Status != vocab.StatusOpen || followUp.TriageJobID == nil {
			t.Errorf("follow-up %+v", followUp)
		}
		// The same mail again changes nothing.
		if again := b.receive(t, mailAbout(ticketID, "<again.2@example.com>"), "support+"+ticketID+"@helpdesk.example.com"); again.Kind != "duplicate" {
			t.Errorf("the same mail twice: %+v", again)
		}
		if old, _ := b.Store.GetTicket(b.Ctx, ticketID); old.Status != vocab.StatusClosed {
			t.Errorf("the closed ticket is %s", old.Status)
		}
	})
}
