package inbound_test

import (
	"bytes"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
)

// setupAcks is setup with acknowledgements on and the queue running, so
// that acknowledgements reach the fake relay.
func setupAcks(t *testing.T, ack desk.AckConfig) *agentWorld {
	t.Helper()
	b := setup(t)
	b.DeskConfig.Ack = &ack
	b.queue = b.StartQueue(t)
	b.receiver = inbound.NewReceiver(b.Desk(b.queue), inbound.ReceiverConfig{Logger: jobstest.Logger()})
	b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
	return &agentWorld{bundle: b}
}

// plainMail is a person's mail to support, with extra header lines.
func plainMail(from, id, subject string, headers ...string) []byte {
	h := ""
	for _, line := range headers {
		h += line + "\r\n"
	}
	return []byte("From: " + from + "\r\nTo: support@helpdesk.example.com\r\nSubject: " + subject + "\r\nMessage-ID: <" + id + ">\r\n" +
		"Date: Sun, 29 Nov 2026 10:00:00 +0000\r\n" + h + "\r\nHello, I need help.\r\n")
}

func TestAcknowledgements(t *testing.T) {
	t.Parallel()

	t.Run("ANewTicketByMailIsAcknowledgedOnceAsAnAutoReply", func(t *testing.T) {
		t.Parallel()
		w := setupAcks(t, desk.AckConfig{})
		raw := fixture(t, "gmail_new_ticket.eml")
		for range 2 { // the same mail twice: one ticket, one acknowledgement
			if err := smtptest.Send(w.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", raw); err != nil {
				t.Fatal(err)
			}
		}
		ack := w.awaitMailTo(t, "ada.lovelace@example.com", 1)
		ticketID := w.onlyTicket(t)
		if got := ack.header.Get("Auto-Submitted"); got != "auto-replied" {
			t.Errorf("Auto-Submitted %q, want auto-replied (RFC 3834)", got)
		}
		if got := ack.header.Get("X-Auto-Response-Suppress"); got != "All" {
			t.Errorf("X-Auto-Response-Suppress %q, want All", got)
		}
		if len(ack.inReplyTo) != 1 || ack.inReplyTo[0] != "CAJx8k=Qd1mVb0bC7u+XQ2r9aH5tWzNq@mail.gmail.com" {
			t.Errorf("In-Reply-To %v, want the customer's mail", ack.inReplyTo)
		}
		if !strings.Contains(ack.subject, "[#"+ticketID+"]") || !strings.Contains(ack.text, ticketID) {
			t.Errorf("subject %q, text %q: the ticket number is missing", ack.subject, ack.text)
		}
		if ack.replyTo != "support+"+ticketID+"@helpdesk.example.com" {
			t.Errorf("Reply-To %s, want the ticket's plus address", ack.replyTo)
		}
		if n := w.count(t, `SELECT count(*) FROM messages WHERE ticket_id = $1 AND direction = 'acknowledgement'`, ticketID); n != 1 {
			t.Errorf("%d acknowledgements on the ticket, want 1", n)
		}
		// An answer to the acknowledgement is a message on the ticket, not
		// a new ticket, and is not acknowledged again.
		answer := plainMail("Ada Lovelace <ada.lovelace@example.com>", "answer.1@example.com", "Re: "+ack.subject,
			"In-Reply-To: <"+ack.messageID+">")
		if out := w.receive(t, answer); out.Kind != "reply" || out.TicketID != ticketID {
			t.Errorf("the answer to the acknowledgement: %+v", out)
		}
		if n := w.count(t, `SELECT count(*) FROM messages WHERE direction = 'acknowledgement'`); n != 1 {
			t.Errorf("%d acknowledgements after the customer's answer, want 1", n)
		}
	})

	t.Run("ASenderWhoseLocalPartIsQuotedIsAcknowledged", func(t *testing.T) {
		t.Parallel()
		w := setupAcks(t, desk.AckConfig{})
		// Kept as net/mail reads it, jane roe@example.com: quoted again in
		// the To field and in RCPT (RFC 5322 §3.4.1, RFC 5321 §4.1.2).
		if out := w.receive(t, plainMail(`"Jane Roe" <"jane roe"@example.com>`, "q1@example.com", "Invoice")); out.Kind != "new_ticket" {
			t.Fatalf("outcome %+v", out)
		}
		ack := w.awaitMailTo(t, "jane roe@example.com", 1)
		if to := ack.header.Get("To"); !strings.Contains(to, `<"jane roe"@example.com>`) {
			t.Errorf("To: %s", to)
		}
	})

	t.Run("MachinesListsReportsAndNoReplyAddressesGetNone", func(t *testing.T) {
		t.Parallel()
		w := setupAcks(t, desk.AckConfig{})
		mails := map[string][]byte{
			"auto-generated":        plainMail("alerts@example.org", "a1@example.org", "Disk full", "Auto-Submitted: auto-generated"),
			"auto-replied":          plainMail("someone@example.org", "a2@example.org", "Out of office", "Auto-Submitted: auto-replied"),
			"precedence bulk":       plainMail("news@example.org", "a3@example.org", "Our news", "Precedence: bulk"),
			"list":                  plainMail("member@example.org", "a4@example.org", "[list] Question", "List-Id: <users.lists.example.org>"),
			"unsubscribe":           plainMail("offers@example.org", "a5@example.org", "Offer", "List-Unsubscribe: <mailto:u@example.org>"),
			"exchange suppress all": plainMail("robot@example.org", "a6@example.org", "Report", "X-Auto-Response-Suppress: All"),
			"no-reply":              plainMail("no-reply@example.org", "a7@example.org", "Your order"),
			"noreply":               plainMail("shop.noreply@example.org", "a8@example.org", "Your order"),
			"mailer-daemon":         plainMail("MAILER-DAEMON@example.org", "a9@example.org", "Undeliverable"),
			"ourselves":             plainMail("support@helpdesk.example.com", "a10@example.org", "Loop"),
			// As a mailbox's last MTA records the null sender (a fetched mail).
			"return-path null": plainMail("vacation@example.org", "a12@example.org", "Away", "Return-Path: < >"),
		}
		for name, raw := range mails {
			if out := w.receive(t, raw); out.Kind != "new_ticket" {
				t.Errorf("%s: %+v, want a ticket", name, out)
			}
		}
		if n := w.count(t, `SELECT count(*) FROM messages WHERE direction = 'acknowledgement'`); n != 0 {
			t.Errorf("%d acknowledgements, want none", n)
		}
		// A person's mail after them is acknowledged: the queue was on.
		w.receive(t, plainMail("erin@example.org", "a11@example.org", "Help"))
		w.awaitMailTo(t, "erin@example.org", 1)
		if got := len(w.outbound.Deliveries()); got != 1 {
			t.Errorf("%d mails at the relay, want only the acknowledgement to erin", got)
		}
	})

	// A mail sent from the null sender (MAIL FROM:<>) is a report or
	// another responder's answer, however plain it looks: answering it
	// could start a loop between two responders (RFC 3834 §2, §3.3).
	t.Run("MailFromTheNullSenderGetsNone", func(t *testing.T) {
		t.Parallel()
		w := setupAcks(t, desk.AckConfig{})
		acksOf := func(id string) int {
			return w.count(t, `SELECT count(*) FROM messages WHERE direction = 'acknowledgement'
				AND ticket_id = (SELECT ticket_id FROM messages WHERE email_message_id = $1)`, id)
		}
		c, err := smtp.Dial(w.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SendMail("", []string{"support@helpdesk.example.com"}, bytes.NewReader(plainMail("frank@example.org", "n1@example.org", "Question"))); err != nil {
			t.Fatal(err)
		}
		// The same person's next mail in the same session, from a reverse
		// path of its own, is acknowledged: the null sender was the first
		// transaction's.
		if err := c.SendMail("frank@example.org", []string{"support@helpdesk.example.com"}, bytes.NewReader(plainMail("frank@example.org", "n2@example.org", "Question"))); err != nil {
			t.Fatal(err)
		}
		if got := [2]int{acksOf("<n1@example.org>"), acksOf("<n2@example.org>")}; got != [2]int{0, 1} {
			t.Errorf("acknowledgements of the null sender's ticket and of the other: %v, want [0 1]", got)
		}
		w.awaitMailTo(t, "frank@example.org", 1)
	})

	t.Run("AtMostMaxPerDayToOneAddress", func(t *testing.T) {
		t.Parallel()
		w := setupAcks(t, desk.AckConfig{})
		for i := range 5 {
			out := w.receive(t, plainMail("erin@example.org", fmt.Sprintf("new.%d@example.org", i), fmt.Sprintf("Question %d", i)))
			if out.Kind != "new_ticket" {
				t.Fatalf("mail %d: %+v", i, out)
			}
		}
		if n := w.count(t, `SELECT count(*) FROM messages WHERE direction = 'acknowledgement'`); n != 3 {
			t.Errorf("%d acknowledgements for 5 new tickets in a day, want 3 (HELPDESK_ACK_MAX_PER_DAY)", n)
		}
		w.awaitMailTo(t, "erin@example.org", 3)
	})

	t.Run("WithoutARelayTheTicketStaysUnacknowledged", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		b.DeskConfig.Ack = &desk.AckConfig{}
		b.DeskConfig.MailDomain = "helpdesk.example.com"
		b.DeskConfig.From = &mail.Address{Name: "Example Support", Address: "support@helpdesk.example.com"}
		ticketID, jobID := b.OpenTicket(t, b.NewQueue(t), "Help", "Hello.")
		var messages, acks, emails int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*), count(*) FILTER (WHERE direction = 'acknowledgement'),
				(SELECT count(*) FROM outbound_emails) FROM messages WHERE ticket_id = $1`, ticketID).Scan(&messages, &acks, &emails); err != nil {
			t.Fatal(err)
		}
		if messages != 1 || acks != 0 || emails != 0 || jobID == 0 {
			t.Errorf("ticket %s: %d messages, %d acknowledgements, %d deliveries, triage job %d; want the customer's message, no acknowledgement, a triage job",
				ticketID, messages, acks, emails, jobID)
		}
	})

	t.Run("ATicketAnAgentOpensIsNotAcknowledged", func(t *testing.T) {
		t.Parallel()
		w := setupAcks(t, desk.AckConfig{})
		if _, _, err := w.Desk(w.queue).OpenTicket(w.Ctx, &desk.OpenTicketParams{CustomerID: "C-0001", Subject: "Called us",
			Body: "Ada called about her invoice.", Author: "agent:dana"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.Desk(w.queue).OpenTicket(w.Ctx, &desk.OpenTicketParams{CustomerID: "C-0002", Subject: "Help",
			Body: "Hello.", Author: "customer:C-0002"}); err != nil {
			t.Fatal(err)
		}
		w.awaitMailTo(t, "bram.devries@example.com", 1)
		if n := w.mailsTo("ada.lovelace@example.com"); n != 0 {
			t.Errorf("%d mails to the customer of the agent's ticket, want none", n)
		}
	})

	t.Run("ATemplateWritesTheText", func(t *testing.T) {
		t.Parallel()
		tmpl, err := desk.ParseAckTemplate("Dear {{.CustomerName}}, your request {{.TicketID}} about {{.Subject}} is with us.\n")
		if err != nil {
			t.Fatal(err)
		}
		w := setupAcks(t, desk.AckConfig{Template: tmpl})
		if err := w.Store.UpsertCustomer(w.Ctx, &store.InsertCustomerParams{ID: "C-0009", Name: "Erin Example", Email: "erin@example.org"}); err != nil {
			t.Fatal(err)
		}
		out := w.receive(t, plainMail("Erin Example <erin@example.org>", "t1@example.org", "Printer jam"))
		ack := w.awaitMailTo(t, "erin@example.org", 1)
		if want := "Dear Erin Example, your request " + out.TicketID + " about Printer jam is with us."; strings.TrimSpace(ack.text) != want {
			t.Errorf("text %q, want %q", ack.text, want)
		}
		if _, err := desk.ParseAckTemplate("{{.Nope}}"); err == nil {
			t.Error("a template naming a field that does not exist was accepted")
		}
	})
}

// instance is one helpdesk with its own schema, support domain, inbound
// SMTP listener and outbound relay; the relay passes each mail on to
// wherever next names.
type instance struct {
	*jobstest.Bundle
	domain  string
	inbound string           // the inbound listener's address
	relay   *smtptest.Server // every mail this instance sends passes here
	next    func() string    // the inbound address mail is passed on to
	rewrite func([]byte) []byte
}

func startInstance(t *testing.T, domain string, ack desk.AckConfig, next func() string, rewrite func([]byte) []byte) *instance {
	t.Helper()
	in := &instance{Bundle: jobstest.Setup(t), domain: domain, next: next, rewrite: rewrite}
	in.relay = smtptest.StartWith(t, smtptest.Options{Forward: func(d smtptest.Delivery) error {
		return smtptest.Send(in.next(), d.From, d.To[0], in.rewrite(d.Raw))
	}})
	relay, err := mail.NewRelay(mail.RelayConfig{URL: in.relay.URL(), HeloName: domain,
		// The relay answers only once the other instance has filed the
		// mail: on a busy machine that may take a while.
		DialTimeout: 30 * time.Second, CommandTimeout: 30 * time.Second, BodyTimeout: 30 * time.Second, ReplyTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	in.Relay, in.Config.Mail, in.DeskConfig.Delivery.Sender = relay, true, relay
	in.Config.EmailBackoff = backoff.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}
	in.DeskConfig.MailDomain = domain
	in.DeskConfig.From = &mail.Address{Name: "Support " + domain, Address: "support@" + domain}
	in.DeskConfig.Ack = &ack
	q := in.StartQueue(t)
	srv := inbound.NewServer(inbound.NewReceiver(in.Desk(q), inbound.ReceiverConfig{Logger: jobstest.Logger()}), inbound.ServerConfig{Domain: domain})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in.inbound = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return in
}

// quiet waits until the instance has no outbound mail left to send.
func (in *instance) quiet(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left int
		if err := in.Pool.QueryRow(in.Ctx, `SELECT count(*) FROM outbound_emails WHERE state NOT IN ('sent', 'failed', 'suppressed')`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still has %d mails to send after 30s", in.domain, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	autoMarks     = regexp.MustCompile(`(?mi)^(Auto-Submitted|X-Auto-Response-Suppress|Precedence):[^\r\n]*\r\n`)
	threadHeaders = regexp.MustCompile(`(?mi)^(In-Reply-To|References|Reply-To|Thread-Index|Thread-Topic):[^\r\n]*\r\n([ \t][^\r\n]*\r\n)*`)
	ticketToken   = regexp.MustCompile(`\[#T-[0-9]+\]`)
)

// distinctMails counts the Message-IDs among deliveries.
func distinctMails(t *testing.T, deliveries []smtptest.Delivery) int {
	t.Helper()
	ids := map[string]bool{}
	for _, d := range deliveries {
		msg, err := inbound.Parse(d.Raw)
		if err != nil {
			t.Fatal(err)
		}
		ids[msg.MessageID] = true
	}
	return len(ids)
}

// TestTwoInstancesDoNotLoop sets two helpdesks whose support addresses
// write to each other: a mail from B's address opens a ticket at A, whose
// acknowledgement opens one at B, and so on, unless something stops it.
func TestTwoInstancesDoNotLoop(t *testing.T) {
	t.Parallel()
	keep := func(raw []byte) []byte { return raw }
	for _, c := range []struct {
		name    string
		rewrite func([]byte) []byte
		ack     desk.AckConfig
	}{
		// RFC 3834's marks stop it at the first acknowledgement.
		{"TheAutoSubmittedMarkStopsIt", keep, desk.AckConfig{}},
		// A relay that drops the marks: the second acknowledgement answers
		// the first, so it lands on A's ticket as a message, not a new one.
		{"WithoutTheMarksThreadingStopsIt", func(raw []byte) []byte { return autoMarks.ReplaceAll(raw, nil) }, desk.AckConfig{}},
		// A relay that drops marks, thread headers and ticket tokens: every
		// mail is a new ticket, and the limit per address stops it.
		{"WithoutAnyClueTheDailyLimitStopsIt", func(raw []byte) []byte {
			raw = threadHeaders.ReplaceAll(autoMarks.ReplaceAll(raw, nil), nil)
			return ticketToken.ReplaceAll(raw, []byte("[ref]"))
		}, desk.AckConfig{MaxPerDay: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var a, b *instance
			a = startInstance(t, "a.example", c.ack, func() string { return b.inbound }, c.rewrite)
			b = startInstance(t, "b.example", c.ack, func() string { return a.inbound }, c.rewrite)
			// Someone at B writes to A from B's support address.
			first := []byte("From: Support B <support@b.example>\r\nTo: support@a.example\r\nSubject: Hello from B\r\n" +
				"Message-ID: <first@b.example>\r\nDate: Sun, 29 Nov 2026 10:00:00 +0000\r\n\r\nHello A.\r\n")
			if err := smtptest.Send(a.inbound, "support@b.example", "support@a.example", first); err != nil {
				t.Fatal(err)
			}
			// Each mail is filed in the transaction that queues the answer to
			// it, so once both have nothing left to send, nothing more comes.
			for {
				sent := len(a.relay.Deliveries()) + len(b.relay.Deliveries())
				a.quiet(t)
				b.quiet(t)
				if len(a.relay.Deliveries())+len(b.relay.Deliveries()) == sent {
					break
				}
			}
			// Mails, not deliveries: a resend after an unknown outcome is the
			// same mail again (the same Message-ID), which the other side
			// files once.
			aToB, bToA := distinctMails(t, a.relay.Deliveries()), distinctMails(t, b.relay.Deliveries())
			t.Logf("A→B %d mails, B→A %d mails", aToB, bToA)
			if aToB < 1 || aToB > 2 || bToA > 2 {
				t.Errorf("A sent %d and B sent %d mails; want the exchange to stop within 2 each way", aToB, bToA)
			}
			for _, d := range append(a.relay.Deliveries(), b.relay.Deliveries()...) {
				if !bytes.Contains(d.Raw, []byte("Auto-Submitted: auto-replied")) {
					t.Errorf("a mail between the instances is not marked auto-replied:\n%s", d.Raw)
				}
			}
		})
	}
}
