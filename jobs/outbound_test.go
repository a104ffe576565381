package jobs_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/mailtest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// parsed is a delivered mail read back with go-message.
type parsed struct {
	messageID  string
	inReplyTo  []string
	references []string
	subject    string
	header     gomail.Header
	raw        []byte
}

func parse(t *testing.T, raw []byte) parsed {
	t.Helper()
	r, err := gomail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the sent mail does not parse: %v\n%s", err, raw)
	}
	p := parsed{header: r.Header, raw: raw}
	var e1, e2, e3 error
	p.messageID, e1 = r.Header.MessageID()
	p.inReplyTo, e2 = r.Header.MsgIDList("In-Reply-To")
	p.references, e3 = r.Header.MsgIDList("References")
	p.subject, _ = r.Header.Subject()
	if e1 != nil || e2 != nil || e3 != nil || p.messageID == "" {
		t.Fatalf("Message-ID headers do not re-parse: %v %v %v", e1, e2, e3)
	}
	return p
}

// requireNotSelfCiting checks the post-mortem's bug cannot happen here.
func requireNotSelfCiting(t *testing.T, p parsed) {
	t.Helper()
	for _, id := range append(p.inReplyTo, p.references...) {
		if id == p.messageID {
			t.Errorf("the mail cites its own Message-ID %s in In-Reply-To %v / References %v", id, p.inReplyTo, p.references)
		}
	}
}

type emailBundle struct {
	*jobstest.Bundle
	smtp  *smtptest.Server
	queue *jobs.Queue
}

func setupEmail(t *testing.T) *emailBundle {
	t.Helper()
	b := jobstest.Setup(t)
	srv := b.WithSMTP(t)
	return &emailBundle{Bundle: b, smtp: srv}
}

func (b *emailBundle) start(t *testing.T) *jobs.Queue {
	t.Helper()
	b.queue = b.StartQueue(t)
	return b.queue
}

func (b *emailBundle) outbound(t *testing.T, msgID int64) *store.OutboundEmail {
	t.Helper()
	em, err := b.Store.GetOutboundEmail(b.Ctx, msgID)
	if err != nil {
		t.Fatal(err)
	}
	return em
}

func TestOutboundEmail(t *testing.T) {
	t.Parallel()

	t.Run("LostAcknowledgementThenSuccessSendsTheSameBytesAndNeverCitesItself", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		b.smtp.Script(smtptest.Fault{DropAfterBody: true})
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Charged twice", "My card was charged twice.")
		msg, jobID := b.Reply(t, q, ticketID, "We refunded the second charge.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		got := b.smtp.Deliveries()
		if len(got) != 2 {
			t.Fatalf("%d deliveries, want 2: the lost one and the retry", len(got))
		}
		if !bytes.Equal(got[0].Raw, got[1].Raw) {
			t.Errorf("the retry sent other bytes:\n%s\n---\n%s", got[0].Raw, got[1].Raw)
		}
		first, second := parse(t, got[0].Raw), parse(t, got[1].Raw)
		if "<"+first.messageID+">" != *msg.EmailMessageID || second.messageID != first.messageID {
			t.Errorf("Message-IDs %s and %s, want the stored %s", first.messageID, second.messageID, *msg.EmailMessageID)
		}
		requireNotSelfCiting(t, first)
		requireNotSelfCiting(t, second)
		if len(first.references) != 1 || first.inReplyTo[0] != first.references[0] {
			t.Errorf("In-Reply-To %v, References %v: want the thread root in both", first.inReplyTo, first.references)
		}
		em := b.outbound(t, msg.ID)
		if s.Attempt != 2 || em.State != store.DeliverySent || em.UncertainResends != 1 || em.Attempts != 2 {
			t.Errorf("job attempt %d, email %s after %d attempts with %d uncertain resends; want sent at attempt 2 with 1 resend",
				s.Attempt, em.State, em.Attempts, em.UncertainResends)
		}
	})

	t.Run("TemporaryFailureThenSuccessIsSentAtAttemptTwo", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		b.smtp.Script(smtptest.Fault{DataErr: smtptest.ErrTryAgainLater})
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		msg, jobID := b.Reply(t, q, ticketID, "Hello back.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		if s.Attempt != 2 || len(b.smtp.Deliveries()) != 1 {
			t.Errorf("attempt %d, %d deliveries; want sent once at attempt 2", s.Attempt, len(b.smtp.Deliveries()))
		}
		if em := b.outbound(t, msg.ID); em.State != store.DeliverySent || em.SMTPReply == nil {
			t.Errorf("email %s, reply %v", em.State, em.SMTPReply)
		}
	})

	t.Run("TemporaryFailuresThatLastBecomeADeadLetter", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		b.Config.EmailMaxAttempts = 3
		b.smtp.SetFallback(smtptest.Fault{DataErr: smtptest.ErrTryAgainLater})
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		msg, jobID := b.Reply(t, q, ticketID, "Hello back.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateDeadLetter, 10*time.Second)
		want := "SMTPTemporary: 451 4.3.0 Local error in processing, try again later (reply)"
		if s.Attempt != 3 || jobstest.Deref(s.LastError) != want {
			t.Errorf("dead letter at attempt %d with %q, want attempt 3 with %q", s.Attempt, jobstest.Deref(s.LastError), want)
		}
		if em := b.outbound(t, msg.ID); em.State != store.DeliveryFailed || em.Attempts != 3 || b.smtp.Connections() != 3 {
			t.Errorf("email %s after %d attempts over %d connections", em.State, em.Attempts, b.smtp.Connections())
		}
	})

	t.Run("ATemporaryRefusalOfTheRecipientIsRetried", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		b.smtp.Script(smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"c1@example.com": smtptest.ErrMailboxFull}})
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		_, jobID := b.Reply(t, q, ticketID, "Hello back.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		if s.Attempt != 2 || len(b.smtp.Deliveries()) != 1 {
			t.Errorf("sent at attempt %d with %d deliveries; want the 452 retried once", s.Attempt, len(b.smtp.Deliveries()))
		}
	})

	t.Run("PermanentFailureFailsAtOnceAndSendsNothingMore", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		b.smtp.SetFallback(smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"c1@example.com": smtptest.ErrNoSuchUser}})
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		msg, jobID := b.Reply(t, q, ticketID, "Hello back.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateFailed, 10*time.Second)
		want := "SMTPPermanent: 550 5.1.1 No such user here (rcpt c1@example.com)"
		if s.Attempt != 1 || jobstest.Deref(s.LastError) != want {
			t.Errorf("failed at attempt %d with %q, want attempt 1 with %q", s.Attempt, jobstest.Deref(s.LastError), want)
		}
		time.Sleep(200 * time.Millisecond)
		em := b.outbound(t, msg.ID)
		if b.smtp.Connections() != 1 || len(b.smtp.Deliveries()) != 0 || em.State != store.DeliveryFailed || em.LastError == nil {
			t.Errorf("%d connections, %d deliveries, email %s (%v); want one refused attempt",
				b.smtp.Connections(), len(b.smtp.Deliveries()), em.State, em.LastError)
		}
		if r := em.Recipients[0]; r.State != store.RecipientFailed || *r.SMTPCode != 550 || *r.SMTPEnhanced != "5.1.1" {
			t.Errorf("recipient %+v", r)
		}
	})

	t.Run("SlowDownDoesNotSpendAttemptsAndHoldsTheWholeRelay", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		b.Config.EmailMaxAttempts = 2 // three refusals would be a dead letter if they counted
		b.smtp.Script(
			smtptest.Fault{RejectConnect: smtptest.ErrServiceNotAvailable},
			smtptest.Fault{DataErr: smtptest.ErrRateLimited},
			smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"c1@example.com": smtptest.ErrTooManyRecipients}},
		)
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		_, jobID := b.Reply(t, q, ticketID, "Hello back.")

		s := jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 15*time.Second)
		if s.Attempt != 1 || b.smtp.Connections() != 4 {
			t.Errorf("sent at attempt %d after %d connections; want attempt 1 after 4", s.Attempt, b.smtp.Connections())
		}
		notBefore, _, err := b.Store.RelayPaused(b.Ctx, b.Relay.Name())
		if err != nil || notBefore.IsZero() {
			t.Errorf("the relay's pause was not recorded: %v %v", notBefore, err)
		}
	})

	t.Run("APausedRelayHoldsEveryMessage", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		if _, err := b.Store.RecordRelayFault(b.Ctx, b.Relay.Name(), "421 4.7.0 slow down", time.Hour, time.Hour); err != nil {
			t.Fatal(err)
		}
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		_, jobID := b.Reply(t, q, ticketID, "Hello back.")
		s := jobstest.WaitFor(t, q, jobID, jobs.StateWaiting, 5*time.Second)
		if b.smtp.Connections() != 0 || s.Attempt != 0 {
			t.Errorf("%d connections to a paused relay, attempt %d", b.smtp.Connections(), s.Attempt)
		}
	})

	t.Run("OneRecipientServedOneRefusedIsPartiallySentAndNeverServedTwice", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		b.smtp.SetFallback(smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"bram@example.com": smtptest.ErrNoSuchUser}})
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		msg, jobID := b.Reply(t, q, ticketID, "Hello back.", "Bram <bram@example.com>")

		jobstest.WaitFor(t, q, jobID, jobs.StateFailed, 10*time.Second)
		if em := b.outbound(t, msg.ID); em.State != store.DeliveryPartiallySent {
			t.Errorf("email %s, want partially_sent", em.State)
		}
		// A person clears the refused address (its 550 suppressed it) and
		// retries: only the refused recipient is tried again.
		if err := b.Store.ClearSuppression(b.Ctx, "bram@example.com"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Retry(b.Ctx, jobID); err != nil {
			t.Fatal(err)
		}
		jobstest.WaitFor(t, q, jobID, jobs.StateFailed, 10*time.Second)

		served := 0
		for _, d := range b.smtp.Deliveries() {
			for _, to := range d.To {
				if to == "c1@example.com" {
					served++
				}
			}
		}
		if served != 1 || b.smtp.Connections() != 2 {
			t.Errorf("the served recipient got %d copies over %d connections, want 1 over 2", served, b.smtp.Connections())
		}
		if em := b.outbound(t, msg.ID); em.State != store.DeliveryPartiallySent {
			t.Errorf("email %s after the retry, want partially_sent", em.State)
		}
	})

	t.Run("AMailToAnAgentRefusedThenRetriedByAPersonIsSent", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		b.smtp.Script(smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"alice@support.example.com": smtptest.ErrNoSuchUser}})
		if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "alice", DisplayName: "Alice", Email: "alice@support.example.com",
			Teams: []string{"account", "billing", "general", "shipping", "technical"}}); err != nil {
			t.Fatal(err)
		}
		q := b.start(t)
		_, triageJob := b.OpenTicket(t, q, "Charged twice", "My card was charged twice.")
		jobstest.WaitFor(t, q, triageJob, jobs.StateSucceeded, 15*time.Second)
		var msgID, jobID int64
		if err := b.Pool.QueryRow(b.Ctx, `SELECT e.message_id, e.job_id FROM outbound_emails e JOIN messages m ON m.id = e.message_id
			WHERE m.direction = 'notification'`).Scan(&msgID, &jobID); err != nil {
			t.Fatalf("the triaged ticket's notification: %v", err)
		}
		jobstest.WaitFor(t, q, jobID, jobs.StateFailed, 10*time.Second)
		var ticketID string
		if err := b.Pool.QueryRow(b.Ctx, `SELECT ticket_id FROM messages WHERE id = $1`, msgID).Scan(&ticketID); err != nil {
			t.Fatal(err)
		}
		if notes := systemNotes(t, b, ticketID); len(notes) != 1 || !strings.Contains(notes[0], "alice@support.example.com") || !strings.Contains(notes[0], "5.1.1") {
			t.Errorf("notes %q, want one that says the mail to alice bounced", notes)
		}

		// The agent's address is mended; a person retries the dead letter.
		if _, err := q.Retry(b.Ctx, jobID); err != nil {
			t.Fatal(err)
		}
		jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		if em := b.outbound(t, msgID); em.State != store.DeliverySent {
			t.Errorf("notification %s after the retry, want sent", em.State)
		}
		if d := b.smtp.Deliveries(); len(d) != 1 || !slices.Equal(d[0].To, []string{"alice@support.example.com"}) {
			t.Errorf("deliveries %+v, want the notification to alice once", d)
		}
	})

	t.Run("ALongTicketKeepsTheRootAndTheNewestUnder998", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "A long story", "It begins.")
		for i := range 299 {
			dir, id := vocab.DirectionInbound, fmt.Sprintf("<m%03d.4k2j5h6g7f8d9s0a@mail.example.com>", i)
			if i%2 == 1 {
				dir, id = vocab.DirectionOutbound, fmt.Sprintf("<r%03d.4k2j5h6g7f8d9s0a@helpdesk.example.com>", i)
			}
			if _, err := b.Store.InsertMessage(b.Ctx, &store.InsertMessageParams{TicketID: ticketID, Direction: dir,
				Author: "someone", Body: "…", EmailMessageID: &id}); err != nil {
				t.Fatal(err)
			}
		}
		msgs, _ := b.Store.ListMessages(b.Ctx, ticketID)
		root, newest := *msgs[0].EmailMessageID, *msgs[len(msgs)-1].EmailMessageID
		_, jobID := b.Reply(t, q, ticketID, "Message 301.")

		jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		p := parse(t, b.smtp.Deliveries()[0].Raw)
		requireNotSelfCiting(t, p)
		refs := p.references
		if "<"+refs[0]+">" != root || "<"+refs[len(refs)-1]+">" != newest || len(refs) >= 300 {
			t.Errorf("References has %d ids from %s to %s; want the root %s first and the newest %s last",
				len(refs), refs[0], refs[len(refs)-1], root, newest)
		}
		if unfolded := "References: <" + strings.Join(refs, "> <") + ">"; len(unfolded) >= mail.MaxHeaderLine {
			t.Errorf("unfolded References is %d characters", len(unfolded))
		}
		var newestInbound string
		for _, m := range msgs {
			if m.Direction == vocab.DirectionInbound {
				newestInbound = *m.EmailMessageID
			}
		}
		if "<"+p.inReplyTo[0]+">" != newestInbound {
			t.Errorf("In-Reply-To %v, want the newest inbound message %s", p.inReplyTo, newestInbound)
		}
		head, _, _ := bytes.Cut(p.raw, []byte("\r\n\r\n"))
		for _, line := range strings.Split(string(head), "\r\n") {
			if len(line) >= mail.MaxHeaderLine {
				t.Errorf("a header line of %d characters", len(line))
			}
		}
	})

	t.Run("ALocalPartThatIsQuotedIsQuotedAgainInTheHeaderAndInRCPT", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		// Kept as net/mail reads it: dana scully@example.com.
		_, jobID := b.Reply(t, q, ticketID, "Hello back.", `Dana <"dana scully"@example.com>`)
		jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		d := b.smtp.Deliveries()
		if len(d) != 1 || !slices.Contains(d[0].To, "dana scully@example.com") {
			t.Fatalf("deliveries %+v", d)
		}
		p := parse(t, d[0].Raw)
		if cc := p.header.Get("Cc"); cc != `"Dana" <"dana scully"@example.com>` {
			t.Errorf("Cc: %s", cc)
		}
	})

	t.Run("CRLFInStoredDataNeverReachesSMTP", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		// Data that bypassed the API's checks, as a ticket from an old import might.
		if _, err := b.Pool.Exec(b.Ctx, `UPDATE tickets SET subject = E'Hi\r\nBcc: victim@example.com' WHERE id = $1`, ticketID); err != nil {
			t.Fatal(err)
		}
		_, jobID := b.Reply(t, q, ticketID, "Hello back.")
		jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
		p := parse(t, b.smtp.Deliveries()[0].Raw)
		if p.header.Has("Bcc") || strings.ContainsAny(p.subject, "\r\n") {
			t.Errorf("the subject injected a header: %q", p.subject)
		}

		// The bad row goes in with the reply, before its job can run.
		err := store.Run(b.Ctx, b.Pool, func(tx *store.Tx) error {
			msg, id, err := b.Desk(q).CreateReplyTx(b.Ctx, tx, &desk.ReplyParams{TicketID: ticketID, Author: "agent:alice", Body: "Again."})
			if err != nil {
				return err
			}
			jobID = id
			_, err = tx.Exec(b.Ctx, `INSERT INTO outbound_recipients (message_id, address, kind) VALUES ($1, E'x@example.com\r\nBcc: victim@example.com', 'cc')`, msg.ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		s := jobstest.WaitFor(t, q, jobID, jobs.StateFailed, 10*time.Second)
		if !strings.HasPrefix(jobstest.Deref(s.LastError), "InvalidMessage:") || b.smtp.Connections() != 1 {
			t.Errorf("last error %q after %d connections; want InvalidMessage and no connection for it", jobstest.Deref(s.LastError), b.smtp.Connections())
		}
	})
}

func TestReplyHeaders(t *testing.T) {
	t.Parallel()
	b := setupEmail(t)
	q := b.start(t)
	ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
	_, jobID := b.Reply(t, q, ticketID, "Hello back.", "Dana Scully <dana@example.com>")
	jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 10*time.Second)
	p := parse(t, b.smtp.Deliveries()[0].Raw)

	t.Run("CcKeepsItsDisplayName", func(t *testing.T) {
		cc, err := p.header.AddressList("Cc")
		if err != nil || len(cc) != 1 || cc[0].Name != "Dana Scully" || cc[0].Address != "dana@example.com" {
			t.Errorf("Cc %v (%v), want Dana Scully <dana@example.com>", cc, err)
		}
	})
	t.Run("PythonReadsTheTextAsTheAgentWroteIt", func(t *testing.T) {
		got := mailtest.RequireNoDefects(t, p.raw)
		text := strings.ReplaceAll(got.Text, "\r\n", "\n")
		if !strings.HasPrefix(text, "Hello back.\n\nOn ") || !strings.HasSuffix(text, "Ada Customer wrote:\n> Hi.\n") {
			t.Errorf("Python reads the text as %q, want the reply, then the customer's message quoted", got.Text)
		}
		if !strings.Contains(got.HTML, "<p>Hello back.</p>") || !strings.Contains(got.HTML, "<blockquote type=\"cite\"") {
			t.Errorf("Python reads the HTML as %q", got.HTML)
		}
	})
	t.Run("ReplyToIsTheTicketsPlusAddress", func(t *testing.T) {
		rt, err := p.header.AddressList("Reply-To")
		if err != nil || len(rt) != 1 || rt[0].Address != "support+"+ticketID+"@helpdesk.example.com" {
			t.Errorf("Reply-To %v (%v), want support+%s@helpdesk.example.com", rt, err, ticketID)
		}
	})
}
