package desk_test

import (
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestCancelJob(t *testing.T) {
	t.Parallel()

	t.Run("ACancelledReplyIsFailedWithANoteAndAnEvent", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		ticket := w.open(t, "Parcel", "Hi.")
		msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "On its way."})
		if err != nil {
			t.Fatal(err)
		}
		c, err := w.desk.CancelJob(w.ctx, vocab.Agent("root"), jobID)
		if err != nil || c.MessageID != msg.ID {
			t.Fatalf("cancelled %+v (%v)", c, err)
		}
		em, _ := w.st.GetOutboundEmail(w.ctx, msg.ID)
		notes := ofDirection(w.messages(t, ticket.ID), vocab.DirectionNote)
		if em.State != store.DeliveryFailed || em.Recipients[0].State != store.RecipientFailed || len(notes) != 1 ||
			!strings.Contains(notes[0].Body, "cancelled by agent:root") {
			t.Errorf("email %s, recipient %s, notes %+v", em.State, em.Recipients[0].State, notes)
		}
		if ev := w.events(t, ticket.ID); !strings.Contains(strings.Join(ev, " "), "email_cancelled") {
			t.Errorf("events %v", ev)
		}
	})
}
