package desk_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestBounceReport(t *testing.T) {
	t.Parallel()

	t.Run("AReportOnOurReplyMarksItsRecipientSuppressesAndReopens", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, withReplySecret)
		ticket, msg := w.deliveredReply(t)
		report := mailFrom("mailer-daemon@mx.example.com", "<b1@mx.example.com>", "Undelivered Mail", "Sorry.")
		report.Report = &desk.DeliveryReport{OriginalMessageID: *msg.EmailMessageID,
			Failed: map[string]string{ada.Email: "5.1.1 smtp; 550 5.1.1 User unknown"}}
		forged := *report
		forged.MessageID = "<b0@mx.example.com>"
		if out, err := w.desk.FileInbound(w.ctx, support, &forged); err != nil || out.Kind != "held" {
			t.Fatalf("a report to the support address: %+v (%v), want held", out, err)
		}
		if s, _ := w.st.ListSuppressions(w.ctx); len(s) != 0 {
			t.Fatalf("a report to the support address suppressed %+v", s)
		}
		out, err := w.desk.FileInbound(w.ctx, []string{bounceAddress(msg.ID)}, report)
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

// A report on several recipients notes them in the order of their
// addresses, whatever the map's: the ticket reads the same each time.
func TestAReportOnSeveralRecipientsNotesThemInOneOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t, true, withReplySecret)
	ticket := w.open(t, "Parcel", "Hi.")
	cc := []*mail.Address{{Address: "zoe@example.net"}, {Address: "bob@example.net"}, {Address: "mia@example.net"}}
	msg, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "On its way.", Cc: cc})
	if err != nil {
		t.Fatal(err)
	}
	w.deliverAll(t)
	for _, delayed := range []bool{true, false} {
		statuses := map[string]string{}
		for _, a := range append(cc, &mail.Address{Address: ada.Email}) {
			statuses[a.Address] = "5.1.1 smtp; 550 5.1.1 User unknown"
		}
		report := mailFrom("mailer-daemon@mx.example.com", fmt.Sprintf("<report.%v@mx.example.com>", delayed), "Delivery Status", "Sorry.")
		report.Report = &desk.DeliveryReport{OriginalMessageID: *msg.EmailMessageID, Failed: statuses}
		if delayed {
			report.Report.Failed, report.Report.Delayed = nil, statuses
		}
		if _, err := w.desk.FileInbound(w.ctx, []string{bounceAddress(msg.ID)}, report); err != nil {
			t.Fatal(err)
		}
	}
	var named []string
	for _, n := range ofDirection(w.messages(t, ticket.ID), vocab.DirectionNote) {
		for _, a := range []string{ada.Email, "bob@example.net", "mia@example.net", "zoe@example.net"} {
			if strings.Contains(n.Body, " to "+a+" ") {
				named = append(named, a)
			}
		}
	}
	sorted := []string{ada.Email, "bob@example.net", "mia@example.net", "zoe@example.net"}
	slices.Sort(sorted)
	if want := append(slices.Clone(sorted), sorted...); !slices.Equal(named, want) {
		t.Errorf("the notes name %v, want the delays then the bounces, each in the order %v", named, sorted)
	}
}

// A report at the bounce address speaks for whoever received the mail;
// it may say no more than how the mail fared with its own recipients.
func TestAReportNamingNoRecipientOfTheMailChangesNothing(t *testing.T) {
	t.Parallel()
	for _, delayed := range []bool{true, false} {
		t.Run(map[bool]string{true: "Delayed", false: "Failed"}[delayed], func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, true, withReplySecret)
			ticket, msg := w.deliveredReply(t)
			before := len(w.messages(t, ticket.ID))
			statuses := map[string]string{"victim@example.org": "4.4.7 smtp; 451 4.4.7 Still trying"}
			report := mailFrom("mailer-daemon@mx.example.com", "<stranger@mx.example.com>", "Delivery Status", "Sorry.")
			report.Report = &desk.DeliveryReport{OriginalMessageID: *msg.EmailMessageID, Failed: statuses}
			if delayed {
				report.Report.Failed, report.Report.Delayed = nil, statuses
			}
			out, err := w.desk.FileInbound(w.ctx, []string{bounceAddress(msg.ID)}, report)
			if err != nil || out.Kind != "ignored" {
				t.Fatalf("filed %+v (%v), want ignored", out, err)
			}
			if after := w.messages(t, ticket.ID); len(after) != before {
				t.Errorf("the ticket went from %d messages to %d: %+v", before, len(after), after[len(after)-1])
			}
			if em, _ := w.st.GetOutboundEmail(w.ctx, msg.ID); em.Recipients[0].State != "sent" && em.Recipients[0].State != "captured" {
				t.Errorf("its recipient is %s", em.Recipients[0].State)
			}
		})
	}
}

// deliveredReply is a customer's ticket with alice's reply, delivered.
func (w *world) deliveredReply(t *testing.T) (*store.Ticket, *store.Message) {
	t.Helper()
	ticket := w.open(t, "Parcel", "Hi.")
	msg, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "On its way."})
	if err != nil {
		t.Fatal(err)
	}
	w.deliverAll(t)
	return ticket, msg
}

const replySecret = "a secret of this test, long enough"

func withReplySecret(c *desk.Config) { c.ReplySecret = replySecret }

// bounceAddress is the envelope sender of message id, under withReplySecret.
func bounceAddress(id int64) string {
	return (&mail.ReplyAddresses{Local: "support", Domain: supportDomain, Secret: []byte(replySecret)}).BounceAddress(id)
}
