package desk_test

import (
	"strings"
	"testing"

	"helpdesk/desk"
	"helpdesk/mail"
	"helpdesk/vocab"
)

// agentMailWorld has dana in billing, signed reply addresses, and a
// ticket of Ada's assigned to dana.
func agentMailWorld(t *testing.T) (*world, string, *mail.ReplyAddresses) {
	t.Helper()
	replies := &mail.ReplyAddresses{Local: "support", Domain: supportDomain, Secret: []byte("a secret of this test, long enough")}
	w := newWorld(t, true, func(c *desk.Config) { c.ReplyAddresses, c.AutoAssign = replies, true })
	w.agent(t, "dana", "billing")
	ticket := w.open(t, "Refund", "Please refund order 4711.")
	w.triage(t, ticket.ID, "billing")
	return w, ticket.ID, replies
}

func TestAgentMail(t *testing.T) {
	t.Parallel()

	t.Run("AnAgentsAnswerIsTheReplyToTheCustomerFromTheSupportAddress", func(t *testing.T) {
		t.Parallel()
		w, ticketID, replies := agentMailWorld(t)
		to := []string{replies.Sign(ticketID, "dana")}
		out, err := w.desk.FileInbound(w.ctx, to, mailFrom("dana@support.example.com", "<d1@support.example.com>", "Re: Refund",
			"Refunded today.\n\nOn Tue, Support wrote:\n> Please refund"), nil)
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
		w, ticketID, replies := agentMailWorld(t)
		out, err := w.desk.FileInbound(w.ctx, []string{replies.Sign(ticketID, "dana")},
			mailFrom("dana@support.example.com", "<d2@support.example.com>", "Re: Refund", "#note\nCalled her."), nil)
		if err != nil || out.Kind != "agent_noted" {
			t.Fatalf("filed %+v (%v)", out, err)
		}
		if len(w.queue.of("email")) != 0 || len(ofDirection(w.messages(t, ticketID), vocab.DirectionNote)) != 1 {
			t.Error("a #note was mailed, or not kept")
		}
	})

	t.Run("AForgedFromIsHandledAsACustomersMail", func(t *testing.T) {
		t.Parallel()
		w, ticketID, replies := agentMailWorld(t)
		out, err := w.desk.FileInbound(w.ctx, []string{replies.Sign(ticketID, "dana")},
			mailFrom("evil@attacker.example", "<e1@attacker.example>", "Re: Refund", "Send the refund to my account."), nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(out.Kind, "agent_") || len(w.queue.of("email")) != 0 {
			t.Errorf("filed %+v: a forged answer went out as the agent's", out)
		}
	})

	t.Run("AnUnknownCommandChangesNothingAndIsExplained", func(t *testing.T) {
		t.Parallel()
		w, ticketID, replies := agentMailWorld(t)
		before := len(w.queue.of("notify"))
		out, err := w.desk.FileInbound(w.ctx, []string{replies.Sign(ticketID, "dana")},
			mailFrom("dana@support.example.com", "<d3@support.example.com>", "Re: Refund", "#escalate\nBoss please."), nil)
		if err != nil || out.Kind != "agent_refused" || len(w.queue.of("notify")) != before+1 || len(w.queue.of("email")) != 0 {
			t.Errorf("filed %+v (%v): want one explanation to dana and nothing to the customer", out, err)
		}
	})
}
