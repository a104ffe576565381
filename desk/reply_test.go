package desk_test

import (
	"errors"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestCreateReply(t *testing.T) {
	t.Parallel()

	t.Run("AReplyHasOneMessageIDItsRecipientsAndItsJob", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		ticket := w.open(t, "Parcel", "Where is it?")
		msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "On its way."})
		if err != nil {
			t.Fatal(err)
		}
		em, err := w.st.GetOutboundEmail(w.ctx, msg.ID)
		if err != nil {
			t.Fatal(err)
		}
		if msg.EmailMessageID == nil || em.JobID == nil || *em.JobID != jobID || len(em.Recipients) != 1 || em.Recipients[0].Address != ada.Email {
			t.Errorf("reply %+v, delivery %+v", msg, em)
		}
		got := w.ticket(t, ticket.ID)
		if got.Status != vocab.StatusPending || got.FirstResponseAt == nil {
			t.Errorf("ticket %s, first response %v: want pending and answered", got.Status, got.FirstResponseAt)
		}
	})

	t.Run("AReplyToAClosedTicketIsRefused", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		ticket := w.open(t, "Done", "Hi.")
		closed := vocab.StatusClosed
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), ticket.ID, &desk.Change{Status: &closed}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Late."}); !errors.Is(err, desk.ErrTicketClosed) {
			t.Errorf("err = %v, want ErrTicketClosed", err)
		}
		if len(w.queue.of("email")) != 0 {
			t.Error("a refused reply queued mail")
		}
	})

	t.Run("TheDraftIsRefusedWhenThereIsNoneOrItIsStale", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		ticket := w.open(t, "Parcel", "Hi.")
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), FromDraft: true}); !errors.Is(err, desk.ErrNoDraft) {
			t.Errorf("no draft: err = %v", err)
		}
		if _, err := w.desk.SaveTriageStep(w.ctx, &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskDraftReply,
			Output: "Dear Ada", Draft: "Dear Ada"}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.desk.AddCustomerMessage(w.ctx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: vocab.Customer(ada.ID), Body: "Also…"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), FromDraft: true}); !errors.Is(err, desk.ErrDraftStale) {
			t.Errorf("stale draft: err = %v", err)
		}
	})

	t.Run("WithoutARelayAReplyIsRefusedAndWritesNothing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Parcel", "Hi.")
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Hi."}); !errors.Is(err, desk.ErrNoRelay) {
			t.Errorf("err = %v, want ErrNoRelay", err)
		}
		if msgs := w.messages(t, ticket.ID); len(msgs) != 1 {
			t.Errorf("%d messages: the refused reply was kept", len(msgs))
		}
		if got := w.ticket(t, ticket.ID); got.Status != vocab.StatusOpen {
			t.Errorf("ticket %s", got.Status)
		}
	})
}
