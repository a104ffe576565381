package desk_test

import (
	"errors"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
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
		out, err := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<m1@mail.example.com>", "Late parcel", "Where is it?"))
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
		first, err := w.desk.FileInbound(w.ctx, support, m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := w.desk.FileInbound(w.ctx, support, m)
		if err != nil || again.Kind != "duplicate" || len(w.messages(t, first.TicketID)) != 1 || len(w.queue.of("triage")) != 1 {
			t.Errorf("again: %+v (%v): want a duplicate and nothing new", again, err)
		}
	})

	t.Run("AnAnswerByItsHeadersJoinsTheTicket", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		first, _ := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<m1@mail.example.com>", "Late parcel", "Where is it?"))
		out, err := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<m2@mail.example.com>", "Re: Late parcel", "Still late.",
			"<m1@mail.example.com>"))
		if err != nil || out.Kind != "reply" || out.TicketID != first.TicketID || out.Matched != "headers" {
			t.Errorf("filed %+v (%v), want a reply on %s by headers", out, err, first.TicketID)
		}
	})

	t.Run("AStrangerNamingATicketIsHeldOnItForAgents", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Refund", "Please refund.")
		stranger := "evil@attacker.example"
		plus := []string{"support+" + ticket.ID + "@" + supportDomain}
		root := *w.messages(t, ticket.ID)[0].EmailMessageID
		triaged := len(w.queue.of("triage"))
		for i, m := range []*desk.InboundMail{
			mailFrom(stranger, "<x1@attacker.example>", "[#"+ticket.ID+"] pay here", "Pay now."),
			mailFrom(stranger, "<x2@attacker.example>", "Re: Refund", "Pay now.", root),
		} {
			to := support
			if i == 0 {
				to = plus
			}
			out, err := w.desk.FileInbound(w.ctx, to, m)
			if err != nil {
				t.Fatal(err)
			}
			if out.Kind != "held" || out.TicketID != ticket.ID {
				t.Errorf("filed %+v, want held on %s", out, ticket.ID)
			}
		}
		msgs := w.messages(t, ticket.ID)
		if held := ofDirection(msgs, vocab.DirectionHeld); len(held) != 2 || held[0].HeldReason == nil || *held[0].Sender != stranger {
			t.Errorf("held %+v, want both with their sender and reason", held)
		}
		if len(ofDirection(msgs, vocab.DirectionInbound)) != 1 || len(w.queue.of("triage")) != triaged {
			t.Error("a stranger's mail became the customer's, or was triaged")
		}
		// A held mail's id names nothing: citing it is no way in.
		out, err := w.desk.FileInbound(w.ctx, support, mailFrom(stranger, "<x3@attacker.example>", "Re: pay here", "Pay.", "<x1@attacker.example>"))
		if err != nil || out.TicketID == ticket.ID {
			t.Errorf("citing the held mail: %+v (%v)", out, err)
		}
	})

	t.Run("AFailVerdictHoldsEvenTheCustomersAddress", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		first, _ := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<m1@mail.example.com>", "Late parcel", "Where is it?"))
		forged := mailFrom(ada.Email, "<f1@attacker.example>", "Re: Late parcel", "Pay the customs fee.", "<m1@mail.example.com>")
		forged.Verdict, forged.VerdictDetail = vocab.VerdictFail, "dmarc=fail by mx.test"
		out, err := w.desk.FileInbound(w.ctx, support, forged)
		if err != nil || out.Kind != "held" || out.TicketID != first.TicketID {
			t.Errorf("filed %+v (%v), want held on %s", out, err, first.TicketID)
		}
		unknown := mailFrom("mallory@example.net", "<f2@attacker.example>", "Hello", "Claim your prize.")
		unknown.Verdict = vocab.VerdictFail
		out, err = w.desk.FileInbound(w.ctx, support, unknown)
		if err != nil || out.Kind != "held" || len(ofDirection(w.messages(t, out.TicketID), vocab.DirectionHeld)) != 1 {
			t.Errorf("filed %+v (%v), want a ticket whose one message is held", out, err)
		}
	})

	t.Run("AnAgentAcceptsAHeldMailOrSplitsItOff", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Refund", "Please refund.")
		colleague := "grace@example.com"
		held := func(id string) int64 {
			out, err := w.desk.FileInbound(w.ctx, []string{"support+" + ticket.ID + "@" + supportDomain},
				mailFrom(colleague, id, "About Ada's refund", "I am her colleague."))
			if err != nil || out.Kind != "held" {
				t.Fatalf("filed %+v (%v)", out, err)
			}
			return out.MessageID
		}
		first := held("<g1@example.com>")
		msg, err := w.desk.AcceptHeld(w.ctx, vocab.Agent("alice"), ticket.ID, first, desk.AcceptAsParticipant)
		if err != nil || msg.Direction != vocab.DirectionInbound || msg.Author != vocab.Email(colleague) {
			t.Fatalf("accepted %+v (%v)", msg, err)
		}
		if _, err := w.desk.AcceptHeld(w.ctx, vocab.Agent("alice"), ticket.ID, first, desk.AcceptAsCustomer); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("accepting twice: %v, want not found", err)
		}
		out, err := w.desk.FileInbound(w.ctx, support, mailFrom(colleague, "<g2@example.com>", "Re: About Ada's refund", "And another thing.", "<g1@example.com>"))
		if err != nil || out.Kind != "reply" || out.TicketID != ticket.ID {
			t.Errorf("the participant's next mail: %+v (%v), want a reply on %s", out, err, ticket.ID)
		}

		stranger := w.open(t, "Other", "Hi.")
		out, err = w.desk.FileInbound(w.ctx, []string{"support+" + stranger.ID + "@" + supportDomain},
			mailFrom("walter@example.com", "<s1@example.com>", "My own question", "Is this the shop?"))
		if err != nil || out.Kind != "held" {
			t.Fatalf("filed %+v (%v)", out, err)
		}
		split, err := w.desk.SplitHeld(w.ctx, vocab.Agent("alice"), stranger.ID, out.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		moved := w.messages(t, split.ID)
		c, _ := w.st.CustomerByEmail(w.ctx, "walter@example.com")
		if split.Subject != "My own question" || c == nil || split.CustomerID != c.ID || len(moved) != 1 || moved[0].Direction != vocab.DirectionInbound {
			t.Errorf("split %+v with %+v", split, moved)
		}
		if len(ofDirection(w.messages(t, stranger.ID), vocab.DirectionHeld)) != 0 {
			t.Error("the split mail is still held on the ticket it named")
		}
	})

	t.Run("AnUnknownSenderBecomesACustomerByItsName", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		m := mailFrom("walter@example.com", "<w1@example.com>", "Hello", "Hi.")
		m.FromName = "Walter Skinner"
		out, err := w.desk.FileInbound(w.ctx, support, m)
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
		if _, err := w.desk.FileInbound(w.ctx, support, mailFrom("", "<n1@example.com>", "Hello", "Hi.")); !errors.Is(err, desk.ErrNoSender) {
			t.Errorf("err = %v, want ErrNoSender", err)
		}
	})

	t.Run("AReportOnNoMailOfOursIsIgnored", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		m := mailFrom("mailer-daemon@example.com", "<r1@example.com>", "Undelivered", "Sorry.")
		m.Report = &desk.DeliveryReport{OriginalMessageID: "<never@sent.example>", Failed: map[string]string{ada.Email: "5.1.1"}}
		out, err := w.desk.FileInbound(w.ctx, support, m)
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
