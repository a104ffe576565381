package inbound_test

import (
	"bytes"
	"crypto/tls"
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
