package inbound_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	gomail "github.com/emersion/go-message/mail"

	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/mailtest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/senderauth"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

const agentAddress = "dana@support.example.com"

// authservID is the MTA in front whose Authentication-Results the
// receivers of these tests believe.
const authservID = "mx.helpdesk.example.com"

// agentWorld is the whole loop: a customer's mail comes in over SMTP, the
// queue triages it, assigns dana and mails her a notification at the fake
// relay; her answer comes in over SMTP too.
type agentWorld struct {
	*bundle
	replies *mail.ReplyAddresses
}

func setupAgentWorld(t *testing.T) *agentWorld {
	t.Helper()
	b := setup(t)
	b.DeskConfig.AutoAssign = true
	if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "dana", DisplayName: "Dana Scully", Email: agentAddress,
		Teams: []string{"billing", "general", "shipping", "technical", "account"}}); err != nil {
		t.Fatal(err)
	}
	w := &agentWorld{bundle: b, replies: &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com",
		Secret: []byte("the secret of this test, long enough"), Previous: [][]byte{[]byte("the secret before the rotation")}}}
	b.DeskConfig.ReplyAddresses = w.replies
	b.queue = b.StartQueue(t)
	cases := b.Desk(b.queue)
	b.receiver = inbound.NewReceiver(cases, inbound.ReceiverConfig{Logger: jobstest.Logger(), Auth: senderauth.Config{AuthservID: authservID}})
	b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
	return w
}

// delivered is a mail the fake relay got, read back with go-message.
type delivered struct {
	raw                    []byte
	header                 gomail.Header
	messageID              string
	inReplyTo, references  []string
	text, html             string
	to                     []string
	subject, replyTo, from string
}

func readDelivered(t *testing.T, d smtptest.Delivery) delivered {
	t.Helper()
	py := mailtest.RequireNoDefects(t, d.Raw) // a second, independent parser
	r, err := gomail.CreateReader(bytes.NewReader(d.Raw))
	if err != nil {
		t.Fatalf("delivered mail does not parse: %v", err)
	}
	out := delivered{raw: d.Raw, header: r.Header, to: d.To}
	out.messageID, _ = r.Header.MessageID()
	out.inReplyTo, _ = r.Header.MsgIDList("In-Reply-To")
	out.references, _ = r.Header.MsgIDList("References")
	out.subject, _ = r.Header.Subject()
	if list, _ := r.Header.AddressList("Reply-To"); len(list) > 0 {
		out.replyTo = list[0].Address
	}
	if list, _ := r.Header.AddressList("From"); len(list) > 0 {
		out.from = list[0].Address
	}
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(p.Body)
		if ct, _, _ := p.Header.(*gomail.InlineHeader).ContentType(); ct == "text/html" {
			out.html = string(body)
		} else {
			out.text = string(body)
		}
	}
	if strings.TrimSpace(strings.ReplaceAll(py.Text, "\r\n", "\n")) != strings.TrimSpace(strings.ReplaceAll(out.text, "\r\n", "\n")) {
		t.Errorf("Python reads the text as %q, go-message as %q", py.Text, out.text)
	}
	return out
}

// awaitMailTo waits for the n-th mail to the address at the fake relay.
func (w *agentWorld) awaitMailTo(t *testing.T, address string, n int) delivered {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got []smtptest.Delivery
		for _, d := range w.outbound.Deliveries() {
			for _, to := range d.To {
				if to == address {
					got = append(got, d)
				}
			}
		}
		if len(got) >= n {
			return readDelivered(t, got[n-1])
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d mails to %s after 30s, want %d", len(got), address, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *agentWorld) mailsTo(address string) int {
	n := 0
	for _, d := range w.outbound.Deliveries() {
		for _, to := range d.To {
			if to == address {
				n++
			}
		}
	}
	return n
}

// customerWritesIn sends the Gmail fixture and waits for dana's notification.
func (w *agentWorld) customerWritesIn(t *testing.T) (ticketID string, note delivered) {
	t.Helper()
	if err := smtptest.Send(w.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", fixture(t, "gmail_new_ticket.eml")); err != nil {
		t.Fatal(err)
	}
	note = w.awaitMailTo(t, agentAddress, 1)
	return w.onlyTicket(t), note
}

// agentAnswers sends an answer fixture as dana to the notification's Reply-To.
func (w *agentWorld) agentAnswers(t *testing.T, file, from, to string, note delivered, n int) error {
	t.Helper()
	ticketID := w.onlyTicket(t)
	raw := fixture(t, "agent/"+file, "{{AGENT}}", from, "{{REPLY_TO}}", to, "{{TICKET}}", ticketID,
		"{{IN_REPLY_TO}}", "<"+note.messageID+">", "{{N}}", fmt.Sprint(n))
	return smtptest.Send(w.addr, from, to, raw)
}

func (w *agentWorld) status(t *testing.T, ticketID string) vocab.Status {
	t.Helper()
	tk, err := w.Store.GetTicket(w.Ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	return tk.Status
}

func TestAgentsAnswerByMail(t *testing.T) {
	t.Parallel()

	t.Run("TheWholeLoopThreadsEachSideApart", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		ticketID, note := w.customerWritesIn(t)
		customerRoot := "CAJx8k=Qd1mVb0bC7u+XQ2r9aH5tWzNq@mail.gmail.com"

		// The notification: to the assignee, from the support address, with
		// a signed Reply-To, the marks of a machine, text and HTML, the
		// customer's message and the draft.
		if note.subject != "["+ticketID+"] Charged twice — invoice 1042 (billing, P3)" {
			t.Errorf("subject %q", note.subject)
		}
		if r, signed, err := w.replies.Parse(note.replyTo, time.Now()); !signed || err != nil || r.TicketID != ticketID ||
			r.Expires.Before(time.Now().Add(29*24*time.Hour)) {
			t.Errorf("Reply-To %q: %+v (%v), want signed for %s, good for 30 days", note.replyTo, r, err, ticketID)
		}
		if note.header.Get("Auto-Submitted") != "auto-generated" || note.header.Get("X-Auto-Response-Suppress") != "All" {
			t.Errorf("Auto-Submitted %q, X-Auto-Response-Suppress %q", note.header.Get("Auto-Submitted"), note.header.Get("X-Auto-Response-Suppress"))
		}
		if !strings.Contains(note.text, "charged twice") || !strings.Contains(note.text, "Dear Ada Lovelace") || !strings.Contains(note.text, "#note") ||
			!strings.Contains(note.html, "<blockquote>") {
			t.Errorf("notification text %q, html %q", note.text, note.html)
		}
		for _, id := range append(note.inReplyTo, note.references...) {
			if id == customerRoot {
				t.Errorf("the notification cites the customer's Message-ID")
			}
		}

		// Dana answers from Gmail, above the quote.
		if err := w.agentAnswers(t, "gmail_top_post.eml", agentAddress, note.replyTo, note, 1); err != nil {
			t.Fatal(err)
		}
		reply := w.awaitMailTo(t, "ada.lovelace@example.com", 1)
		want := "Hi Ada,\n\nWe have refunded the second charge; it shows on your card within 3 days.\n\nDana"
		checkReplyText(t, reply.text, want)
		if reply.from != "support@helpdesk.example.com" || bytes.Contains(reply.raw, []byte(agentAddress)) {
			t.Errorf("the reply shows the agent's address (From %s)", reply.from)
		}
		if len(reply.inReplyTo) != 1 || reply.inReplyTo[0] != customerRoot {
			t.Errorf("In-Reply-To %v, want the customer's message", reply.inReplyTo)
		}
		for _, id := range append(reply.inReplyTo, reply.references...) {
			if id == note.messageID || strings.HasPrefix(id, "CAF=gmail") {
				t.Errorf("an agent-side Message-ID %s in the customer's thread", id)
			}
		}
		if got := w.status(t, ticketID); got != vocab.StatusPending {
			t.Errorf("ticket %s after the answer, want pending", got)
		}
		var kept int
		_ = w.Pool.QueryRow(w.Ctx, `SELECT count(*) FROM messages WHERE direction = 'agent_email' AND raw_email IS NOT NULL`).Scan(&kept)
		if kept != 1 {
			t.Errorf("%d agent mails kept for audit, want 1", kept)
		}

		// The customer answers that reply: the ticket reopens and dana is
		// told again, in the agent-side thread.
		answer := "From: Ada Lovelace <ada.lovelace@example.com>\r\nTo: support@helpdesk.example.com\r\nSubject: Re: Charged twice\r\n" +
			"Message-ID: <answer.2@mail.gmail.com>\r\nIn-Reply-To: <" + reply.messageID + ">\r\nReferences: <" + customerRoot + "> <" + reply.messageID + ">\r\n\r\n" +
			"Thank you! One more thing: invoice 1043 too.\r\n"
		if err := smtptest.Send(w.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", []byte(answer)); err != nil {
			t.Fatal(err)
		}
		second := w.awaitMailTo(t, agentAddress, 2)
		if got := w.status(t, ticketID); got != vocab.StatusOpen {
			t.Errorf("ticket %s after the customer's answer, want open", got)
		}
		if len(second.references) == 0 || second.references[0] != note.messageID || second.inReplyTo[0] != note.messageID {
			t.Errorf("second notification In-Reply-To %v References %v, want the first notification %s", second.inReplyTo, second.references, note.messageID)
		}
		for _, id := range second.references {
			if id == customerRoot || id == reply.messageID || id == "answer.2@mail.gmail.com" {
				t.Errorf("a customer-side Message-ID %s in a notification's References", id)
			}
		}
		if !strings.Contains(second.text, "invoice 1043") {
			t.Errorf("the second notification does not show the new message: %q", second.text)
		}
	})

	for file, want := range map[string]string{
		"outlook_top_post.eml":        "Hello Ada,\n\nThe refund is on its way; you will see it within 3 days.\n\nKind regards,\nDana",
		"thunderbird_bottom_post.eml": "The second charge is refunded, Ada.",
		"applemail_html_only.eml":     "Refund done, Ada — sorry for the trouble.",
	} {
		t.Run("OnlyTheNewTextOf_"+strings.TrimSuffix(file, ".eml")+"_ReachesTheCustomer", func(t *testing.T) {
			t.Parallel()
			w := setupAgentWorld(t)
			_, note := w.customerWritesIn(t)
			if err := w.agentAnswers(t, file, agentAddress, note.replyTo, note, 1); err != nil {
				t.Fatal(err)
			}
			reply := w.awaitMailTo(t, "ada.lovelace@example.com", 1)
			checkReplyText(t, reply.text, want)
		})
	}
}

// checkReplyText checks that the customer's text part is the agent's new
// text and nothing of the agent's mail around it, then the customer's own
// message quoted below.
func checkReplyText(t *testing.T, text, want string) {
	t.Helper()
	got := strings.ReplaceAll(text, "\r\n", "\n")
	if !strings.HasPrefix(got, want+"\n\nOn ") || !strings.Contains(got, "Ada Lovelace wrote:\n> Hello,") {
		t.Errorf("the customer got %q, want the agent's new text %q, then the customer's message quoted", got, want)
	}
	if newText := mail.NewText(got); newText != want {
		t.Errorf("a mail client reads %q as the new text, want %q", newText, want)
	}
}

func TestAgentMailThatIsNotTheAgents(t *testing.T) {
	t.Parallel()

	// refused runs an answer that must not reach the customer and checks
	// that nothing was sent to her; the mail is handled as a customer's.
	refused := func(t *testing.T, w *agentWorld, file, from, to string, note delivered) {
		t.Helper()
		if err := w.agentAnswers(t, file, from, to, note, 7); err != nil {
			t.Fatalf("answered %v, want 250: the mail is handled by the customer rules", err)
		}
		var replies int
		_ = w.Pool.QueryRow(w.Ctx, `SELECT count(*) FROM messages WHERE direction = 'outbound'`).Scan(&replies)
		if replies != 0 {
			t.Errorf("%d replies to the customer from mail that is not the agent's", replies)
		}
		if n := w.mailsTo("ada.lovelace@example.com"); n != 0 {
			t.Errorf("%d mails reached the customer", n)
		}
	}

	t.Run("AForgedFrom", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		_, note := w.customerWritesIn(t)
		refused(t, w, "gmail_top_post.eml", "mallory@example.com", note.replyTo, note)
	})

	t.Run("AMACThatDoesNotVerify", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		_, note := w.customerWritesIn(t)
		local, domain, _ := strings.Cut(note.replyTo, "@")
		forged := local[:len(local)-16] + "aaaaaaaaaaaaaaaa@" + domain
		refused(t, w, "gmail_top_post.eml", agentAddress, forged, note)
	})

	t.Run("AnExpiredAddress", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		ticketID, note := w.customerWritesIn(t)
		r, _, _ := w.replies.Parse(note.replyTo, time.Now())
		expired := w.replies.Sign(ticketID, r.Notification, time.Now().Add(-48*time.Hour))
		refused(t, w, "gmail_top_post.eml", agentAddress, expired, note)
	})

	t.Run("TheAgentsFromWithAFailVerdict", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		ticketID, note := w.customerWritesIn(t)
		raw := fixture(t, "agent/gmail_top_post.eml", "{{AGENT}}", agentAddress, "{{REPLY_TO}}", note.replyTo, "{{TICKET}}", ticketID,
			"{{IN_REPLY_TO}}", "<"+note.messageID+">", "{{N}}", "9")
		raw = append([]byte("Authentication-Results: "+authservID+"; dmarc=fail (p=reject) header.from=support.example.com\r\n"), raw...)
		if err := smtptest.Send(w.addr, "mallory@attacker.example", note.replyTo, raw); err != nil {
			t.Fatal(err)
		}
		if n := w.count(t, `SELECT count(*) FROM messages WHERE direction = 'outbound'`); n != 0 || w.mailsTo("ada.lovelace@example.com") != 0 {
			t.Errorf("a mail its domain disowns went to the customer as the agent's")
		}
	})

	t.Run("ADisabledAgent", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		_, note := w.customerWritesIn(t)
		if err := w.Store.DisableAgent(w.Ctx, "dana"); err != nil {
			t.Fatal(err)
		}
		refused(t, w, "gmail_top_post.eml", agentAddress, note.replyTo, note)
	})

	t.Run("AnAddressSignedWithThePreviousSecretStillWorks", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		ticketID, note := w.customerWritesIn(t)
		old := &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: w.replies.Previous[0]}
		r, _, _ := w.replies.Parse(note.replyTo, time.Now())
		if err := w.agentAnswers(t, "gmail_top_post.eml", agentAddress, old.Sign(ticketID, r.Notification, time.Now().Add(time.Hour)), note, 1); err != nil {
			t.Fatal(err)
		}
		w.awaitMailTo(t, "ada.lovelace@example.com", 1)
	})

	t.Run("AnOutOfOfficeAnswerIsStoredAsNothingAndAnsweredWithNothing", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		_, note := w.customerWritesIn(t)
		before := w.count(t, `SELECT count(*) FROM messages`)
		if err := w.agentAnswers(t, "out_of_office.eml", agentAddress, note.replyTo, note, 1); err != nil {
			t.Fatal(err)
		}
		if after := w.count(t, `SELECT count(*) FROM messages`); after != before {
			t.Errorf("%d messages became %d", before, after)
		}
		if n := w.mailsTo(agentAddress) + w.mailsTo("ada.lovelace@example.com"); n != 1 {
			t.Errorf("%d mails in all, want only the first notification", n)
		}
	})

	t.Run("TheSameAnswerDeliveredTwiceIsOneReply", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		_, note := w.customerWritesIn(t)
		for range 2 {
			if err := w.agentAnswers(t, "gmail_top_post.eml", agentAddress, note.replyTo, note, 1); err != nil {
				t.Fatal(err)
			}
		}
		w.awaitMailTo(t, "ada.lovelace@example.com", 1)
		if n := w.count(t, `SELECT count(*) FROM outbound_emails e JOIN messages m ON m.id = e.message_id WHERE m.direction = 'outbound'`); n != 1 {
			t.Errorf("%d outbound replies, want 1", n)
		}
	})

	t.Run("CommandsActAndAnUnknownOneIsExplainedAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		w := setupAgentWorld(t)
		ticketID, note := w.customerWritesIn(t)
		send := func(n int, body string) {
			t.Helper()
			raw := "From: Dana Scully <" + agentAddress + ">\r\nTo: " + note.replyTo + "\r\nSubject: Re: x\r\nMessage-ID: <cmd." + fmt.Sprint(n) +
				"@support.example.com>\r\nIn-Reply-To: <" + note.messageID + ">\r\n\r\n" + body + "\r\n\r\nOn Tue, Nov 3, 2026 at 10:15 AM Support wrote:\r\n> old\r\n"
			if err := smtptest.Send(w.addr, agentAddress, note.replyTo, []byte(raw)); err != nil {
				t.Fatal(err)
			}
		}
		send(1, "#frobnicate\r\nDo it.")
		explanation := w.awaitMailTo(t, agentAddress, 2)
		if !strings.Contains(explanation.text, "#frobnicate is not a command") || explanation.header.Get("Auto-Submitted") != "auto-generated" {
			t.Errorf("explanation %q", explanation.text)
		}
		if got := w.status(t, ticketID); got != vocab.StatusOpen || w.mailsTo("ada.lovelace@example.com") != 0 {
			t.Errorf("an unknown command changed the ticket (%s) or mailed the customer", got)
		}

		send(2, "#note\r\nCalled her; she is fine with it.")
		send(3, "#solved")
		notes := w.count(t, `SELECT count(*) FROM messages WHERE direction = 'note' AND body = 'Called her; she is fine with it.'`)
		if notes != 1 || w.status(t, ticketID) != vocab.StatusSolved || w.mailsTo("ada.lovelace@example.com") != 0 {
			t.Errorf("#note and #solved: %d notes, status %s, %d mails to the customer", notes, w.status(t, ticketID), w.mailsTo("ada.lovelace@example.com"))
		}
		send(4, "#draft")
		reply := w.awaitMailTo(t, "ada.lovelace@example.com", 1)
		if !strings.Contains(reply.text, "Dear Ada Lovelace") {
			t.Errorf("#draft sent %q, want the AI draft", reply.text)
		}
		jobstest.WaitFor(t, w.queue, 1, jobs.StateSucceeded, 10*time.Second)
	})
}
