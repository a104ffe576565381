package inbound_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/senderauth"
	"github.com/helpdesk-dev/helpdesk/senderauth/senderauthtest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// The probes of these tests are an attacker's: mail over SMTP to the
// listener, from evil@attacker.example or in Ada's name, that tries to
// write into Ada's ticket, speak to her in our name, or silence her.

const (
	adaRoot = "<CAJx8k=Qd1mVb0bC7u+XQ2r9aH5tWzNq@mail.gmail.com>" // her first mail's id, which all she copied have seen
	lure    = "URGENT: pay the 2 EUR customs fee at http://evil.example/pay"
)

// setupTrust is the agent world with its receiver judging senders by auth.
func setupTrust(t *testing.T, auth senderauth.Config, ack *desk.AckConfig) *agentWorld {
	t.Helper()
	w := setupAgentWorld(t)
	w.DeskConfig.Ack = ack
	w.receiver = inbound.NewReceiver(w.Desk(w.queue), inbound.ReceiverConfig{Logger: jobstest.Logger(), Auth: auth})
	w.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
	return w
}

// attack sends raw over SMTP from the envelope sender to one recipient.
func (w *agentWorld) attack(t *testing.T, from, to string, raw string) error {
	t.Helper()
	return smtptest.Send(w.addr, from, to, []byte(strings.ReplaceAll(raw, "\n", "\r\n")))
}

// heldOn is the held messages of the ticket.
// requireHeldAsFailed checks that the ticket holds one mail, with the
// fail verdict of its sender authentication.
func (w *agentWorld) requireHeldAsFailed(t *testing.T, ticketID string) {
	t.Helper()
	held := w.heldOn(t, ticketID)
	if len(held) != 1 || held[0].AuthVerdict == nil || *held[0].AuthVerdict != vocab.VerdictFail {
		t.Fatalf("held %+v, want the forged mail held with a fail verdict", held)
	}
}

func (w *agentWorld) heldOn(t *testing.T, ticketID string) []*store.Message {
	t.Helper()
	msgs, err := w.Store.ListMessages(w.Ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	var held []*store.Message
	for _, m := range msgs {
		if m.Direction == vocab.DirectionHeld {
			held = append(held, m)
		}
		if m.Direction.Public() && strings.Contains(m.Body, "evil.example") {
			t.Errorf("the customer sees the attacker's words in message %d (%s by %s)", m.ID, m.Direction, m.Author)
		}
	}
	return held
}

func smtpCode(err error) int {
	var e *smtp.SMTPError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func TestAStrangerCannotWriteIntoATicket(t *testing.T) {
	t.Parallel()

	t.Run("CitingTheCustomersMessageIDIsHeldAndReachesNobody", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, senderauth.Config{}, nil)
		ticketID, _ := w.customerWritesIn(t)
		triage := w.count(t, `SELECT count(*) FROM river_job WHERE kind = 'triage'`)
		if err := w.attack(t, "evil@attacker.example", "support@helpdesk.example.com", "From: Customs Office <evil@attacker.example>\n"+
			"To: support@helpdesk.example.com\nSubject: Re: Charged twice\nMessage-ID: <e1@attacker.example>\nIn-Reply-To: "+adaRoot+"\n"+
			"References: "+adaRoot+"\n\n"+lure+"\n"); err != nil {
			t.Fatalf("answered %v, want 250: held, not refused", err)
		}
		held := w.heldOn(t, ticketID)
		if len(held) != 1 || held[0].HeldReason == nil || !strings.Contains(*held[0].HeldReason, "not on this ticket") {
			t.Fatalf("held %+v, want the stranger's mail held with its reason", held)
		}
		if n := w.count(t, `SELECT count(*) FROM river_job WHERE kind = 'triage'`); n != triage {
			t.Errorf("the held mail was triaged (%d triage jobs, were %d)", n, triage)
		}

		// The agent's reply quotes Ada, not the stranger.
		_, _ = w.Reply(t, w.queue, ticketID, "We refunded the second charge.")
		reply := w.awaitMailTo(t, "ada.lovelace@example.com", 1)
		if strings.Contains(reply.text, "evil.example") || !strings.Contains(reply.text, "Ada Lovelace wrote:") {
			t.Errorf("the reply to Ada reads %q: want her own words quoted, never the stranger's", reply.text)
		}
		// Her next mail notifies the agent with her words, not the stranger's.
		if err := w.attack(t, "ada.lovelace@example.com", "support@helpdesk.example.com", "From: Ada Lovelace <ada.lovelace@example.com>\n"+
			"To: support@helpdesk.example.com\nSubject: Re: Charged twice\nMessage-ID: <a2@mail.gmail.com>\nIn-Reply-To: "+adaRoot+"\n\n"+
			"Invoice 1043 too, please.\n"); err != nil {
			t.Fatal(err)
		}
		note := w.awaitMailTo(t, agentAddress, 2)
		if strings.Contains(note.text, "evil.example") || !strings.Contains(note.text, "Invoice 1043") {
			t.Errorf("the notification reads %q", note.text)
		}
	})

	t.Run("APlusAddressOrTicketTokenIsNoProofEither", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, senderauth.Config{}, nil)
		ticketID, _ := w.customerWritesIn(t)
		for i, to := range []string{"support+" + ticketID + "@helpdesk.example.com", "support@helpdesk.example.com"} {
			if err := w.attack(t, "evil@attacker.example", to, "From: evil@attacker.example\nTo: "+to+"\nSubject: [#"+ticketID+"] customs\n"+
				"Message-ID: <t"+string(rune('1'+i))+"@attacker.example>\n\n"+lure+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		if held := w.heldOn(t, ticketID); len(held) != 2 {
			t.Errorf("%d held, want both", len(held))
		}
	})

	t.Run("AFromThatParsersReadTwoWaysIsNobodys", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, senderauth.Config{}, nil)
		ticketID, _ := w.customerWritesIn(t)
		probes := []string{
			"ada.lovelace@example.com <attacker@attacker.example>",
			"=?utf-8?q?ada.lovelace@example.com=0A?= <attacker@attacker.example>",
			"ada.lovelace@example.com, <attacker@attacker.example>",
		}
		for i, from := range probes {
			id := "<p" + string(rune('1'+i)) + "@attacker.example>"
			// Naming her ticket: held, the From's problem its reason.
			if err := w.attack(t, "attacker@attacker.example", "support+"+ticketID+"@helpdesk.example.com", "From: "+from+"\n"+
				"To: support@helpdesk.example.com\nSubject: Re: Charged twice\nMessage-ID: "+id+"\nIn-Reply-To: "+adaRoot+"\n\n"+lure+"\n"); err != nil {
				t.Errorf("%s: %v, want 250 and held", from, err)
			}
			// Naming none: refused for good, 550 5.1.7.
			err := w.attack(t, "attacker@attacker.example", "support@helpdesk.example.com", "From: "+from+"\n"+
				"To: support@helpdesk.example.com\nSubject: Hello\nMessage-ID: <n"+id[1:]+"\n\n"+lure+"\n")
			if smtpCode(err) != 550 || !strings.Contains(err.Error(), "sender") {
				t.Errorf("%s naming no ticket: %v, want 550 5.1.7", from, err)
			}
		}
		held := w.heldOn(t, ticketID)
		if len(held) != len(probes) {
			t.Errorf("%d held, want %d", len(held), len(probes))
		}
		for _, m := range held {
			if m.Author == vocab.Customer("C-0001") || (m.Sender != nil && strings.Contains(*m.Sender, "ada")) {
				t.Errorf("a held probe is filed as Ada's: %+v", m)
			}
		}
		if n := w.count(t, `SELECT count(*) FROM messages WHERE author = 'customer:C-0001' AND body LIKE '%evil.example%'`); n != 0 {
			t.Errorf("%d of the probes are Ada's messages", n)
		}
	})
}

func TestSenderAuthentication(t *testing.T) {
	t.Parallel()
	trusted := senderauth.Config{AuthservID: authservID}
	forgedAda := func(to, id string, results ...string) string {
		h := ""
		for _, r := range results {
			h += "Authentication-Results: " + r + "\n"
		}
		return h + "From: Ada Lovelace <ada.lovelace@example.com>\nTo: " + to + "\nSubject: Re: Charged twice\nMessage-ID: " + id + "\n" +
			"In-Reply-To: " + adaRoot + "\n\n" + lure + "\n"
	}

	for name, results := range map[string][]string{
		"AForgedFromTheTrustedMTAFailsIsHeldWhateverLiesBelowIt": {
			authservID + "; spf=fail smtp.mailfrom=attacker.example; dmarc=fail (p=reject) header.from=example.com",
			authservID + "; dmarc=pass header.from=example.com", // the attacker's own, below the MTA's
			"evil.example; dmarc=pass header.from=example.com",
		},
		// Postfix with OpenDKIM and OpenDMARC writes three fields of its
		// id, each milter its own, the dmarc result not always the topmost.
		"AForgeryOurMTAFailedInAFieldBelowItsFirstIsHeld": {
			authservID + "; dkim=none (no signatures found)",
			authservID + "; spf=fail smtp.mailfrom=attacker.example",
			authservID + "; dmarc=fail (p=reject dis=none) header.from=example.com",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := setupTrust(t, trusted, nil)
			ticketID, _ := w.customerWritesIn(t)
			to := "support+" + ticketID + "@helpdesk.example.com"
			if err := w.attack(t, "evil@attacker.example", to, forgedAda(to, "<f1@attacker.example>", results...)); err != nil {
				t.Fatal(err)
			}
			w.requireHeldAsFailed(t, ticketID)
		})
	}

	// A team whose mail comes from a Microsoft 365 mailbox: Exchange
	// Online's field, which has no authserv-id, is the one believed.
	t.Run("AForgeryMicrosoft365FailedIsHeld", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, senderauth.Config{AuthservID: senderauth.Microsoft365}, nil)
		ticketID, _ := w.customerWritesIn(t)
		to := "support+" + ticketID + "@helpdesk.example.com"
		raw := forgedAda(to, "<f4@attacker.example>",
			"spf=fail (sender IP is 192.0.2.7) smtp.mailfrom=attacker.example; dkim=none (message not signed) header.d=none;"+
				"dmarc=fail action=oreject header.from=example.com;compauth=fail reason=000",
			"spf=pass smtp.mailfrom=example.com; dmarc=pass action=none header.from=example.com") // the attacker's own
		if err := w.attack(t, "evil@attacker.example", to, raw); err != nil {
			t.Fatal(err)
		}
		w.requireHeldAsFailed(t, ticketID)
	})

	// A mail fetched from a Microsoft 365 mailbox is judged by Exchange
	// Online's results, whatever the service's own setting.
	t.Run("AMailboxsProviderIsBelievedForTheMailFetchedFromIt", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, trusted, nil)
		ticketID, _ := w.customerWritesIn(t)
		to := "support+" + ticketID + "@helpdesk.example.com"
		raw := forgedAda(to, "<f5@attacker.example>",
			"spf=fail (sender IP is 192.0.2.7) smtp.mailfrom=attacker.example; dkim=none (message not signed) header.d=none;"+
				"dmarc=fail action=oreject header.from=example.com;compauth=fail reason=000")
		env := &inbound.Envelope{Rcpts: []string{to}, AuthservID: senderauth.Microsoft365}
		if _, err := w.receiver.ReceiveFrom(w.Ctx, env, strings.NewReader(strings.ReplaceAll(raw, "\n", "\r\n"))); err != nil {
			t.Fatal(err)
		}
		w.requireHeldAsFailed(t, ticketID)
	})

	t.Run("APassOfOurIDThatCameWithTheMailIsNotBelieved", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, trusted, nil)
		raw := "Authentication-Results: " + authservID + "; spf=none smtp.mailfrom=example.net\n" +
			"Received: from mx.attacker.example by mx.helpdesk.example.com; Sun, 6 Dec 2026 21:00:00 +0000\n" +
			"Authentication-Results: " + authservID + "; dmarc=pass header.from=example.net\n" +
			"From: Bram <bram@example.net>\nTo: support@helpdesk.example.com\nSubject: Hello\nMessage-ID: <b2@example.net>\n\nHi.\n"
		if err := w.attack(t, "bram@example.net", "support@helpdesk.example.com", raw); err != nil {
			t.Fatal(err)
		}
		var verdict string
		_ = w.Pool.QueryRow(w.Ctx, `SELECT auth_verdict FROM messages WHERE email_message_id = '<b2@example.net>'`).Scan(&verdict)
		if verdict != string(vocab.VerdictNone) {
			t.Errorf("verdict %q, want none: the MTA's own fields hold no dmarc result", verdict)
		}
	})

	t.Run("AnotherHostsResultsAreIgnored", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, trusted, nil)
		if err := w.attack(t, "bram@example.net", "support@helpdesk.example.com", "Authentication-Results: evil.example; dmarc=pass\n"+
			"From: Bram <bram@example.net>\nTo: support@helpdesk.example.com\nSubject: Hello\nMessage-ID: <b1@example.net>\n\nHi.\n"); err != nil {
			t.Fatal(err)
		}
		var verdict string
		_ = w.Pool.QueryRow(w.Ctx, `SELECT auth_verdict FROM messages WHERE email_message_id = '<b1@example.net>'`).Scan(&verdict)
		if verdict != string(vocab.VerdictNone) {
			t.Errorf("verdict %q, want none: only %s is believed", verdict, authservID)
		}
	})

	t.Run("VerifiedHereDKIMPassesAndAnUnsignedForgeryFails", func(t *testing.T) {
		t.Parallel()
		zone := senderauthtest.Zone{"_dmarc.example.com": {"v=DMARC1; p=reject"}, "example.com": {"v=spf1 ip4:192.0.2.1 -all"}}
		signer := senderauthtest.NewSigner(t, "example.com")
		signer.Publish(zone)
		w := setupTrust(t, senderauth.Config{Verify: true, Resolver: zone}, nil)
		if err := smtptest.Send(w.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", signer.Sign(t, fixture(t, "gmail_new_ticket.eml"))); err != nil {
			t.Fatal(err)
		}
		ticketID := w.onlyTicket(t)
		to := "support+" + ticketID + "@helpdesk.example.com"

		if err := w.attack(t, "evil@attacker.example", to, forgedAda(to, "<f2@attacker.example>")); err != nil {
			t.Fatal(err)
		}
		genuine := signer.Sign(t, []byte(strings.ReplaceAll("From: Ada Lovelace <ada.lovelace@example.com>\nTo: "+to+"\nSubject: Re: Charged twice\n"+
			"Message-ID: <a3@mail.example.com>\nIn-Reply-To: "+adaRoot+"\n\nAnd invoice 1043, please.\n", "\n", "\r\n")))
		if err := smtptest.Send(w.addr, "ada.lovelace@example.com", to, genuine); err != nil {
			t.Fatal(err)
		}
		if held := w.heldOn(t, ticketID); len(held) != 1 || *held[0].EmailMessageID != "<f2@attacker.example>" {
			t.Errorf("held %+v, want the unsigned forgery only", held)
		}
		var verdict string
		_ = w.Pool.QueryRow(w.Ctx, `SELECT auth_verdict FROM messages WHERE email_message_id = '<a3@mail.example.com>' AND direction = 'inbound'`).Scan(&verdict)
		if verdict != string(vocab.VerdictPass) {
			t.Errorf("Ada's signed mail: verdict %q, want pass and in her ticket", verdict)
		}
	})
}

func TestOnlyOurBounceAddressesTakeReports(t *testing.T) {
	t.Parallel()
	report := func(to, original string) string {
		return "From: Mail Delivery System <MAILER-DAEMON@mx.attacker.example>\nTo: " + to + "\nSubject: Undelivered Mail Returned to Sender\n" +
			"Message-ID: <dsn." + strings.NewReplacer("@", ".", "+", ".").Replace(to) + "@attacker.example>\nMIME-Version: 1.0\n" +
			"Content-Type: multipart/report; report-type=delivery-status; boundary=\"r\"\n\n--r\nContent-Type: text/plain\n\nUndeliverable.\n" +
			"--r\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; mx.attacker.example\n\n" +
			"Final-Recipient: rfc822; ada.lovelace@example.com\nAction: failed\nStatus: 5.1.1\n\n" +
			"--r\nContent-Type: text/rfc822-headers\n\nMessage-ID: " + original + "\n--r--\n"
	}

	t.Run("AForgedReportAtTheSupportAddressSilencesNobody", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, senderauth.Config{}, nil)
		ticketID, _ := w.customerWritesIn(t)
		reply, _ := w.Reply(t, w.queue, ticketID, "We refunded it.")
		got := w.awaitMailTo(t, "ada.lovelace@example.com", 1)
		if err := w.attack(t, "", "support@helpdesk.example.com", report("support@helpdesk.example.com", *reply.EmailMessageID)); err != nil {
			t.Fatal(err)
		}
		if suppressed(t, w.bundle, "ada.lovelace@example.com") {
			t.Fatal("a forged report put Ada on the suppression list")
		}
		em, _ := w.Store.GetOutboundEmail(w.Ctx, reply.ID)
		if em.Recipients[0].State == store.RecipientFailed {
			t.Error("a forged report marked Ada's delivery failed")
		}
		// The genuine one, at the bounce address the reply went out with.
		var from string
		for _, d := range w.outbound.Deliveries() {
			if strings.Contains(string(d.Raw), got.messageID) {
				from = d.From
			}
		}
		if want := w.replies.BounceAddress(reply.ID); from != want {
			t.Fatalf("the reply went out from %q, want its bounce address %s", from, want)
		}
		bad := strings.Replace(from, from[strings.Index(from, ".")+1:strings.Index(from, "@")], "aaaaaaaaaaaaaaaa", 1)
		if err := w.attack(t, "", bad, report(bad, "<"+got.messageID+">")); err != nil {
			t.Fatal(err)
		}
		if suppressed(t, w.bundle, "ada.lovelace@example.com") {
			t.Fatal("a report at a bounce address whose MAC does not verify suppressed Ada")
		}
		if err := w.attack(t, "", from, report(from, "<"+got.messageID+">")); err != nil {
			t.Fatal(err)
		}
		if !suppressed(t, w.bundle, "ada.lovelace@example.com") {
			t.Error("the report at the reply's own bounce address was not taken")
		}
	})
}

func TestNoBackscatter(t *testing.T) {
	t.Parallel()

	t.Run("AnAcknowledgementRepeatsNothingAStrangerChoseAndNoneAnswersAFail", func(t *testing.T) {
		t.Parallel()
		w := setupTrust(t, senderauth.Config{AuthservID: authservID}, &desk.AckConfig{MaxPerHour: 2})
		if err := w.attack(t, "victim@example.org", "support@helpdesk.example.com", "From: \"Prize Desk http://evil.example\" <victim@example.org>\n"+
			"To: support@helpdesk.example.com\nSubject: Claim your prize at http://evil.example/win\nMessage-ID: <w1@attacker.example>\n\nHi.\n"); err != nil {
			t.Fatal(err)
		}
		ack := w.awaitMailTo(t, "victim@example.org", 1)
		if strings.Contains(string(ack.raw), "evil.example") || strings.Contains(string(ack.raw), "Prize") {
			t.Errorf("the acknowledgement to an unknown sender repeats its words:\n%s", ack.raw)
		}
		if err := w.attack(t, "evil@attacker.example", "support@helpdesk.example.com", "Authentication-Results: "+authservID+
			"; dmarc=fail header.from=example.com\nFrom: Bram <bram.devries@example.com>\nTo: support@helpdesk.example.com\n"+
			"Subject: Hello\nMessage-ID: <w2@attacker.example>\n\nHi.\n"); err != nil {
			t.Fatal(err)
		}
		for _, who := range []string{"carol", "dave", "erin"} {
			if err := w.attack(t, who+"@example.org", "support@helpdesk.example.com", "From: "+who+"@example.org\n"+
				"To: support@helpdesk.example.com\nSubject: Hello\nMessage-ID: <"+who+"@example.org>\n\nHi.\n"); err != nil {
				t.Fatal(err)
			}
		}
		acks := w.count(t, `SELECT count(*) FROM messages WHERE direction = 'acknowledgement'`)
		toBram := w.count(t, `SELECT count(*) FROM messages m JOIN outbound_recipients r ON r.message_id = m.id
			WHERE m.direction = 'acknowledgement' AND r.address = 'bram.devries@example.com'`)
		if acks != 2 || toBram != 0 {
			t.Errorf("%d acknowledgements (%d to the address whose domain disowns the mail), want the hourly cap of 2 and none to it", acks, toBram)
		}
	})
}
