package inbound_test

import (
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// bouncedTicket is a pending ticket of C-0002 assigned to dana, with a
// reply to bram@example.com that a report will say bounced.
func bouncedTicket(t *testing.T, b *bundle) (ticketID string, reply *store.Message) {
	t.Helper()
	if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "dana", DisplayName: "Dana", Email: agentAddress, Teams: []string{"billing"}}); err != nil {
		t.Fatal(err)
	}
	ticketID = b.openAPITicket(t, "C-0002", "Hello")
	dana := "dana"
	if _, err := b.Desk(b.queue).ChangeTicket(b.Ctx, "agent:dana", ticketID, &desk.Change{Assignee: &dana}); err != nil {
		t.Fatal(err)
	}
	reply, _ = b.Reply(t, b.queue, ticketID, "Hi.")
	return ticketID, reply
}

func requirePending(t *testing.T, b *bundle, ticketID string) {
	t.Helper()
	if tk, _ := b.Store.GetTicket(b.Ctx, ticketID); tk.Status != vocab.StatusPending {
		t.Fatalf("ticket %s after the reply, want pending", tk.Status)
	}
}

// suppressed reports whether the address is on the suppression list.
func suppressed(t *testing.T, b *bundle, address string) bool {
	t.Helper()
	list, err := b.Store.ListSuppressions(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Address == address {
			return true
		}
	}
	return false
}

func systemNotes(t *testing.T, b *bundle, ticketID string) string {
	t.Helper()
	msgs, err := b.Store.ListMessages(b.Ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, m := range msgs {
		if m.Direction == vocab.DirectionNote && m.Author == "system" {
			notes = append(notes, m.Body)
		}
	}
	return strings.Join(notes, "\n")
}

func TestBouncesReachTheAgent(t *testing.T) {
	t.Parallel()
	for file, status := range map[string]string{
		"delivery_report.eml": "5.1.1",  // Postfix
		"bounce_exchange.eml": "5.1.10", // Exchange Online
		"bounce_gmail.eml":    "5.1.1",  // Gmail
	} {
		t.Run(strings.TrimSuffix(file, ".eml")+"ReopensNotesSuppressesAndTellsTheAssignee", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ticketID, reply := bouncedTicket(t, b)
			requirePending(t, b, ticketID)
			out := b.receive(t, fixture(t, file, "{{RECIPIENT}}", "bram.devries@example.com", "{{ORIGINAL_MESSAGE_ID}}", *reply.EmailMessageID),
				jobstest.BounceAddress(reply.ID))
			if out.Kind != "bounce" || out.TicketID != ticketID {
				t.Fatalf("outcome %+v", out)
			}
			tk, _ := b.Store.GetTicket(b.Ctx, ticketID)
			notes := systemNotes(t, b, ticketID)
			if tk.Status != vocab.StatusOpen || !strings.Contains(notes, "bram.devries@example.com") || !strings.Contains(notes, status) {
				t.Errorf("ticket %s, notes %q; want it open with a note naming the address and %s", tk.Status, notes, status)
			}
			if !suppressed(t, b, "bram.devries@example.com") {
				t.Errorf("a hard bounce did not suppress the address")
			}
			if n := b.count(t, `SELECT count(*) FROM messages m JOIN outbound_recipients r ON r.message_id = m.id
				WHERE m.direction = 'notification' AND r.address = $1`, agentAddress); n != 1 {
				t.Errorf("%d mails to the assignee about the bounce, want 1", n)
			}
		})
	}

	// RFC 6533: the report on a mail sent with SMTPUTF8 is a global one,
	// and names its recipient with the utf-8 type, escaped (\x{F6}) or not.
	t.Run("AGlobalReportOnAnInternationalizedAddressReachesTheAgent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const jörg = "jörg@xn--bcher-kva.de"
		if err := b.Store.UpsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0099", Name: "Jörg", Email: jörg}); err != nil {
			t.Fatal(err)
		}
		ticketID := b.openAPITicket(t, "C-0099", "Hallo")
		reply, _ := b.Reply(t, b.queue, ticketID, "Hallo Jörg.")
		out := b.receive(t, fixture(t, "bounce_global.eml", "{{RECIPIENT_XTEXT}}", `j\x{F6}rg@xn--bcher-kva.de`,
			"{{RECIPIENT}}", jörg, "{{ORIGINAL_MESSAGE_ID}}", *reply.EmailMessageID), jobstest.BounceAddress(reply.ID))
		if out.Kind != "bounce" || out.TicketID != ticketID {
			t.Fatalf("outcome %+v", out)
		}
		if notes := systemNotes(t, b, ticketID); !strings.Contains(notes, jörg) || !strings.Contains(notes, "5.1.1") {
			t.Errorf("notes %q: want the bounce of %s noted with 5.1.1", notes, jörg)
		}
		if !suppressed(t, b, jörg) {
			t.Errorf("a hard bounce did not suppress %s", jörg)
		}
	})

	t.Run("ABouncedAcknowledgementReachesTheAgentToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.DeskConfig.Ack = &desk.AckConfig{}
		ticketID := b.openAPITicket(t, "C-0002", "Hello") // Bram's own ticket: acknowledged
		var (
			ackID  string
			ackMsg int64
		)
		if err := b.Pool.QueryRow(b.Ctx, `SELECT email_message_id, id FROM messages WHERE ticket_id = $1 AND direction = 'acknowledgement'`,
			ticketID).Scan(&ackID, &ackMsg); err != nil {
			t.Fatalf("no acknowledgement: %v", err)
		}
		out := b.receive(t, fixture(t, "delivery_report.eml", "{{RECIPIENT}}", "bram.devries@example.com", "{{ORIGINAL_MESSAGE_ID}}", ackID),
			jobstest.BounceAddress(ackMsg))
		if out.Kind != "bounce" || out.TicketID != ticketID {
			t.Fatalf("outcome %+v", out)
		}
		if notes := systemNotes(t, b, ticketID); !strings.Contains(notes, "The acknowledgement to bram.devries@example.com bounced") || !suppressed(t, b, "bram.devries@example.com") {
			t.Errorf("notes %q: want the acknowledgement's bounce noted and the address suppressed", notes)
		}
	})

	t.Run("ADelayedReportIsNotedAndSuppressesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID, reply := bouncedTicket(t, b)
		requirePending(t, b, ticketID)
		b.receive(t, fixture(t, "delay_postfix.eml", "{{RECIPIENT}}", "bram.devries@example.com", "{{ORIGINAL_MESSAGE_ID}}", *reply.EmailMessageID),
			jobstest.BounceAddress(reply.ID))
		tk, _ := b.Store.GetTicket(b.Ctx, ticketID)
		if tk.Status != vocab.StatusPending || !strings.Contains(systemNotes(t, b, ticketID), "delayed") {
			t.Errorf("ticket %s, notes %q", tk.Status, systemNotes(t, b, ticketID))
		}
		if list, _ := b.Store.ListSuppressions(b.Ctx); len(list) != 0 {
			t.Errorf("a delay suppressed %v", list)
		}
	})

	t.Run("AReplyToASuppressedAddressFailsAtOnceWithoutSMTP", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.Store.Suppress(b.Ctx, "bram.devries@example.com", "5.1.1 User unknown", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t)
		ticketID := b.openAPITicket(t, "C-0002", "Hello")
		msg, jobID := b.Reply(t, q, ticketID, "Hi.")
		s := jobstest.WaitFor(t, q, jobID, jobs.StateFailed, 10*time.Second)
		em, _ := b.Store.GetOutboundEmail(b.Ctx, msg.ID)
		if em.State != store.DeliverySuppressed || em.Recipients[0].State != store.RecipientSuppressed || b.outbound.Connections() != 0 ||
			!strings.HasPrefix(jobstest.Deref(s.LastError), "Suppressed:") {
			t.Errorf("email %s, recipient %s, %d connections, last error %q", em.State, em.Recipients[0].State, b.outbound.Connections(), jobstest.Deref(s.LastError))
		}
		// Cleared, the next reply goes out.
		if err := b.Store.ClearSuppression(b.Ctx, "bram.devries@example.com"); err != nil {
			t.Fatal(err)
		}
		_, jobID = b.Reply(t, q, ticketID, "Hi again.")
		jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
	})

	t.Run("A550AtRCPTIsABounceToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.outbound.SetFallback(smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"bram.devries@example.com": smtptest.ErrNoSuchUser}})
		b.queue = b.StartQueue(t)
		ticketID, reply := bouncedTicket(t, b)
		em, _ := b.Store.GetOutboundEmail(b.Ctx, reply.ID)
		jobstest.WaitFor(t, b.queue, *em.JobID, jobs.StateFailed, 10*time.Second)
		tk, _ := b.Store.GetTicket(b.Ctx, ticketID)
		if tk.Status != vocab.StatusOpen || !strings.Contains(systemNotes(t, b, ticketID), "5.1.1") {
			t.Errorf("ticket %s, notes %q", tk.Status, systemNotes(t, b, ticketID))
		}
		if !suppressed(t, b, "bram.devries@example.com") {
			t.Errorf("550 5.1.1 at RCPT did not suppress the address")
		}
	})
}

func TestAnswersToTheRelaysOwnMessageIDFindTheTicket(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sesID = "0100018c2f0a1b2c-3d4e5f6a-7b8c-4d9e-a0b1-c2d3e4f5a6b7-000000"
	b.outbound.SetFallback(smtptest.Fault{Reply: "Ok " + sesID})
	q := b.StartQueue(t)
	ticketID := b.openAPITicket(t, "C-0001", "Refund")
	msg, jobID := b.Reply(t, q, ticketID, "Refunded.")
	jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
	var stored string
	if err := b.Pool.QueryRow(b.Ctx, `SELECT coalesce(relay_message_id, '') FROM outbound_emails WHERE message_id = $1`, msg.ID).Scan(&stored); err != nil || stored != sesID {
		t.Fatalf("relay message id %q (%v), want %s", stored, err, sesID)
	}
	// SES sent it as <id@eu-west-1.amazonses.com>; the customer answers that.
	answer := "From: Ada Lovelace <ada.lovelace@example.com>\r\nTo: support@helpdesk.example.com\r\nSubject: Thanks\r\n" +
		"Message-ID: <thanks.1@mail.example.com>\r\nIn-Reply-To: <" + sesID + "@eu-west-1.amazonses.com>\r\n\r\nThank you!\r\n"
	out := b.receive(t, []byte(answer))
	if out.Kind != "reply" || out.TicketID != ticketID || out.Matched != "headers" {
		t.Errorf("outcome %+v, want the answer filed under %s by its headers", out, ticketID)
	}
}

// A notification that bounced is an agent's address gone wrong: the mail
// must not read as sent, and someone must be able to see it, but nobody is
// mailed about it (the assignee's address may be the one that bounced, and
// a mail about each bounce would make another bounce).
func TestABouncedMailToAnAgentIsNotedAndMailsNobody(t *testing.T) {
	t.Parallel()
	w := setupAgentWorld(t)
	ticketID, note := w.customerWritesIn(t)
	var notification int64
	if err := w.Pool.QueryRow(w.Ctx, `SELECT id FROM messages WHERE ticket_id = $1 AND direction = 'notification'`, ticketID).Scan(&notification); err != nil {
		t.Fatalf("dana's notification: %v", err)
	}
	statusBefore := w.status(t, ticketID)

	// A delay is the receiving side still trying: nothing is noted.
	w.receive(t, fixture(t, "delay_postfix.eml", "{{RECIPIENT}}", agentAddress, "{{ORIGINAL_MESSAGE_ID}}", "<"+note.messageID+">"),
		w.replies.BounceAddress(notification))
	if notes := systemNotes(t, w.bundle, ticketID); notes != "" {
		t.Errorf("a delayed mail to an agent left notes %q, want none", notes)
	}

	out := w.receive(t, fixture(t, "delivery_report.eml", "{{RECIPIENT}}", agentAddress, "{{ORIGINAL_MESSAGE_ID}}", "<"+note.messageID+">"),
		w.replies.BounceAddress(notification))
	if out.Kind != "bounce" || out.TicketID != ticketID {
		t.Fatalf("outcome %+v, want a bounce on %s", out, ticketID)
	}
	em, err := w.Store.GetOutboundEmail(w.Ctx, notification)
	if err != nil {
		t.Fatal(err)
	}
	if em.State != store.DeliveryFailed || em.Recipients[0].State != store.RecipientFailed {
		t.Errorf("notification %s, recipient %s; want both failed", em.State, em.Recipients[0].State)
	}
	if notes := systemNotes(t, w.bundle, ticketID); !strings.Contains(notes, agentAddress) || !strings.Contains(notes, "5.1.1") {
		t.Errorf("notes %q: want the bounce of %s noted with 5.1.1", notes, agentAddress)
	}
	if n := w.count(t, `SELECT count(*) FROM messages WHERE ticket_id = $1 AND direction = 'notification'`, ticketID); n != 1 {
		t.Errorf("%d mails to agents on the ticket, want only the notification that bounced", n)
	}
	if suppressed(t, w.bundle, agentAddress) {
		t.Errorf("an agent's address was suppressed")
	}
	if after := w.status(t, ticketID); after != statusBefore {
		t.Errorf("ticket %s after the bounce, was %s", after, statusBefore)
	}
}
