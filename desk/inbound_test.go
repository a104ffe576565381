package desk_test

import (
	"errors"
	"testing"

	"helpdesk/desk"
	"helpdesk/vocab"
)

// mailFrom is an inbound mail as the listener parses it.
func mailFrom(from, id, subject, text string, inReplyTo ...string) *desk.InboundMail {
	return &desk.InboundMail{MessageID: id, HasOwnID: true, From: from, Subject: subject, Text: text, InReplyTo: inReplyTo}
}

var support = []string{"support@" + supportDomain}

func TestFileInbound(t *testing.T) {
	t.Parallel()

	t.Run("ANewMailIsANewTicketOfItsSender", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		out, err := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<m1@mail.example.com>", "Late parcel", "Where is it?"), []byte("raw"))
		if err != nil {
			t.Fatal(err)
		}
		msgs := w.messages(t, out.TicketID)
		if out.Kind != "new_ticket" || w.ticket(t, out.TicketID).CustomerID != ada.ID || len(msgs) != 1 || *msgs[0].EmailMessageID != "<m1@mail.example.com>" {
			t.Errorf("filed %+v with messages %+v", out, msgs)
		}
	})

	t.Run("AMailFiledTwiceChangesNothing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		m := mailFrom(ada.Email, "<m1@mail.example.com>", "Late parcel", "Where is it?")
		first, err := w.desk.FileInbound(w.ctx, support, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		again, err := w.desk.FileInbound(w.ctx, support, m, nil)
		if err != nil || again.Kind != "duplicate" || len(w.messages(t, first.TicketID)) != 1 || len(w.queue.of("triage")) != 1 {
			t.Errorf("again: %+v (%v): want a duplicate and nothing new", again, err)
		}
	})

	t.Run("AnAnswerByItsHeadersJoinsTheTicket", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		first, _ := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<m1@mail.example.com>", "Late parcel", "Where is it?"), nil)
		out, err := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<m2@mail.example.com>", "Re: Late parcel", "Still late.",
			"<m1@mail.example.com>"), nil)
		if err != nil || out.Kind != "reply" || out.TicketID != first.TicketID || out.Matched != "headers" {
			t.Errorf("filed %+v (%v), want a reply on %s by headers", out, err, first.TicketID)
		}
	})

	t.Run("StrangerNamingATicketOpensANewOne", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Refund", "Please refund.")
		stranger := "evil@attacker.example"
		plus := []string{"support+" + ticket.ID + "@" + supportDomain}
		out, err := w.desk.FileInbound(w.ctx, plus, mailFrom(stranger, "<x1@attacker.example>", "[#"+ticket.ID+"] pay here", "Pay now."), nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.TicketID == ticket.ID || len(w.messages(t, ticket.ID)) != 1 {
			t.Errorf("filed %+v: a stranger naming %s wrote into it", out, ticket.ID)
		}
	})

	t.Run("AnUnknownSenderBecomesACustomerByItsName", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		m := mailFrom("walter@example.com", "<w1@example.com>", "Hello", "Hi.")
		m.FromName = "Walter Skinner"
		out, err := w.desk.FileInbound(w.ctx, support, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := w.st.CustomerByEmail(w.ctx, "walter@example.com")
		if err != nil || c.Name != "Walter Skinner" || w.ticket(t, out.TicketID).CustomerID != c.ID {
			t.Errorf("customer %+v (%v), ticket %s", c, err, out.TicketID)
		}
		if msgs := w.messages(t, out.TicketID); msgs[0].Author != vocab.Customer(c.ID) {
			t.Errorf("author %s", msgs[0].Author)
		}
	})

	t.Run("AMailWithoutASenderIsRefused", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		if _, err := w.desk.FileInbound(w.ctx, support, mailFrom("", "<n1@example.com>", "Hello", "Hi."), nil); !errors.Is(err, desk.ErrNoSender) {
			t.Errorf("err = %v, want ErrNoSender", err)
		}
	})

	t.Run("AReportOnNoMailOfOursIsIgnored", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		m := mailFrom("mailer-daemon@example.com", "<r1@example.com>", "Undelivered", "Sorry.")
		m.Report = &desk.DeliveryReport{OriginalMessageID: "<never@sent.example>", Failed: map[string]string{ada.Email: "5.1.1"}}
		out, err := w.desk.FileInbound(w.ctx, support, m, nil)
		if err != nil || out.Kind != "ignored" {
			t.Errorf("filed %+v (%v), want ignored", out, err)
		}
		if s, _ := w.st.ListSuppressions(w.ctx); len(s) != 0 {
			t.Errorf("suppressed %+v on a report about nothing we sent", s)
		}
	})

	t.Run("OnlyTheSupportDomainsTakeMail", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		if !w.desk.AcceptsRecipient("Support@HELPDESK.example.com") || w.desk.AcceptsRecipient("support@elsewhere.example") {
			t.Error("recipients of the support domain are taken, in any case, and no others")
		}
	})
}
