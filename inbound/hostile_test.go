package inbound_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/inbound/inboundtest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

// TestHostileMailIsTakenOrRefusedForGood sends two hundred hostile mails
// through the listener, each twice: every one is taken (250) or refused
// for good (5xx with an enhanced code), never answered "try again later",
// which would have its sender retry a content that fails each time; and
// taking one twice stores it once.
func TestHostileMailIsTakenOrRefusedForGood(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
	const n = 200
	taken, refused := 0, map[string]int{}
	answers := make([]string, n)
	for i := range n {
		raw := inboundtest.Hostile(i)
		err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", raw)
		var se *smtp.SMTPError
		switch {
		case err == nil:
			taken++
			answers[i] = "250"
		case errors.As(err, &se) && se.Code >= 500 && se.EnhancedCode[0] == 5:
			answers[i] = fmt.Sprintf("%d %v", se.Code, se.EnhancedCode)
			refused[answers[i]+" "+se.Message]++
		default:
			t.Errorf("mail %d: %v, want 250 or a refusal for good:\n%.2000q", i, err, raw)
		}
	}
	t.Logf("%d taken; refused: %v", taken, refused)
	stored := b.count(t, `SELECT count(*) FROM messages`)
	for i := range n {
		err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", inboundtest.Hostile(i))
		answer := "250"
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			answer = fmt.Sprintf("%d %v", se.Code, se.EnhancedCode)
		} else if err != nil {
			answer = err.Error()
		}
		if answer != answers[i] {
			t.Errorf("mail %d: %s the first time, %s the second", i, answers[i], answer)
		}
	}
	if again := b.count(t, `SELECT count(*) FROM messages`); again != stored {
		t.Errorf("%d messages after the first sending, %d after the second", stored, again)
	}
}

// TestEveryHostileCommandGetsAnAnswer speaks SMTP to the listener as a
// broken or hostile client does, at each point of a transaction: each
// command gets a reply of a known class, and the session answers NOOP
// after it, so a sender is never left without a word.
func TestEveryHostileCommandGetsAnAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com"})
	long := strings.Repeat("a", 300)
	for _, tc := range []struct {
		before []string // what leads to the point the command is sent at
		cmd    string
		want   string // the reply's first digit(s); "" for any of 2, 4 or 5 but 421
	}{
		{nil, "MAIL FROM:<@a.example,@b.example:ada.lovelace@example.com>", ""}, // a source route (RFC 5321 §4.1.2)
		{nil, "MAIL FROM:<ada@[127.0.0.1]>", ""},
		{nil, `MAIL FROM:<"a b"@example.com>`, ""},
		{nil, "MAIL FROM:<" + long + "@example.com>", ""},
		{nil, "MAIL FROM:<ada.lovelace@example.com> SIZE=abc", "5"},
		{nil, "MAIL FROM:<ada.lovelace@example.com> BODY=WEIRD", "5"},
		{nil, "MAIL FROM:<ada.lovelace@example.com> RET=FULL ENVID=x", ""},
		{nil, "MAIL FROM:ada.lovelace@example.com", ""},
		{nil, "MAIL FROM:<ada.lovelace@example.com", "5"},
		{nil, "MAIL TO:<ada.lovelace@example.com>", "5"},
		{nil, "RCPT TO:<support@helpdesk.example.com>", "5"},
		{nil, "DATA", "5"},
		{nil, "BDAT 0 LAST", "5"},
		{nil, "AUTH PLAIN AGFkYQBwYXNz", "5"},
		{nil, "STARTTLS", "5"},
		{nil, "VRFY ada", ""},
		{nil, "EXPN staff", ""},
		{nil, "HELP", ""},
		{nil, "NOOP and words", "2"},
		{nil, "EHLO " + strings.Repeat("h", 900), ""},
		{nil, "HELO", "5"},
		{nil, "XCLIENT ADDR=192.0.2.1", "5"},
		{nil, "\x01\x02\x7f", "5"},
		{nil, "MAIL FROM:<ada.lovelace@example.com>\x00x", "5"},
		{nil, "ÜBER", "5"},
		{nil, "", "5"},
		{[]string{"MAIL FROM:<ada.lovelace@example.com>"}, "RCPT TO:<support@helpdesk.example.com> NOTIFY=SUCCESS ORCPT=rfc822;x@y", "5"},
		{[]string{"MAIL FROM:<ada.lovelace@example.com>"}, "RCPT TO:<@relay.example:support@helpdesk.example.com>", ""},
		// RFC 5321 §4.5.1: postmaster, with or without a domain, MUST be taken.
		{[]string{"MAIL FROM:<ada.lovelace@example.com>"}, "RCPT TO:<Postmaster>", "2"},
		{[]string{"MAIL FROM:<ada.lovelace@example.com>"}, "RCPT TO:<postmaster@helpdesk.example.com>", "2"},
		{[]string{"MAIL FROM:<ada.lovelace@example.com>"}, "RCPT TO:<>", "5"},
		{[]string{"MAIL FROM:<ada.lovelace@example.com>"}, "RCPT TO:<" + long + "@helpdesk.example.com>", ""},
		{[]string{"MAIL FROM:<ada.lovelace@example.com>"}, "MAIL FROM:<bram.devries@example.com>", "5"},
		{[]string{"MAIL FROM:<ada.lovelace@example.com>"}, "DATA", "5"},
	} {
		_, c := b.greeted(t)
		send := func(cmd string) (int, string, error) {
			if err := c.PrintfLine("%s", cmd); err != nil {
				return 0, "", err
			}
			return c.ReadResponse(0)
		}
		for _, cmd := range append([]string{"EHLO client.example.org"}, tc.before...) {
			if code, msg, err := send(cmd); err != nil || code >= 400 {
				t.Fatalf("%q: %d %s (%v)", cmd, code, msg, err)
			}
		}
		code, msg, err := send(tc.cmd)
		switch first := fmt.Sprint(code); {
		case err != nil && code == 0:
			t.Errorf("%.60q: no reply (%v)", tc.cmd, err)
		case code < 200 || code > 599 || code == 421:
			t.Errorf("%.60q: %d %s, want a reply that keeps the session", tc.cmd, code, msg)
		case !strings.HasPrefix(first, tc.want):
			t.Errorf("%.60q: %d %s, want %sxx", tc.cmd, code, msg, tc.want)
		default:
			if code, msg, err := send("NOOP"); err != nil || code != 250 {
				t.Errorf("NOOP after %.60q: %d %s (%v)", tc.cmd, code, msg, err)
			}
		}
		_ = c.Close()
	}
	// Mail to the postmaster reaches the desk as any other.
	raw := "From: Bram de Vries <bram.devries@example.com>\r\nTo: postmaster\r\nSubject: Your server\r\n" +
		"Message-ID: <postmaster.1@example.com>\r\n\r\nIt bounces.\r\n"
	if err := smtptest.Send(b.addr, "bram.devries@example.com", "Postmaster", []byte(raw)); err != nil {
		t.Fatalf("mail to <Postmaster>: %v, want 250", err)
	}
	if n := b.count(t, `SELECT count(*) FROM tickets`); n != 1 {
		t.Errorf("%d tickets after mail to the postmaster, want 1", n)
	}
}
