package inbound_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/textproto"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/internal/testcert"
)

// sendOver sends a mail over a new session, with STARTTLS when tlsConfig
// is set, and says how it went.
func sendOver(t *testing.T, addr string, tlsConfig *tls.Config, id string) error {
	t.Helper()
	dial := func() (*smtp.Client, error) { return smtp.Dial(addr) }
	if tlsConfig != nil {
		dial = func() (*smtp.Client, error) { return smtp.DialStartTLS(addr, tlsConfig) }
	}
	c, err := dial()
	if err != nil {
		t.Fatalf("connect (STARTTLS %v): %v", tlsConfig != nil, err)
	}
	defer c.Close()
	raw := "From: Ada Lovelace <ada.lovelace@example.com>\r\nTo: support@helpdesk.example.com\r\nSubject: Hello\r\nMessage-ID: " + id + "\r\n\r\nHi.\r\n"
	return c.SendMail("ada.lovelace@example.com", []string{"support@helpdesk.example.com"}, bytes.NewReader([]byte(raw)))
}

func TestInboundTLS(t *testing.T) {
	t.Parallel()
	cert := testcert.New(t)
	client := &tls.Config{RootCAs: cert.Pool, ServerName: "127.0.0.1"}

	t.Run("STARTTLSIsOfferedWithACertificate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", TLS: cert.Server})
		c, err := smtp.Dial(b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Hello("mx.example.net"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := c.Extension("STARTTLS"); !ok {
			t.Fatal("no STARTTLS in the EHLO answer")
		}
		c.Close()
		if err := sendOver(t, b.addr, client, "<tls.1@example.com>"); err != nil {
			t.Fatalf("a mail over TLS: %v", err)
		}
		if err := sendOver(t, b.addr, nil, "<plain.1@example.com>"); err != nil {
			t.Errorf("without REQUIRE_TLS a plain mail is taken: %v", err)
		}
	})

	// A command sent in the clear behind STARTTLS (CVE-2011-0411's
	// injection) is never run as if it came over TLS: what was read before
	// the handshake is dropped with the plain session.
	t.Run("ACommandSentInTheClearBehindSTARTTLSIsNeverRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", TLS: cert.Server})
		conn, plain := b.greeted(t)
		if err := plain.PrintfLine("EHLO mx.example.net"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := plain.ReadResponse(250); err != nil {
			t.Fatal(err)
		}
		// One write: the injected MAIL rides in the same packet.
		if _, err := io.WriteString(conn, "STARTTLS\r\nMAIL FROM:<evil@attacker.example>\r\n"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := plain.ReadResponse(220); err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(conn, client)
		if err := tc.Handshake(); err != nil {
			return // the injected bytes broke the handshake: nothing of theirs ran either
		}
		secure := textproto.NewConn(tc)
		for _, step := range []struct {
			cmd  string
			want int
		}{
			{"EHLO mx.example.net", 250},
			// Had the injected MAIL been run after the handshake, this
			// would be a recipient of the attacker's transaction.
			{"RCPT TO:<support@helpdesk.example.com>", 502},
		} {
			if err := secure.PrintfLine("%s", step.cmd); err != nil {
				t.Fatal(err)
			}
			if code, msg, err := secure.ReadResponse(0); err != nil || code != step.want {
				t.Fatalf("%s over TLS: %d %s (%v), want %d", step.cmd, code, msg, err, step.want)
			}
		}
	})

	t.Run("RequireTLSRefusesMailSentWithoutIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", TLS: cert.Server, RequireTLS: true})
		err := sendOver(t, b.addr, nil, "<plain.2@example.com>")
		if smtpCode(err) != 530 || !strings.Contains(err.Error(), "STARTTLS") {
			t.Errorf("a plain mail: %v, want 530 5.7.0", err)
		}
		if err := sendOver(t, b.addr, client, "<tls.2@example.com>"); err != nil {
			t.Errorf("a mail over TLS: %v", err)
		}
		if n := b.count(t, `SELECT count(*) FROM messages WHERE email_message_id IN ('<plain.2@example.com>', '<tls.2@example.com>')`); n != 1 {
			t.Errorf("%d stored, want the TLS one only", n)
		}
	})
}
