package inbound_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

// poisoned is a mail whose headers carry what PostgreSQL's text cannot
// hold, as a broken or hostile sender writes it.
func poisoned(id, inReplyTo, references, from string) []byte {
	return []byte("From: " + from + "\r\nTo: support@helpdesk.example.com\r\nSubject: Help\r\n" +
		"Message-ID: " + id + "\r\nIn-Reply-To: " + inReplyTo + "\r\nReferences: " + references + "\r\n\r\nPlease help.\r\n")
}

func TestInboundPoison(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"NULInMessageID", poisoned("<a\x00b@example.com>", "<x@y>", "<x@y>", "ada.lovelace@example.com")},
		{"InvalidUTF8InMessageID", poisoned("<a\xff\xfeb@example.com>", "<x@y>", "<x@y>", "ada.lovelace@example.com")},
		{"NULInInReplyTo", poisoned("<c1@example.com>", "<p\x00q@example.com>", "<x@y>", "ada.lovelace@example.com")},
		{"InvalidUTF8InReferences", poisoned("<c2@example.com>", "<x@y>", "<r\xc3\x28s@example.com> <t@example.com>", "ada.lovelace@example.com")},
		{"EncodedNULInTheFromName", poisoned("<c3@example.com>", "<x@y>", "<x@y>", "=?utf-8?q?Ada=00Lovelace?= <ada.lovelace@example.com>")},
		{"InvalidUTF8InTheFromName", poisoned("<c4@example.com>", "<x@y>", "<x@y>", "Ada \xff <ada.lovelace@example.com>")},
		{"ATenKilobyteMessageIDLine", poisoned("<"+strings.Repeat("m", 10_000)+"@example.com>", "<x@y>", "<x@y>", "ada.lovelace@example.com")},
	} {
		t.Run(tc.name+"IsStoredOnceAndItsRawBytesKept", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
			for range 2 {
				if err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", tc.raw); err != nil {
					t.Fatalf("answered %v, want 250", err)
				}
			}
			var id int64
			if err := b.Pool.QueryRow(b.Ctx, `SELECT id FROM messages`).Scan(&id); err != nil {
				t.Fatalf("want exactly one message: %v", err)
			}
			raw, err := b.Store.RawEmail(b.Ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			// What the sender sent, less the dot-stuffing and line ending SMTP adds.
			if !bytes.Contains(raw, bytes.TrimSuffix(tc.raw, []byte("\r\n"))) {
				t.Errorf("the raw message was not kept unchanged:\n%q", raw)
			}
		})
	}

	t.Run("AHeaderLineOverTheLimitGetsA5xxReply", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
		raw := poisoned("<"+strings.Repeat("m", 100_000)+"@example.com>", "<x@y>", "<x@y>", "ada.lovelace@example.com")
		err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", raw)
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code != 500 || se.EnhancedCode != (smtp.EnhancedCode{5, 4, 0}) {
			t.Errorf("got %v, want a 500 5.4.0 reply", err)
		}
		if n := b.count(t, `SELECT count(*) FROM messages`); n != 0 {
			t.Errorf("%d messages stored", n)
		}
	})

	t.Run("AnUnusableFromIsRefusedSayingWhatIsWrongInOneBoundedASCIILine", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
		long := strings.Repeat("b", 144)
		for _, tc := range []struct{ from, says string }{
			{"a@example.com, b@example.com", "The message has no usable sender address: a From field of 2 addresses, want one"},
			// Its domain has no form DMARC can look up (a zero-width joiner
			// has no ASCII form): the reply quotes it, the joiner escaped
			// and the ü as two '?', and cut short.
			{"\"Bj\xc3\xb6rn\" <" + long + "@b\u200d\xc3\xbccher.example>",
				`The message has no usable sender address: a From address "` + long + `@b\u200d??cher.example" whose domain ...`},
		} {
			raw := "From: " + tc.from + "\r\nTo: support@helpdesk.example.com\r\nSubject: Hello\r\nMessage-ID: <from@example.com>\r\n\r\nHi.\r\n"
			err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", []byte(raw))
			var se *smtp.SMTPError
			if !errors.As(err, &se) || se.Code != 550 || se.EnhancedCode != (smtp.EnhancedCode{5, 1, 7}) {
				t.Fatalf("From %q: %v, want 550 5.1.7", tc.from, err)
			}
			if se.Message != tc.says {
				t.Errorf("From %q: the reply says\n%q, want\n%q", tc.from, se.Message, tc.says)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM messages`); n != 0 {
			t.Errorf("%d messages stored", n)
		}
	})

	t.Run("ContentTheDatabaseRefusesIsRefusedForGoodNot451", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
		// Stands for any data exception (SQLSTATE class 22) a message could still cause.
		if _, err := b.Pool.Exec(b.Ctx, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'bad text' USING ERRCODE = '22021'; END $$;
			CREATE TRIGGER refuse BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
			t.Fatal(err)
		}
		err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", fixture(t, "gmail_new_ticket.eml"))
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code != 554 || se.EnhancedCode != (smtp.EnhancedCode{5, 6, 0}) {
			t.Errorf("got %v, want 554 5.6.0", err)
		}
	})
}

func TestInboundSessionLimits(t *testing.T) {
	t.Parallel()

	t.Run("ASessionPastTheCapIsAnswered421", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", MaxSessions: 2})
		for range 2 {
			c, err := net.Dial("tcp", b.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if _, _, err := textproto.NewConn(c).ReadResponse(220); err != nil {
				t.Fatalf("greeting: %v", err)
			}
		}
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		code, msg, err := textproto.NewConn(c).ReadResponse(220)
		if code != 421 || !strings.HasPrefix(msg, "4.3.2") {
			t.Errorf("third session: %d %q (%v), want 421 4.3.2", code, msg, err)
		}
	})

	t.Run("AClientThatTricklesBytesLosesItsSessionAtTheMessageDeadline", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", MessageTimeout: time.Second})
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		// One byte every 100ms: each read is quick, the whole never ends.
		closed := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, r)
			closed <- err
		}()
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case <-closed:
				return // the server ended the session
			case <-timeout:
				t.Fatal("the session outlived its message deadline by far")
			case <-ticker.C:
				if _, err := c.Write([]byte("N")); err != nil {
					return
				}
			}
		}
	})
}

// A message whose sender lost its connection before the message's end was
// never answered 250: the sender still holds it and sends it again. A
// stored half would take its Message-ID, and the whole, sent again, would
// be dropped as its duplicate.
func TestAMessageCutShortByALostConnectionIsNeverStored(t *testing.T) {
	t.Parallel()
	var body strings.Builder
	for i := 1; i <= 400; i++ {
		fmt.Fprintf(&body, "Line %d of what the customer wrote.\r\n", i)
	}
	whole := "From: Ada Lovelace <ada.lovelace@example.com>\r\nTo: support@helpdesk.example.com\r\nSubject: A long one\r\n" +
		"Message-ID: <cut-short@example.com>\r\n\r\n" + body.String()
	for _, tc := range []struct {
		name string
		send func(c *textproto.Conn) error // sends the first half of whole, and leaves the rest unsent
	}{
		{"BDATLASTWithHalfItsChunk", func(c *textproto.Conn) error {
			_, err := fmt.Fprintf(c.W, "BDAT %d LAST\r\n%s", len(whole), whole[:len(whole)/2])
			return errors.Join(err, c.W.Flush())
		}},
		{"DATAWithoutItsEnd", func(c *textproto.Conn) error {
			if err := c.PrintfLine("DATA"); err != nil {
				return err
			}
			if _, _, err := c.ReadResponse(354); err != nil {
				return err
			}
			_, err := c.W.WriteString(whole[:len(whole)/2])
			return errors.Join(err, c.W.Flush())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			// One session at a time: the next is greeted only once the cut
			// one has ended, its message filed or not.
			b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", MaxSessions: 1})
			conn, c := b.greeted(t)
			for _, cmd := range []string{"EHLO client.example.org", "MAIL FROM:<ada.lovelace@example.com>", "RCPT TO:<support@helpdesk.example.com>"} {
				if err := c.PrintfLine("%s", cmd); err != nil {
					t.Fatal(err)
				}
				if _, _, err := c.ReadResponse(250); err != nil {
					t.Fatalf("%s: %v", cmd, err)
				}
			}
			if err := tc.send(c); err != nil {
				t.Fatal(err)
			}
			_ = conn.Close()
			deadline := time.Now().Add(30 * time.Second)
			for {
				err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", []byte(whole))
				if err == nil {
					break
				}
				var se *smtp.SMTPError
				if !errors.As(err, &se) || se.Code != 421 || time.Now().After(deadline) {
					t.Fatalf("sending the whole message again: %v", err)
				}
				time.Sleep(20 * time.Millisecond) // the cut session still holds the one slot: not a busy loop beside it
			}
			var stored string
			if err := b.Pool.QueryRow(b.Ctx, `SELECT string_agg(body, '|') FROM messages WHERE direction = 'inbound'`).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stored, "Line 400 of what the customer wrote.") || strings.Contains(stored, "|") {
				t.Errorf("stored %d bytes ending %q, want the one message whole", len(stored), stored[max(0, len(stored)-60):])
			}
		})
	}
}
