package fetcher_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/fetcher"
	"github.com/helpdesk-dev/helpdesk/fetcher/imaptest"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/inbound/inboundtest"
	"github.com/helpdesk-dev/helpdesk/internal/testcert"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
)

// world is a helpdesk with a relay, an agent, and fetchers running over
// the mailboxes added to it.
type world struct {
	*jobstest.Bundle
	relay *smtptest.Server
	queue *jobs.Queue
	desk  *desk.Desk
	stop  func()
}

func newWorld(t testing.TB, change ...func(*fetcher.Config)) *world {
	t.Helper()
	return newWorldOf(t, nil, change...)
}

// newWorldOf is newWorld with the desk's configuration changed.
func newWorldOf(t testing.TB, deskChange func(*desk.Config), change ...func(*fetcher.Config)) *world {
	t.Helper()
	b := jobstest.Setup(t)
	relay := b.WithSMTP(t)
	b.DeskConfig.AutoAssign = true
	if deskChange != nil {
		deskChange(&b.DeskConfig)
	}
	if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "dana", DisplayName: "Dana", Email: "dana@support.example.com",
		Teams: []string{"billing", "general", "shipping", "technical", "account"}}); err != nil {
		t.Fatal(err)
	}
	q := b.StartQueue(t)
	d := b.Desk(q)
	rc := inbound.NewReceiver(d, inbound.ReceiverConfig{Logger: jobstest.Logger()})
	config := fetcher.Config{Poll: 200 * time.Millisecond, Lease: 3 * time.Second, Logger: jobstest.Logger()}
	config.Backoff.Base, config.Backoff.Cap = 50*time.Millisecond, 200*time.Millisecond
	for _, c := range change {
		c(&config)
	}
	f := fetcher.New(d, rc, config)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	w := &world{Bundle: b, relay: relay, queue: q, desk: d, stop: func() { cancel(); <-done }}
	t.Cleanup(w.stop)
	return w
}

// mailbox adds a mailbox of server's user at address, fetched from INBOX.
func (w *world) mailbox(t testing.TB, name string, s *imaptest.Server, password, address string, change ...func(*desk.MailboxParams)) {
	t.Helper()
	p := &desk.MailboxParams{Name: name, IMAPURL: "imap://" + url.PathEscape(s.Username()) + "@" + s.Addr + "/INBOX?tls=none", Password: password,
		Address: address}
	for _, c := range change {
		c(p)
	}
	if _, err := w.desk.AddMailbox(w.Ctx, p); err != nil {
		t.Fatal(err)
	}
}

// connected waits for the mailbox's fetcher to be signed in.
func (w *world) connected(t *testing.T, name string) {
	t.Helper()
	eventually(t, 30*time.Second, name+"'s connection", func() bool {
		m, _ := w.desk.Mailbox(w.Ctx, name)
		return m != nil && m.Connected
	})
}

func customerMail(n int, from string) []byte {
	return []byte(fmt.Sprintf("From: Customer %d <%s>\r\nTo: support@example.org\r\nSubject: Question %d\r\nMessage-ID: <q%d.%s>\r\n\r\nQuestion number %d.\r\n",
		n, from, n, n, from, n))
}

// put appends a message to a folder of the server, or fails the test.
func put(t *testing.T, s *imaptest.Server, folder string, raw []byte, flags ...imap.Flag) {
	t.Helper()
	if _, err := s.Append(folder, raw, flags...); err != nil {
		t.Fatal(err)
	}
}

func (w *world) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := w.Pool.QueryRow(w.Ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually waits for cond, or fails after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFetchingAMailbox(t *testing.T) {
	t.Parallel()

	t.Run("MailReadByAnotherClientIsImportedOnceAndMovedNeverDeleted", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		for i := 1; i <= 3; i++ {
			var flags []imap.Flag
			if i == 2 {
				flags = []imap.Flag{imap.FlagSeen} // another client read it first
			}
			put(t, s, "INBOX", customerMail(i, fmt.Sprintf("c%d@example.net", i)), flags...)
		}
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "three tickets and the inbox moved", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 3 && s.Count("INBOX") == 0 && s.Count("Processed") == 3
		})
		if s.Seen("Processed") != 1 {
			t.Errorf("%d messages are \\Seen in Processed, want the one another client read: fetching touches no flag", s.Seen("Processed"))
		}
		if n := w.count(t, `SELECT count(*) FROM tickets WHERE support_address = 'support@example.org'`); n != 3 {
			t.Errorf("%d tickets remember the mailbox's address, want 3", n)
		}
	})

	t.Run("MailThatWaitedInTheMailboxForDaysIsATicketButNobodyIsMailedOfIt", func(t *testing.T) {
		t.Parallel()
		w := newWorldOf(t, func(c *desk.Config) { c.Ack = &desk.AckConfig{} })
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		// A mailbox connected for the first time holds mail of months ago.
		if _, err := s.AppendAt("INBOX", customerMail(1, "months@example.net"), time.Now().Add(-90*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendAt("INBOX", customerMail(2, "hours@example.net"), time.Now().Add(-3*time.Hour)); err != nil {
			t.Fatal(err)
		}
		put(t, s, "INBOX", customerMail(3, "now@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "three tickets", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 3 })
		// An agent's notification is written with the last step of the ticket's triage, before its job completes.
		eventually(t, 30*time.Second, "three triaged", func() bool {
			return w.count(t, `SELECT count(*) FROM river_job WHERE kind = 'triage' AND state = 'completed'`) == 3
		})
		mailed := func(direction string) []string {
			rows, err := w.Pool.Query(w.Ctx, `SELECT c.email FROM messages m JOIN tickets t ON t.id = m.ticket_id
				JOIN customers c ON c.id = t.customer_id WHERE m.direction = $1 ORDER BY c.email`, direction)
			if err != nil {
				t.Fatal(err)
			}
			of, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return of
		}
		want := []string{"hours@example.net", "now@example.net"}
		if got := mailed("acknowledgement"); !slices.Equal(got, want) {
			t.Errorf("acknowledged %q, want %q: not the mail that reached the mailbox 90 days ago", got, want)
		}
		if got := mailed("notification"); !slices.Equal(got, want) {
			t.Errorf("agents notified of %q, want %q: not of the mail that reached the mailbox 90 days ago", got, want)
		}

		// A reply that waited as long joins its ticket and is triaged
		// again, and nobody is mailed of it either.
		reply := "From: Customer 3 <now@example.net>\r\nTo: support@example.org\r\nSubject: Re: Question 3\r\n" +
			"Message-ID: <late-reply.now@example.net>\r\nIn-Reply-To: <q3.now@example.net>\r\n\r\nAnd one more thing.\r\n"
		if _, err := s.AppendAt("INBOX", []byte(reply), time.Now().Add(-48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the reply triaged", func() bool {
			return w.count(t, `SELECT count(*) FROM river_job WHERE kind = 'triage' AND state = 'completed'`) == 4
		})
		if n := w.count(t, `SELECT count(*) FROM tickets`); n != 3 {
			t.Errorf("%d tickets, want the reply on its ticket", n)
		}
		if got := mailed("notification"); !slices.Equal(got, want) {
			t.Errorf("agents notified of %q, want %q: not of the reply that waited two days", got, want)
		}
	})

	t.Run("AMailboxImportingSinceATimeLeavesOlderMailUnreadWhereItIs", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		now := time.Now()
		for i, at := range []time.Time{now.Add(-30 * 24 * time.Hour), now.Add(-2 * time.Hour), now.Add(-25 * time.Minute)} {
			if _, err := s.AppendAt("INBOX", customerMail(i+1, fmt.Sprintf("s%d@example.net", i+1)), at); err != nil {
				t.Fatal(err)
			}
		}
		since := now.Add(-time.Hour)
		w.mailbox(t, "support", s, "pw", "support@example.org", func(p *desk.MailboxParams) { p.ImportSince = &since })
		eventually(t, 30*time.Second, "the newest moved", func() bool { return s.Count("Processed") == 1 })
		put(t, s, "INBOX", customerMail(4, "s4@example.net"))
		eventually(t, 30*time.Second, "the one appended after", func() bool { return s.Count("Processed") == 2 })
		if n := w.count(t, `SELECT count(*) FROM tickets`); n != 2 || s.Count("INBOX") != 2 || s.Seen("INBOX") != 0 {
			t.Errorf("%d tickets, %d messages left in INBOX (%d seen); want 2 tickets and the 2 older messages left unread", n, s.Count("INBOX"), s.Seen("INBOX"))
		}
		m, err := w.desk.Mailbox(w.Ctx, "support")
		if err != nil {
			t.Fatal(err)
		}
		if m.LastUID != 4 || m.Imported != 2 {
			t.Errorf("checkpoint at UID %d with %d imported, want past all 4 with 2 imported", m.LastUID, m.Imported)
		}
		// Its SLA clocks count from when it reached the mailbox (its
		// INTERNALDATE, to the second), not from when it was fetched.
		if n := w.count(t, `SELECT count(*) FROM messages WHERE arrived_at BETWEEN $1::timestamptz - interval '1 second' AND $1`,
			now.Add(-25*time.Minute)); n != 1 {
			t.Errorf("%d messages kept as arrived 25 minutes ago, want 1", n)
		}
	})

	t.Run("AURLThatGetsTheTLSOfAPortWrongSaysWhichSchemeToWrite", func(t *testing.T) {
		t.Parallel()
		cert := testcert.New(t)
		// A greeting that never comes is waited for as long as a command.
		w := newWorld(t, func(c *fetcher.Config) { c.TLS, c.Timeout = &tls.Config{RootCAs: cert.Pool}, 3*time.Second })
		implicit := imaptest.Start(t, imaptest.Options{User: "a@example.org", Password: "pw", TLS: cert.Server})
		plain := imaptest.Start(t, imaptest.Options{User: "b@example.org", Password: "pw"})
		w.mailbox(t, "implicit", implicit, "pw", "a@example.org", func(p *desk.MailboxParams) {
			p.IMAPURL = "imap://a%40example.org@" + implicit.Addr + "/INBOX" // STARTTLS, on a port of TLS from the start
		})
		w.mailbox(t, "plain", plain, "pw", "b@example.org", func(p *desk.MailboxParams) {
			p.IMAPURL = "imaps://b%40example.org@" + plain.Addr + "/INBOX" // TLS, on a port that greets in the clear
		})
		for name, hint := range map[string]string{"implicit": "write imaps://", "plain": "write imap://"} {
			eventually(t, 30*time.Second, name+"'s error", func() bool {
				m, _ := w.desk.Mailbox(w.Ctx, name)
				return m != nil && m.LastError != nil
			})
			if m, _ := w.desk.Mailbox(w.Ctx, name); !strings.Contains(*m.LastError, hint) {
				t.Errorf("%s: last error %q, want it to say %q", name, *m.LastError, hint)
			}
		}
	})

	t.Run("AMessageAppendedWhileItIdlesIsATicketWithinFiveSeconds", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, func(c *fetcher.Config) { c.Poll = time.Hour }) // IDLE, not polling, must find it
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the connection", func() bool {
			m, _ := w.desk.Mailbox(w.Ctx, "support")
			return m != nil && m.Connected && s.Count("Processed") == 0
		})
		eventually(t, 30*time.Second, "the session in IDLE", func() bool { return s.Idling() > 0 })
		put(t, s, "INBOX", customerMail(1, "late@example.net"))
		start := time.Now()
		eventually(t, 10*time.Second, "the ticket", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 1 })
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the ticket came %s after the mail, want within 5s", took)
		}
	})

	t.Run("AUIDValidityResetMakesNoNewTicket", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		raws := [][]byte{customerMail(1, "a@example.net"), customerMail(2, "b@example.net")}
		for _, raw := range raws {
			put(t, s, "INBOX", raw)
		}
		w.mailbox(t, "support", s, "pw", "support@example.org", func(p *desk.MailboxParams) { p.AfterImport = desk.AfterImportKeep })
		eventually(t, 30*time.Second, "two tickets", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 2 })
		if err := s.Recreate("INBOX", raws); err != nil {
			t.Fatal(err)
		}
		put(t, s, "INBOX", customerMail(3, "c@example.net")) // and a new one, which must come in
		eventually(t, 30*time.Second, "the third ticket", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 3 })
		eventually(t, 10*time.Second, "the reset recorded", func() bool {
			m, _ := w.desk.Mailbox(w.Ctx, "support")
			return m.UIDValidityResets == 1 && m.LastUID == 3
		})
		if n := w.count(t, `SELECT count(*) FROM messages WHERE direction = 'inbound'`); n != 3 {
			t.Errorf("%d inbound messages, want 3: the old ones were filed again", n)
		}
		if s.Count("INBOX") != 3 {
			t.Errorf("with after-import keep the inbox holds %d, want its 3", s.Count("INBOX"))
		}
	})

	t.Run("AConnectionLostHalfwayThroughAMessageFilesItWholeAfterTheReconnect", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		var body strings.Builder
		for i := 1; i <= 1000; i++ { // within what a message's text keeps
			fmt.Fprintf(&body, "Line %d of what the customer wrote.\r\n", i)
		}
		put(t, s, "INBOX", []byte("From: Long <long@example.net>\r\nTo: support@example.org\r\nSubject: A long one\r\n"+
			"Message-ID: <long@example.net>\r\n\r\n"+body.String()))
		s.DropInNextBody()
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the message moved", func() bool { return s.Count("Processed") == 1 })
		var stored string
		if err := w.Pool.QueryRow(w.Ctx, `SELECT body FROM messages WHERE direction = 'inbound'`).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stored, "Line 1000 of what the customer wrote.") || s.Logins() < 2 {
			t.Errorf("after %d sign-ins, the stored message has %d bytes and ends %q; want it whole, after a reconnect",
				s.Logins(), len(stored), stored[max(0, len(stored)-80):])
		}
	})

	t.Run("AMessageTheServerRefusesForAWhileIsAskedForAgain", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, func(c *fetcher.Config) { c.PassBy = time.Hour })
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		put(t, s, "INBOX", customerMail(1, "unreadable@example.net"))
		s.RefuseFetch(1)
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "five sessions", func() bool { return s.Logins() >= 5 })
		if m, err := w.desk.Mailbox(w.Ctx, "support"); err != nil || m.LastUID != 0 {
			t.Errorf("checkpoint %+v (%v), want it before the message: within the hour it is asked for again", m, err)
		}
	})

	t.Run("AMessageTheServerRefusesEachTimeIsPassedByAndTheMailBehindItArrives", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, func(c *fetcher.Config) { c.PassBy = time.Nanosecond })
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		put(t, s, "INBOX", customerMail(1, "unreadable@example.net"))
		put(t, s, "INBOX", customerMail(2, "behind@example.net"))
		s.RefuseFetch(1)
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the mail behind it", func() bool { return s.Count("Processed") == 1 })
		m, err := w.desk.Mailbox(w.Ctx, "support")
		if err != nil {
			t.Fatal(err)
		}
		if n := w.count(t, `SELECT count(*) FROM tickets`); n != 1 || s.Count("INBOX") != 1 || m.LastUID != 2 || s.Logins() < 3 {
			t.Errorf("%d tickets, %d left in INBOX, checkpoint at UID %d after %d sign-ins; want 1 ticket, the refused one left, "+
				"the checkpoint past both, after 3 sessions or more", n, s.Count("INBOX"), m.LastUID, s.Logins())
		}
		if m.LastError == nil || !strings.Contains(*m.LastError, "Some messages could not be FETCHed") {
			t.Errorf("last error %v, want the server's refusal", m.LastError)
		}
	})

	t.Run("AConnectionThatDiedSilentlyWhileIdlingIsDialledAgainWithinACommandsTimeout", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, func(c *fetcher.Config) { c.Timeout = 5 * time.Second })
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		s.StallNextIdle()
		w.mailbox(t, "support", s, "pw", "support@example.org")
		w.connected(t, "support")
		put(t, s, "INBOX", customerMail(1, "after-the-silence@example.net"))
		sent := time.Now()
		eventually(t, 30*time.Second, "the ticket, not half an hour later", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 1 })
		if s.Logins() < 2 {
			t.Errorf("%d sign-ins, want a second session", s.Logins())
		}
		// One timeout of 5s, and the next session files it: three would
		// be go-imap reading on after the first had run out.
		if took := time.Since(sent); took > 14*time.Second {
			t.Errorf("the ticket came %s after the mail, want about one command's timeout (5s)", took.Round(time.Second))
		}
	})

	t.Run("AMessageSomeoneDeletedIsLeftOut", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		put(t, s, "INBOX", customerMail(1, "spam@example.net"), imap.FlagDeleted) // thrown away, not yet expunged
		put(t, s, "INBOX", customerMail(2, "customer@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the other moved", func() bool { return s.Count("Processed") == 1 })
		if n := w.count(t, `SELECT count(*) FROM customers WHERE email = 'spam@example.net'`); n != 0 || s.Count("INBOX") != 1 {
			t.Errorf("%d tickets of the deleted message's sender, %d left in INBOX; want none, and it left as it was", n, s.Count("INBOX"))
		}
	})

	t.Run("AnAccountThatMayNotMakeFoldersIsToldToFlagInstead", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "shared@example.org", Password: "pw", NoCreate: true})
		put(t, s, "INBOX", customerMail(1, "to-shared@example.net"))
		w.mailbox(t, "shared", s, "pw", "shared@example.org")
		eventually(t, 30*time.Second, "the error", func() bool {
			m, _ := w.desk.Mailbox(w.Ctx, "shared")
			return m != nil && m.LastError != nil
		})
		if m, _ := w.desk.Mailbox(w.Ctx, "shared"); !strings.Contains(*m.LastError, "NOPERM") || !strings.Contains(*m.LastError, "-after-import flag") {
			t.Errorf("last error %q, want the server's refusal and what to do", *m.LastError)
		}
		w.mailbox(t, "shared", s, "pw", "shared@example.org", func(p *desk.MailboxParams) { p.AfterImport = desk.AfterImportFlag })
		eventually(t, 30*time.Second, "the ticket, flagged", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 1 })
	})

	t.Run("AServersByeEndsTheSessionAtOnceAndIsWhatItsLastErrorSays", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, func(c *fetcher.Config) { c.Poll = time.Hour }) // not the next look: the BYE itself
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		s.ByeAtNextIdle("Session invalidated - AccessTokenExpired")
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the error, and a new session", func() bool {
			m, _ := w.desk.Mailbox(w.Ctx, "support")
			return m != nil && m.LastError != nil && s.Logins() >= 2
		})
		if m, _ := w.desk.Mailbox(w.Ctx, "support"); !strings.Contains(*m.LastError, "the server ended the session: Session invalidated - AccessTokenExpired") {
			t.Errorf("last error %q, want the server's BYE", *m.LastError)
		}
	})

	t.Run("AConnectionDroppedBeforeTheMoveOnlyFinishesTheMove", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		s.DropAtNextMove()
		for i := 1; i <= 2; i++ {
			put(t, s, "INBOX", customerMail(i, fmt.Sprintf("d%d@example.net", i)))
		}
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "both moved", func() bool { return s.Count("INBOX") == 0 && s.Count("Processed") == 2 })
		if n := w.count(t, `SELECT count(*) FROM messages WHERE direction = 'inbound'`); n != 2 || s.Logins() < 2 {
			t.Errorf("%d messages after %d sign-ins, want 2 after a reconnect", n, s.Logins())
		}
	})

	t.Run("AMoveTheServerRefusesLeavesTheMailAndFetchingGoesOn", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		s.RefuseMoves(true) // Processed is over its quota
		put(t, s, "INBOX", customerMail(1, "q1@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the first filed, its refusal told", func() bool {
			m, _ := w.desk.Mailbox(w.Ctx, "support")
			return w.count(t, `SELECT count(*) FROM tickets`) == 1 && m != nil && m.LastError != nil
		})
		if m, _ := w.desk.Mailbox(w.Ctx, "support"); !strings.Contains(*m.LastError, "OVERQUOTA") && !strings.Contains(*m.LastError, "Quota exceeded") {
			t.Errorf("last error %q, want the server's refusal", *m.LastError)
		}
		// The refusal stops nothing: the next mail is filed, by the same
		// session, and both stay in the inbox.
		put(t, s, "INBOX", customerMail(2, "q2@example.net"))
		eventually(t, 30*time.Second, "the second filed", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 2 })
		if s.Count("INBOX") != 2 || s.Logins() != 1 {
			t.Errorf("%d messages in the inbox after %d sign-ins, want both, in one session", s.Count("INBOX"), s.Logins())
		}
		// Once the server takes moves again, the next round moves them all.
		s.RefuseMoves(false)
		put(t, s, "INBOX", customerMail(3, "q3@example.net"))
		eventually(t, 30*time.Second, "all three filed and moved", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 3 && s.Count("INBOX") == 0 && s.Count("Processed") == 3
		})
	})

	t.Run("AServerWithoutIdleIsPolled", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw", NoIdle: true})
		w.mailbox(t, "support", s, "pw", "support@example.org")
		w.connected(t, "support")
		put(t, s, "INBOX", customerMail(1, "p@example.net"))
		eventually(t, 10*time.Second, "the ticket", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 1 })
	})

	t.Run("AMailboxWithABadPasswordDelaysNoOther", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		bad := imaptest.Start(t, imaptest.Options{User: "billing@example.org", Password: "right"})
		good := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		w.mailbox(t, "billing", bad, "wrong", "billing@example.org")
		w.mailbox(t, "support", good, "pw", "support@example.org")
		_, _ = good.Append("INBOX", customerMail(1, "g@example.net"))
		eventually(t, 10*time.Second, "the good mailbox's ticket", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 1 })
		eventually(t, 10*time.Second, "the bad one's error", func() bool {
			m, _ := w.desk.Mailbox(w.Ctx, "billing")
			return m.LastError != nil && strings.Contains(*m.LastError, "sign in") && !m.Connected
		})
	})

	t.Run("AReplyToAMailboxsTicketGoesOutFromItsAddress", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "billing@example.org", Password: "pw"})
		w.mailbox(t, "billing", s, "pw", "billing@example.org", func(p *desk.MailboxParams) {
			p.From, p.Team = &mail.Address{Name: "Example Billing", Address: "billing@example.org"}, "billing"
		})
		put(t, s, "INBOX", customerMail(1, "ada@example.net"))
		eventually(t, 30*time.Second, "the ticket", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 1 })
		var ticketID string
		_ = w.Pool.QueryRow(w.Ctx, `SELECT id FROM tickets`).Scan(&ticketID)
		w.Reply(t, w.queue, ticketID, "We refunded it.")
		var got *smtptest.Delivery
		eventually(t, 30*time.Second, "the reply at the relay", func() bool {
			for _, d := range w.relay.Deliveries() {
				if strings.Contains(string(d.Raw), "We refunded it.") {
					got = &d
					return true
				}
			}
			return false
		})
		raw := string(got.Raw)
		if !strings.Contains(raw, "From: \"Example Billing\" <billing@example.org>") || !strings.Contains(raw, "billing+"+ticketID+"@example.org") ||
			!strings.HasPrefix(got.From, "billing+bounces.") || !strings.HasSuffix(got.From, "@example.org") {
			t.Errorf("the reply went out from %s with:\n%s", got.From, raw)
		}
		if n := w.count(t, `SELECT count(*) FROM tickets WHERE team = 'billing'`); n != 1 {
			t.Errorf("the ticket is not the billing team's")
		}
	})

	t.Run("XOAUTH2SignsInAndARefusedTokenIsRefreshed", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		valid, issued := "fresh-1", 0
		tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.FormValue("grant_type") != "refresh_token" || r.FormValue("refresh_token") != "the-refresh-token" {
				http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
				return
			}
			issued++
			valid = fmt.Sprintf("fresh-%d", issued)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": valid, "token_type": "Bearer", "expires_in": 3600})
		}))
		t.Cleanup(tokens.Close)
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw", Token: func() string {
			mu.Lock()
			defer mu.Unlock()
			return valid
		}})
		// Added, then connected earlier: a refresh token, and an access
		// token the server no longer takes.
		w.mailbox(t, "support", s, "", "support@example.org")
		if err := w.desk.ConnectMailbox(w.Ctx, "support", &store.OAuth{Provider: "custom", ClientID: "helpdesk", TokenURL: tokens.URL},
			"expired-0", "the-refresh-token", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		// Added again, to move mail elsewhere: it stays connected. The
		// mail comes once the session that moves to Done has made it, not
		// to the session before, which would move it to Processed.
		w.mailbox(t, "support", s, "", "support@example.org", func(p *desk.MailboxParams) { p.ProcessedFolder = "Done" })
		eventually(t, 30*time.Second, "the folder Done made by a session signed in with OAuth", func() bool { return s.Count("Done") == 0 })
		put(t, s, "INBOX", customerMail(1, "o@example.net"))
		eventually(t, 30*time.Second, "the ticket", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 1 && s.Count("Done") == 1 })
		m, _ := w.desk.Mailbox(w.Ctx, "support")
		if m.OAuth == nil || !strings.HasPrefix(m.OAuth.AccessToken, "fresh-") {
			t.Errorf("the new token was not kept: %+v", m.OAuth)
		}
		// Added again with a password: it signs in with that instead.
		w.mailbox(t, "support", s, "pw", "support@example.org")
		if m, _ := w.desk.Mailbox(w.Ctx, "support"); m.OAuth != nil {
			t.Errorf("added with a password, it is still connected with OAuth: %+v", m.OAuth)
		}
	})

	// Mail fetched from a mailbox is judged by whoever took it from its
	// sender, though the service trusts no MTA of its own: Exchange
	// Online for a Microsoft 365 mailbox (its results have no
	// authserv-id); for a company's own IMAP server, the MTA in front of
	// it that the mailbox names (a field of another id that came with the
	// mail, below the MTA's, is not read).
	for _, tc := range []struct {
		name    string
		server  imaptest.Options
		mailbox func(t *testing.T, w *world, s *imaptest.Server)
		results string // the Authentication-Results fields on top of the mail
	}{
		{"MailOfAMicrosoft365MailboxIsJudgedByExchangeOnline", imaptest.Options{Token: func() string { return "valid" }}, func(t *testing.T, w *world, s *imaptest.Server) {
			w.mailbox(t, "support", s, "", "support@example.org")
			if err := w.desk.ConnectMailbox(w.Ctx, "support", &store.OAuth{Provider: "microsoft", ClientID: "helpdesk"},
				"valid", "the-refresh-token", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}, "Authentication-Results: spf=fail (sender IP is 192.0.2.7) smtp.mailfrom=attacker.example; " +
			"dkim=none (message not signed) header.d=none;dmarc=fail action=oreject header.from=example.net;compauth=fail reason=000\r\n"},
		{"MailOfAMailboxThatNamesItsMTAIsJudgedByIt", imaptest.Options{}, func(t *testing.T, w *world, s *imaptest.Server) {
			w.mailbox(t, "support", s, "pw", "support@example.org", func(p *desk.MailboxParams) { p.AuthservID = "mx.example.org" })
		}, "Authentication-Results: mx.example.org/4B2C1F3A9; dmarc=fail (p=reject dis=none) header.from=example.net\r\n" +
			"Authentication-Results: attacker.example; dmarc=pass header.from=example.net\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			tc.server.User, tc.server.Password = "support@example.org", "pw"
			s := imaptest.Start(t, tc.server)
			tc.mailbox(t, w, s)
			put(t, s, "INBOX", []byte(tc.results+string(customerMail(1, "ada@example.net"))))
			eventually(t, 30*time.Second, "the mail filed", func() bool { return s.Count("Processed") == 1 })
			var verdict string
			if err := w.Pool.QueryRow(w.Ctx, `SELECT auth_verdict FROM messages WHERE email_message_id = '<q1.ada@example.net>'`).Scan(&verdict); err != nil {
				t.Fatal(err)
			}
			if verdict != "fail" {
				t.Errorf("verdict %q, want the fail of whoever took the mail from its sender", verdict)
			}
		})
	}

	// The listener refuses such a mail for good (550 5.1.7); a mailbox
	// cannot refuse it, so it passes it by, leaves it where it is and goes
	// on with the next, instead of trying it again forever.
	t.Run("AMessageWithNoUsableSenderIsPassedByAndLeftInTheInbox", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		nobodys := []byte("From: a@example.net, b@example.net\r\nTo: support@example.org\r\nSubject: Two of us\r\n" +
			"Message-ID: <two@example.net>\r\n\r\nWho wrote this?\r\n")
		for _, raw := range [][]byte{nobodys, customerMail(1, "c1@example.net")} {
			put(t, s, "INBOX", raw)
		}
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the second message's ticket, the first left in the inbox", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 1 && s.Count("Processed") == 1 && s.Count("INBOX") == 1
		})
		if n := w.count(t, `SELECT count(*) FROM messages WHERE body LIKE '%Who wrote this%'`); n != 0 {
			t.Errorf("%d messages of the mail with no usable sender, want none", n)
		}
	})

	// What the listener takes or refuses for good, a mailbox files or
	// passes by: no hostile mail stops the mail behind it.
	t.Run("HostileMailIsFiledOrPassedByAndTheMailBehindItArrives", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		const n = 40
		for i := range n {
			put(t, s, "INBOX", inboundtest.Hostile(i))
		}
		put(t, s, "INBOX", customerMail(99, "last@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 60*time.Second, "the last mail's ticket", func() bool {
			return w.count(t, `SELECT count(*) FROM messages WHERE body LIKE '%Question number 99.%'`) == 1
		})
		in, done := s.Count("INBOX"), s.Count("Processed")
		t.Logf("%d filed, %d passed by", done, in)
		if in+done != n+1 || done == 0 {
			t.Errorf("%d left in the inbox and %d filed, want the %d mails in one or the other", in, done, n+1)
		}
	})

	for _, tc := range []struct {
		name       string
		shortSizes bool
	}{
		{"AMessageOverTheLimitIsKeptAsItsHeadersAndNotFetchedAgain", false},
		// A server's RFC822.SIZE may fall short (Exchange's is an
		// estimate): what comes is measured as it comes.
		{"AMessageOverTheLimitWhoseSizeTheServerUnderstatedIsKeptAsItsHeaders", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, func(c *fetcher.Config) { c.MaxBytes = 2000 })
			s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw", ShortSizes: tc.shortSizes})
			big := append(customerMail(1, "big@example.net"), []byte(strings.Repeat("x", 5000)+"\r\n")...)
			put(t, s, "INBOX", big)
			w.mailbox(t, "support", s, "pw", "support@example.org")
			eventually(t, 30*time.Second, "the ticket", func() bool { return w.count(t, `SELECT count(*) FROM tickets`) == 1 && s.Count("INBOX") == 0 })
			note := fmt.Sprintf("had %d bytes, over the limit of 2000: only its headers were fetched. It stays in the folder Processed of the mailbox support.", len(big))
			if n := w.count(t, `SELECT count(*) FROM messages WHERE strpos(body, $1) > 0`, note); n != 1 {
				t.Errorf("%d messages with the note %q, want 1", n, note)
			}
			if n := w.count(t, `SELECT count(*) FROM messages WHERE body LIKE '%xxxx%'`); n != 0 {
				t.Errorf("%d messages keep the text past the limit, want none", n)
			}
		})
	}

	// Courier, cPanel and many Dovecot servers keep every folder under the
	// personal namespace's prefix ("INBOX."), and refuse to make one
	// outside it: the default Processed must still work there.
	t.Run("OnAServerWithANamespacePrefixFiledMailIsMovedUnderIt", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw", Prefix: "INBOX/"})
		put(t, s, "INBOX", customerMail(1, "c1@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the ticket, and its mail moved to INBOX/Processed", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 1 && s.Count("INBOX") == 0 && s.Count("INBOX/Processed") == 1
		})
		if n := s.Count("Processed"); n != -1 {
			t.Errorf("a folder Processed outside the namespace holds %d messages, want none made", n)
		}
	})

	// A session goes on with what it signed in with for as long as its
	// connection lasts: a changed mailbox must be fetched anew, not after
	// the next failure.
	t.Run("AMailboxChangedWhileItIdlesIsFetchedWithItsNewSettings", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		put(t, s, "INBOX", customerMail(1, "c1@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org")
		eventually(t, 30*time.Second, "the first ticket, its mail in Processed", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 1 && s.Count("Processed") == 1
		})
		w.mailbox(t, "support", s, "pw", "support@example.org", func(p *desk.MailboxParams) { p.ProcessedFolder = "Done" })
		eventually(t, 30*time.Second, "the folder Done made", func() bool { return s.Count("Done") == 0 })
		put(t, s, "INBOX", customerMail(2, "c2@example.net"))
		eventually(t, 30*time.Second, "the second ticket, its mail in Done", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 2 && s.Count("Done") == 1
		})
		if n := s.Count("Processed"); n != 1 {
			t.Errorf("Processed holds %d messages, want the first one only", n)
		}
	})

	// A message moved into the folder read would come back with a new
	// UID, to be filed and moved again without end: a row that says so
	// (written before adding refused it) stops the fetching instead.
	t.Run("AProcessedFolderThatIsTheFolderReadIsRefused", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		if _, err := w.Pool.Exec(w.Ctx, `INSERT INTO support_addresses (address) VALUES ('support@example.org')`); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Pool.Exec(w.Ctx, `INSERT INTO mailboxes (name, address, imap_url, password, processed_folder, after_import)
			VALUES ('support', 'support@example.org', $1, 'pw', 'inbox', 'move')`,
			"imap://"+url.PathEscape(s.Username())+"@"+s.Addr+"/INBOX?tls=none"); err != nil {
			t.Fatal(err)
		}
		put(t, s, "INBOX", customerMail(1, "c1@example.net"))
		eventually(t, 30*time.Second, "the error", func() bool {
			m, _ := w.desk.Mailbox(w.Ctx, "support")
			return m != nil && m.LastError != nil && strings.Contains(*m.LastError, "is the folder read")
		})
		if n := w.count(t, `SELECT count(*) FROM tickets`); n != 0 {
			t.Errorf("%d tickets, want none filed", n)
		}
	})

	t.Run("OnAServerWithANamespacePrefixAFolderNamedWithoutItIsReadUnderIt", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw", Prefix: "INBOX/"})
		if err := s.User.Create("INBOX/Support", nil); err != nil {
			t.Fatal(err)
		}
		put(t, s, "INBOX/Support", customerMail(1, "c1@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org", func(p *desk.MailboxParams) {
			p.IMAPURL = strings.Replace(p.IMAPURL, "/INBOX?", "/Support?", 1)
		})
		eventually(t, 30*time.Second, "the ticket, and its mail moved from INBOX/Support to INBOX/Processed", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 1 && s.Count("INBOX/Support") == 0 && s.Count("INBOX/Processed") == 1
		})
	})

	// LIST takes a name as a pattern: Done% matches Done-2025, which is
	// not the folder asked for.
	t.Run("AProcessedFolderIsFoundByItsOwnNameNotAsAPattern", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw"})
		if err := s.User.Create("Done-2025", nil); err != nil {
			t.Fatal(err)
		}
		put(t, s, "INBOX", customerMail(1, "c1@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org", func(p *desk.MailboxParams) { p.ProcessedFolder = "Done%" })
		eventually(t, 30*time.Second, "the ticket, its mail moved to a folder Done% made for it", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 1 && s.Count("Done%") == 1
		})
	})

	t.Run("AProcessedFolderNamedWithThePrefixIsTakenAsItIs", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		s := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "pw", Prefix: "INBOX/"})
		put(t, s, "INBOX", customerMail(1, "c1@example.net"))
		w.mailbox(t, "support", s, "pw", "support@example.org", func(p *desk.MailboxParams) { p.ProcessedFolder = "INBOX/Done" })
		eventually(t, 30*time.Second, "the ticket, and its mail moved to INBOX/Done", func() bool {
			return w.count(t, `SELECT count(*) FROM tickets`) == 1 && s.Count("INBOX") == 0 && s.Count("INBOX/Done") == 1
		})
	})
}
