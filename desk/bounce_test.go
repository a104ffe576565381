package desk_test

import (
	"strings"
	"testing"

	"helpdesk/desk"
	"helpdesk/vocab"
)

func TestBounceReport(t *testing.T) {
	t.Parallel()

	t.Run("AReportOnOurReplyMarksItsRecipientSuppressesAndReopens", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		ticket := w.open(t, "Parcel", "Hi.")
		msg, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "On its way."})
		if err != nil {
			t.Fatal(err)
		}
		w.deliverAll(t)
		report := mailFrom("mailer-daemon@mx.example.com", "<b1@mx.example.com>", "Undelivered Mail", "Sorry.")
		report.Report = &desk.DeliveryReport{OriginalMessageID: *msg.EmailMessageID,
			Failed: map[string]string{ada.Email: "5.1.1 smtp; 550 5.1.1 User unknown"}}
		out, err := w.desk.FileInbound(w.ctx, support, report, nil)
		if err != nil || out.Kind != "bounce" || out.TicketID != ticket.ID {
			t.Fatalf("filed %+v (%v)", out, err)
		}
		em, _ := w.st.GetOutboundEmail(w.ctx, msg.ID)
		notes := ofDirection(w.messages(t, ticket.ID), vocab.DirectionNote)
		if em.Recipients[0].State != "failed" || len(notes) != 1 || !strings.Contains(notes[0].Body, "suppressed") ||
			w.ticket(t, ticket.ID).Status != vocab.StatusOpen {
			t.Errorf("recipient %s, notes %+v, ticket %s", em.Recipients[0].State, notes, w.ticket(t, ticket.ID).Status)
		}
		if s, _ := w.st.ListSuppressions(w.ctx); len(s) != 1 || s[0].Address != ada.Email {
			t.Errorf("suppressions %+v", s)
		}
	})
}
