package desk_test

import (
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// agentMailWorld has dana in billing, signed reply addresses, and a
// ticket of Ada's assigned to dana, whose notification of it answers to
// the address returned.
func agentMailWorld(t *testing.T) (*world, string, *mail.ReplyAddresses, []string) {
	t.Helper()
	replies := &mail.ReplyAddresses{Local: "support", Domain: supportDomain, Secret: []byte("a secret of this test, long enough")}
	w := newWorld(t, true, func(c *desk.Config) { c.ReplyAddresses, c.AutoAssign = replies, true })
	w.agent(t, "dana", "billing")
	ticket := w.open(t, "Refund", "Please refund order 4711.")
	w.triage(t, ticket.ID, "billing")
	notes := w.queue.of("notify")
	if len(notes) != 1 {
		t.Fatalf("%d notifications, want dana's one", len(notes))
	}
	return w, ticket.ID, replies, []string{replies.Sign(ticket.ID, notes[0].MessageID, time.Now().Add(24*time.Hour))}
}

func TestAgentMail(t *testing.T) {
	t.Parallel()

	t.Run("AnAgentsAnswerIsTheReplyToTheCustomerFromTheSupportAddress", func(t *testing.T) {
		t.Parallel()
		w, ticketID, _, to := agentMailWorld(t)
		out, err := w.desk.FileInbound(w.ctx, to, mailFrom("dana@support.example.com", "<d1@support.example.com>", "Re: Refund",
			"Refunded today.\n\nOn Tue, Support wrote:\n> Please refund"))
		if err != nil || out.Kind != "agent_replied" {
			t.Fatalf("filed %+v (%v)", out, err)
		}
		replied := ofDirection(w.messages(t, ticketID), vocab.DirectionOutbound)
		if len(replied) != 1 || replied[0].Body != "Refunded today." || replied[0].Author != vocab.Agent("dana") {
			t.Errorf("replies %+v: want dana's new text only", replied)
		}
		if kept := ofDirection(w.messages(t, ticketID), vocab.DirectionAgentEmail); len(kept) != 1 {
			t.Errorf("%d agent mails kept for audit, want 1", len(kept))
		}
	})

	t.Run("ANoteCommandIsNeverMailedToTheCustomer", func(t *testing.T) {
		t.Parallel()
		w, ticketID, _, to := agentMailWorld(t)
		out, err := w.desk.FileInbound(w.ctx, to,
			mailFrom("dana@support.example.com", "<d2@support.example.com>", "Re: Refund", "#note\nCalled her."))
		if err != nil || out.Kind != "agent_noted" {
			t.Fatalf("filed %+v (%v)", out, err)
		}
		if len(w.queue.of("email")) != 0 || len(ofDirection(w.messages(t, ticketID), vocab.DirectionNote)) != 1 {
			t.Error("a #note was mailed, or not kept")
		}
	})

	t.Run("AForgedFromIsHandledAsACustomersMail", func(t *testing.T) {
		t.Parallel()
		w, _, _, to := agentMailWorld(t)
		out, err := w.desk.FileInbound(w.ctx, to,
			mailFrom("evil@attacker.example", "<e1@attacker.example>", "Re: Refund", "Send the refund to my account."))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(out.Kind, "agent_") || len(w.queue.of("email")) != 0 {
			t.Errorf("filed %+v: a forged answer went out as the agent's", out)
		}
	})

	t.Run("AnUnknownCommandChangesNothingAndIsExplained", func(t *testing.T) {
		t.Parallel()
		w, _, _, to := agentMailWorld(t)
		before := len(w.queue.of("notify"))
		out, err := w.desk.FileInbound(w.ctx, to,
			mailFrom("dana@support.example.com", "<d3@support.example.com>", "Re: Refund", "#escalate\nBoss please."))
		if err != nil || out.Kind != "agent_refused" || len(w.queue.of("notify")) != before+1 || len(w.queue.of("email")) != 0 {
			t.Errorf("filed %+v (%v): want one explanation to dana and nothing to the customer", out, err)
		}
	})

	t.Run("AnAnswerIsTheAgentsOnlyWhereItsAddressHolds", func(t *testing.T) {
		t.Parallel()
		w, ticketID, replies, to := agentMailWorld(t)
		note := w.queue.of("notify")[0].MessageID
		other := w.open(t, "Other", "Another question.")
		dana := func(id string) *desk.InboundMail {
			return mailFrom("dana@support.example.com", id, "Re: Refund", "Refunded.")
		}
		failed := dana("<d5@support.example.com>")
		failed.Verdict, failed.VerdictDetail = vocab.VerdictFail, "dmarc=fail by mx.test"
		for _, c := range []struct {
			name string
			to   []string
			m    *desk.InboundMail
		}{
			{"expired", []string{replies.Sign(ticketID, note, time.Now().Add(-48*time.Hour))}, dana("<d1@support.example.com>")},
			{"another ticket's notification", []string{replies.Sign(other.ID, note, time.Now().Add(time.Hour))}, dana("<d2@support.example.com>")},
			{"tampered", []string{strings.Replace(to[0], ".n", ".n1", 1)}, dana("<d3@support.example.com>")},
			{"no notification", []string{replies.Sign(ticketID, note+1000, time.Now().Add(time.Hour))}, dana("<d4@support.example.com>")},
			{"a fail verdict", to, failed},
		} {
			out, err := w.desk.FileInbound(w.ctx, c.to, c.m)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if strings.HasPrefix(out.Kind, "agent_") {
				t.Errorf("%s: filed %+v as dana's", c.name, out)
			}
		}
		if len(w.queue.of("email")) != 0 || len(ofDirection(w.messages(t, ticketID), vocab.DirectionOutbound)) != 0 {
			t.Error("an answer at an address that does not hold went to the customer")
		}
	})
}

func TestANotificationPromisesOnlyWhatWorks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, true, func(c *desk.Config) { c.AutoAssign = true }) // no reply secret
	w.agent(t, "dana", "billing")
	ticket := w.open(t, "Refund", "Please refund order 4711.")
	w.triage(t, ticket.ID, "billing")
	notes := ofDirection(w.messages(t, ticket.ID), vocab.DirectionNotification)
	if len(notes) != 1 || strings.Contains(notes[0].Body, "Reply to this mail") || !strings.Contains(notes[0].Body, "/v1/tickets/"+ticket.ID+"/replies") {
		t.Errorf("the notification without answers by mail: %+v", notes)
	}
}
