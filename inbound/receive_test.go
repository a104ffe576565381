package inbound_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
)

type bundle struct {
	*jobstest.Bundle
	queue    *jobs.Queue
	receiver *inbound.Receiver
	outbound *smtptest.Server
	addr     string // the inbound listener, when started
}

var customers = []store.InsertCustomerParams{
	{ID: "C-0001", Name: "Ada Lovelace", Email: "ada.lovelace@example.com"},
	{ID: "C-0002", Name: "Bram de Vries", Email: "bram.devries@example.com"},
	{ID: "C-0003", Name: "Chiara Romano", Email: "chiara.romano@example.com"},
	{ID: "C-0005", Name: "Elif Yilmaz", Email: "elif.yilmaz@example.com"},
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, smtptest.Options{})
}

// setupWith is setup with a relay of these options.
func setupWith(t *testing.T, relay smtptest.Options) *bundle {
	t.Helper()
	b := jobstest.Setup(t)
	srv := b.WithSMTPServer(t, relay)
	for _, c := range customers {
		if err := b.Store.UpsertCustomer(b.Ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	q := b.NewQueue(t)
	return &bundle{Bundle: b, queue: q, outbound: srv,
		receiver: inbound.NewReceiver(b.Desk(q), inbound.ReceiverConfig{Logger: jobstest.Logger()})}
}

// listen serves the receiver over SMTP on loopback.
func (b *bundle) listen(t *testing.T, config inbound.ServerConfig) {
	t.Helper()
	srv := inbound.NewServer(b.receiver, config)
	srv.Addr = "127.0.0.1:0"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// greeted is a client that speaks SMTP to the listener by hand, the
// greeting read. It gives up after 30s of silence: a listener that stops
// answering fails the test, not CI's timeout.
func (b *bundle) greeted(t *testing.T) (net.Conn, *textproto.Conn) {
	t.Helper()
	conn, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	c := textproto.NewConn(conn)
	if code, msg, err := c.ReadResponse(220); err != nil {
		t.Fatalf("greeting: %d %s (%v)", code, msg, err)
	}
	return conn, c
}

func (b *bundle) receive(t *testing.T, raw []byte, rcpts ...string) *desk.Filed {
	t.Helper()
	if len(rcpts) == 0 {
		rcpts = []string{"support@helpdesk.example.com"}
	}
	out, err := b.receiver.Receive(context.Background(), rcpts, raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// openAPITicket opens T-500001 for the customer as the API would.
func (b *bundle) openAPITicket(t *testing.T, customerID, subject string) string {
	t.Helper()
	ticket, _, err := b.Desk(b.queue).OpenTicket(b.Ctx, &desk.OpenTicketParams{CustomerID: customerID, Subject: subject, Body: "Hello."})
	if err != nil {
		t.Fatal(err)
	}
	return ticket.ID
}

// attachments are the ticket's attachments, of all its messages.
func (b *bundle) attachments(t *testing.T, ticketID string) []*store.Attachment {
	t.Helper()
	byMessage, err := b.Store.AttachmentsOfTicket(b.Ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	var list []*store.Attachment
	for _, l := range byMessage {
		list = append(list, l...)
	}
	return list
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.Pool.QueryRow(b.Ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReceiveRealMail(t *testing.T) {
	t.Parallel()

	t.Run("GmailFromAKnownCustomerOpensATicketRootedAtItsMessageID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out := b.receive(t, fixture(t, "gmail_new_ticket.eml"))
		ticket, err := b.Store.GetTicket(b.Ctx, out.TicketID)
		if err != nil || out.Kind != "new_ticket" || ticket.CustomerID != "C-0001" || ticket.Subject != "Charged twice — invoice 1042" {
			t.Fatalf("outcome %+v, ticket %+v, %v", out, ticket, err)
		}
		msgs, _ := b.Store.ListMessages(b.Ctx, out.TicketID)
		if len(msgs) != 1 || *msgs[0].EmailMessageID != "<CAJx8k=Qd1mVb0bC7u+XQ2r9aH5tWzNq@mail.gmail.com>" || ticket.TriageJobID == nil {
			t.Errorf("messages %+v, triage job %v", msgs, ticket.TriageJobID)
		}
	})

	t.Run("OutlookReplyFindsItsTicketByTheSubjectTokenOfItsCustomer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID := b.openAPITicket(t, "C-0002", "Late parcel")
		out := b.receive(t, fixture(t, "outlook_reply.eml"))
		if out.Kind != "reply" || out.TicketID != ticketID || out.Matched != "subject" {
			t.Errorf("outcome %+v, want a reply on %s by subject", out, ticketID)
		}
	})

	t.Run("AppleMailToAPlusAddressFindsItsTicket", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID := b.openAPITicket(t, "C-0003", "App")
		out := b.receive(t, fixture(t, "applemail_html_only.eml"), "support+T-500001@helpdesk.example.com")
		if out.Kind != "reply" || out.TicketID != ticketID || out.Matched != "plus_address" {
			t.Errorf("outcome %+v", out)
		}
	})

	t.Run("AStrangersTicketTokenIsHeldForAgents", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		theirs := b.openAPITicket(t, "C-0001", "Private matter")
		// Bram is a customer, but not on Ada's ticket, and guesses its number.
		out := b.receive(t, fixture(t, "outlook_reply.eml"))
		if out.Kind != "held" || out.TicketID != theirs {
			t.Errorf("outcome %+v: want held on %s", out, theirs)
		}
		if n := b.count(t, `SELECT count(*) FROM messages WHERE ticket_id = $1 AND direction = 'inbound'`, theirs); n != 1 {
			t.Errorf("the other customer's ticket has %d messages of hers", n)
		}
	})

	t.Run("AnUnknownSenderBecomesACustomerAndItsAttachmentIsKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out := b.receive(t, fixture(t, "thunderbird_latin1_attachment.eml"))
		ticket, _ := b.Store.GetTicket(b.Ctx, out.TicketID)
		c, err := b.Store.CustomerByEmail(b.Ctx, "gaelle.dubois@example.com")
		if err != nil || ticket.CustomerID != c.ID || c.Name != "Gaëlle Dubois" {
			t.Fatalf("customer %+v %v, ticket %+v", c, err, ticket)
		}
		list := b.attachments(t, out.TicketID)
		if len(list) != 1 || list[0].Filename != "facture-1042.pdf" || list[0].ContentType != "application/pdf" || !list[0].Kept || list[0].Inline {
			t.Fatalf("attachments %+v, want facture-1042.pdf kept", list)
		}
		_, content, err := b.Store.TicketAttachment(b.Ctx, out.TicketID, list[0].ID)
		if err != nil || !bytes.HasPrefix(content, []byte("%PDF")) || int64(len(content)) != list[0].Size {
			t.Errorf("content %.20q (%d bytes, %v), want the decoded PDF of %d bytes", content, len(content), err, list[0].Size)
		}
	})

	t.Run("InlineImagesAreKeptWithTheirContentIDAndLargeFilesAsANote", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.DeskConfig.AttachmentMaxBytes = 64 // the image (70 bytes) is over, the text file (19) under
		b.receiver = inbound.NewReceiver(b.Desk(b.queue), inbound.ReceiverConfig{Logger: jobstest.Logger()})
		raw := fixture(t, "outlook_inline_image.eml")
		out := b.receive(t, raw)
		list := b.attachments(t, out.TicketID)
		if len(list) != 2 {
			t.Fatalf("attachments %+v", list)
		}
		img, file := list[0], list[1]
		if img.Kept || img.Note == nil || !strings.Contains(*img.Note, "over the limit") || img.Size != 70 || !img.Inline ||
			img.ContentID == nil || *img.ContentID != "<image001.png@01DB4A1B.2C3D4E50>" {
			t.Errorf("the image over the limit: %+v", img)
		}
		if !file.Kept || file.Filename != "Gerätedaten.txt" {
			t.Errorf("the file under the limit: %+v", file)
		}
		// The same file in another mail is stored once.
		b.receive(t, bytes.Replace(raw, []byte("AM0PR01MB0001.inline"), []byte("AM0PR01MB0002.inline"), 1))
		if n := b.count(t, `SELECT count(*) FROM attachment_contents`); n != 1 {
			t.Errorf("%d contents for one file sent twice, want 1", n)
		}
	})

	t.Run("EveryNewSenderGetsACustomerOfItsOwn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, from := range []string{"new.one@example.org", "new.two@example.org", "new.three@example.org"} {
			raw := "From: " + from + "\r\nTo: support@helpdesk.example.com\r\nSubject: Hello\r\nMessage-ID: <" + from + ">\r\n\r\nHi.\r\n"
			if out := b.receive(t, []byte(raw)); out.Kind != "new_ticket" {
				t.Errorf("%s: %+v", from, out)
			}
		}
		if n := b.count(t, `SELECT count(DISTINCT id) FROM customers WHERE email LIKE 'new.%'`); n != 3 {
			t.Errorf("%d customers for 3 new senders", n)
		}
	})

	t.Run("TheSameMessageDeliveredTwiceIsStoredOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, name := range []string{"gmail_new_ticket.eml", "no_message_id.eml"} {
			first := b.receive(t, fixture(t, name))
			second := b.receive(t, fixture(t, name))
			if first.Kind != "new_ticket" || second.Kind != "duplicate" {
				t.Errorf("%s: %+v then %+v", name, first, second)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM messages`); n != 2 {
			t.Errorf("%d messages, want 2", n)
		}
	})

	t.Run("SloppyThreadHeadersStillFindTheTicket", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.Store.UpsertCustomer(b.Ctx, &store.InsertCustomerParams{ID: "C-0006", Name: "Farah Haddad", Email: "farah.haddad@example.com"}); err != nil {
			t.Fatal(err)
		}
		ticket, _, err := b.Desk(b.queue).OpenTicket(b.Ctx, &desk.OpenTicketParams{CustomerID: "C-0006", Subject: "Refund",
			Body: "Hello.", EmailMessageID: "<unbracketed@y>"})
		if err != nil {
			t.Fatal(err)
		}
		out := b.receive(t, fixture(t, "lenient_ids.eml"))
		if out.Kind != "reply" || out.TicketID != ticket.ID || out.Matched != "headers" {
			t.Errorf("outcome %+v, want a reply on %s found by its headers", out, ticket.ID)
		}
	})

	t.Run("CopiesArrivingAtOnceFromANewSenderAreStoredOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		raw := fixture(t, "thunderbird_latin1_attachment.eml") // from a sender with no account yet
		const copies = 8
		outcomes := make(chan string, copies)
		errs := make(chan error, copies)
		start := make(chan struct{})
		for range copies {
			go func() {
				<-start
				out, err := b.receiver.Receive(context.Background(), []string{"support@helpdesk.example.com"}, raw)
				if err != nil {
					errs <- err
					return
				}
				outcomes <- out.Kind
			}()
		}
		close(start)
		kinds := map[string]int{}
		for range copies {
			select {
			case err := <-errs:
				t.Errorf("a copy failed: %v", err) // it would have been answered 451
			case k := <-outcomes:
				kinds[k]++
			}
		}
		if kinds["new_ticket"] != 1 || kinds["duplicate"] != copies-1 {
			t.Errorf("outcomes %v, want one new ticket and %d duplicates", kinds, copies-1)
		}
		if n := b.count(t, `SELECT count(*) FROM customers WHERE email = 'gaelle.dubois@example.com'`) +
			b.count(t, `SELECT count(*) FROM messages`); n != 2 {
			t.Errorf("%d customers and messages, want one of each", n)
		}
	})

	t.Run("AnAutoReplyIsStoredButStartsNoTriage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID := b.openAPITicket(t, "C-0005", "Your refund")
		reply, _ := b.Reply(t, b.queue, ticketID, "Refunded.")
		jobsBefore := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'triage'`)
		out := b.receive(t, fixture(t, "autoreply.eml", "{{IN_REPLY_TO}}", *reply.EmailMessageID))
		if out.Kind != "reply" || out.TicketID != ticketID || out.Matched != "headers" {
			t.Errorf("outcome %+v", out)
		}
		if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'triage'`); n != jobsBefore {
			t.Errorf("an auto-reply enqueued triage: %d jobs, was %d", n, jobsBefore)
		}
		if n := b.count(t, `SELECT count(*) FROM messages WHERE auto_submitted`); n != 1 {
			t.Errorf("the auto-reply is not stored as automatic")
		}
	})

	t.Run("ADeliveryReportMarksOurRecipientFailedAndOpensNoTicket", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID := b.openAPITicket(t, "C-0001", "Hello")
		reply, _ := b.Reply(t, b.queue, ticketID, "Hi.", "bram@example.com")
		tickets := b.count(t, `SELECT count(*) FROM tickets`)
		out := b.receive(t, fixture(t, "delivery_report.eml", "{{RECIPIENT}}", "bram@example.com", "{{ORIGINAL_MESSAGE_ID}}", *reply.EmailMessageID),
			jobstest.BounceAddress(reply.ID))
		if out.Kind != "bounce" || b.count(t, `SELECT count(*) FROM tickets`) != tickets {
			t.Errorf("outcome %+v", out)
		}
		em, _ := b.Store.GetOutboundEmail(b.Ctx, reply.ID)
		for _, r := range em.Recipients {
			if r.Address == "bram@example.com" && r.State != store.RecipientFailed {
				t.Errorf("recipient %+v, want failed", r)
			}
		}
	})
}

func TestInboundSMTP(t *testing.T) {
	t.Parallel()

	t.Run("TheWholeConversationThreadsAndNeverCitesItself", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
		q := b.StartQueue(t)

		// The customer mails in: a new ticket.
		if err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", fixture(t, "gmail_new_ticket.eml")); err != nil {
			t.Fatal(err)
		}
		ticketID := b.onlyTicket(t)
		root := "<CAJx8k=Qd1mVb0bC7u+XQ2r9aH5tWzNq@mail.gmail.com>"

		// An agent replies.
		first, job1 := b.Reply(t, q, ticketID, "We refunded the second charge.")
		jobstest.WaitFor(t, q, job1, jobs.StateSucceeded, 10*time.Second)

		// The customer answers that reply from their mail client.
		answer := "From: Ada Lovelace <ada.lovelace@example.com>\r\nTo: support@helpdesk.example.com\r\n" +
			"Subject: Re: Charged twice [#" + ticketID + "]\r\nMessage-ID: <answer.1@mail.gmail.com>\r\n" +
			"In-Reply-To: " + *first.EmailMessageID + "\r\nReferences: " + root + " " + *first.EmailMessageID + "\r\n\r\nThank you!\r\n"
		if err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", []byte(answer)); err != nil {
			t.Fatal(err)
		}
		if got := b.onlyTicket(t); got != ticketID {
			t.Fatalf("the answer went to %s, want %s", got, ticketID)
		}

		// The next reply threads under the customer's answer.
		second, job2 := b.Reply(t, q, ticketID, "You are welcome.")
		jobstest.WaitFor(t, q, job2, jobs.StateSucceeded, 10*time.Second)
		em, _ := b.Store.GetOutboundEmail(b.Ctx, second.ID)
		refs := strings.Join(em.References, " ")
		if *em.InReplyTo != "<answer.1@mail.gmail.com>" || refs != root+" "+*first.EmailMessageID+" <answer.1@mail.gmail.com>" {
			t.Errorf("In-Reply-To %s, References %s", *em.InReplyTo, refs)
		}
		if strings.Contains(refs, *second.EmailMessageID) || *em.InReplyTo == *second.EmailMessageID {
			t.Errorf("the reply cites itself")
		}
	})

	// RFC 6530–6532: jörg@bücher.de writes in with SMTPUTF8, as Postfix
	// passes such mail on, and is answered.
	t.Run("AnInternationalizedAddressWritesInAndIsAnswered", func(t *testing.T) {
		t.Parallel()
		b := setupWith(t, smtptest.Options{SMTPUTF8: true})
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
		q := b.StartQueue(t)
		raw := "From: Jörg Müller <jörg@bücher.de>\r\nTo: support@helpdesk.example.com\r\nSubject: Wo ist mein Paket?\r\n" +
			"Message-ID: <eai.1@xn--bcher-kva.de>\r\n\r\nEs ist nicht angekommen.\r\n"
		// go-smtp's client asks for SMTPUTF8 for this sender, and gives up
		// where it is not offered.
		if err := smtptest.Send(b.addr, "jörg@bücher.de", "support@helpdesk.example.com", []byte(raw)); err != nil {
			t.Fatal(err)
		}
		ticketID := b.onlyTicket(t)
		var email string
		if err := b.Pool.QueryRow(b.Ctx, `SELECT c.email FROM tickets t JOIN customers c ON c.id = t.customer_id WHERE t.id = $1`,
			ticketID).Scan(&email); err != nil {
			t.Fatal(err)
		}
		if email != "jörg@xn--bcher-kva.de" {
			t.Errorf("the customer is %q, want jörg@xn--bcher-kva.de: the domain as DNS looks it up", email)
		}
		_, job := b.Reply(t, q, ticketID, "Es kommt heute.")
		jobstest.WaitFor(t, q, job, jobs.StateSucceeded, 10*time.Second)
		got := b.outbound.Deliveries()
		if len(got) != 1 || !got[0].UTF8 || !slices.Equal(got[0].To, []string{"jörg@xn--bcher-kva.de"}) {
			t.Errorf("deliveries %+v, want the reply to jörg@xn--bcher-kva.de with SMTPUTF8", got)
		}
	})

	// RFC 6531 §3.5: only SMTPUTF8, declared on MAIL, allows an address
	// that is not ASCII in either path; without it the address is refused
	// at once, and the session goes on.
	t.Run("AUnicodeAddressWithoutSMTPUTF8IsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
		_, c := b.greeted(t)
		say := func(cmd string, want int) string {
			t.Helper()
			if cmd != "" {
				if err := c.PrintfLine("%s", cmd); err != nil {
					t.Fatal(err)
				}
			}
			code, msg, err := c.ReadResponse(want)
			if err != nil {
				t.Fatalf("%s: %d %s (%v), want %d", cmd, code, msg, err, want)
			}
			return msg
		}
		say("EHLO client.example.org", 250)
		if msg := say("MAIL FROM:<jörg@bücher.de>", 553); !strings.HasPrefix(msg, "5.6.7 ") {
			t.Errorf("MAIL with a unicode address: %q, want 5.6.7", msg)
		}
		say("MAIL FROM:<ada.lovelace@example.com>", 250)
		if msg := say("RCPT TO:<sérvice@helpdesk.example.com>", 553); !strings.HasPrefix(msg, "5.6.7 ") {
			t.Errorf("RCPT with a unicode address: %q, want 5.6.7", msg)
		}
		say("RSET", 250)
		// Declared, the same addresses are taken as any other: every local
		// part of the desk's domain is its (no support addresses are set).
		say("MAIL FROM:<jörg@bücher.de> SMTPUTF8", 250)
		say("RCPT TO:<sérvice@helpdesk.example.com>", 250)
		say("QUIT", 221)
		if n := b.count(t, `SELECT count(*) FROM tickets`); n != 0 {
			t.Errorf("%d tickets after refusals and no DATA", n)
		}
	})

	t.Run("OnlySupportAddressesAndSizesWithinTheLimitAreAccepted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", MaxBytes: 4 << 10})
		var se *smtp.SMTPError
		err := smtptest.Send(b.addr, "ada.lovelace@example.com", "someone@elsewhere.example.org", fixture(t, "gmail_new_ticket.eml"))
		if !errors.As(err, &se) || se.Code != 550 || se.EnhancedCode != (smtp.EnhancedCode{5, 1, 1}) {
			t.Errorf("foreign recipient: %v, want 550 5.1.1", err)
		}
		big := append(fixture(t, "no_message_id.eml"), []byte(strings.Repeat(strings.Repeat("x", 70)+"\r\n", 100))...)
		err = smtptest.Send(b.addr, "dmitri@example.com", "support@helpdesk.example.com", big)
		if !errors.As(err, &se) || se.Code != 552 {
			t.Errorf("too large: %v, want 552", err)
		}
		if n := b.count(t, `SELECT count(*) FROM messages`); n != 0 {
			t.Errorf("%d messages stored", n)
		}
	})

	t.Run("ADatabaseFailureAnswers451AndStoresNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
		// The messages table refuses writes for a moment, as a failing database would.
		if _, err := b.Pool.Exec(b.Ctx, `CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$;
			CREATE TRIGGER fail BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION fail()`); err != nil {
			t.Fatal(err)
		}
		err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", fixture(t, "gmail_new_ticket.eml"))
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code != 451 || se.EnhancedCode != (smtp.EnhancedCode{4, 3, 0}) {
			t.Errorf("got %v, want 451 4.3.0", err)
		}
		if n := b.count(t, `SELECT count(*) FROM tickets`); n != 0 {
			t.Errorf("%d tickets stored", n)
		}
		// The sender retries once the database is back: the message lands once.
		if _, err := b.Pool.Exec(b.Ctx, `DROP TRIGGER fail ON messages`); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", fixture(t, "gmail_new_ticket.eml")); err != nil {
				t.Fatal(err)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM messages`); n != 1 {
			t.Errorf("%d messages after the retries, want 1", n)
		}
	})
}

func (b *bundle) onlyTicket(t *testing.T) string {
	t.Helper()
	var id string
	if err := b.Pool.QueryRow(b.Ctx, `SELECT id FROM tickets`).Scan(&id); err != nil {
		t.Fatalf("want exactly one ticket: %v", err)
	}
	return id
}

func TestInboundLMTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", LMTP: true})
	conn, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	c := smtp.NewClientLMTP(conn)
	defer c.Close()
	if err := c.Hello("postfix.example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.SendMail("ada.lovelace@example.com", []string{"support@helpdesk.example.com"}, bytes.NewReader(fixture(t, "gmail_new_ticket.eml"))); err != nil {
		t.Fatalf("LMTP delivery: %v", err)
	}
	if n := b.count(t, `SELECT count(*) FROM tickets`); n != 1 {
		t.Errorf("%d tickets after an LMTP delivery", n)
	}
}
