package inbound_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

// hostileMail builds mail i of the sweep from pieces a broken or hostile
// sender writes: names in charsets nobody knows, encoded words that hide a
// line break, ids by the hundred, multiparts without a boundary or nested
// without end, transfer encodings that do not decode, file names that climb
// out of a folder or hold a NUL, reports that report nothing. The same i
// always builds the same mail.
func hostileMail(i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 28))
	pick := func(options ...string) string { return options[rng.IntN(len(options))] }
	var h strings.Builder
	header := func(name, value string) { fmt.Fprintf(&h, "%s: %s\r\n", name, value) }

	header("From", pick(
		"ada.lovelace@example.com",
		"=?x-unknown?q?Ada?= <ada.lovelace@example.com>",
		"=?utf-8?b?////?= <ada.lovelace@example.com>",
		"=?utf-8?q?Ada=00Love=0D=0ABcc:_x@evil.example?= <ada.lovelace@example.com>",
		"\""+strings.Repeat("A", 3000)+"\" <ada.lovelace@example.com>",
		"undisclosed-recipients:;",
		"\"a b\"@example.com",
		"Jörg <jörg@bücher.example>",
		"<>",
		"ada.lovelace@example.com, bram.devries@example.com",
		"stranger"+fmt.Sprint(i)+"@example.org",
	))
	if rng.IntN(8) == 0 {
		header("From", "bram.devries@example.com") // a second From
	}
	header("To", pick("support@helpdesk.example.com", "", "=?utf-8?q?=FF?= <support@helpdesk.example.com>",
		strings.Repeat("x@example.com, ", 500)+"support@helpdesk.example.com"))
	header("Subject", pick("Help", "", "=?x-unknown?q?Hilfe?=", "=?utf-8?q?a=0D=0Abcc:_x?=", strings.Repeat("Re: ", 400)+"Help",
		"=?utf-8?b?"+strings.Repeat("/", 200)+"?=", "Re: [T-500001] Help", "Re: [T-99999999999999999999] Help", "\xff\xfe"))
	if rng.IntN(6) != 0 {
		// Each mail's own: a Message-ID seen before marks a mail stored
		// already, whatever else it holds.
		header("Message-ID", pick(fmt.Sprintf("<hostile.%d@example.com>", i), "<>", fmt.Sprintf("no brackets %d", i), fmt.Sprintf("<a.%d@b> <c@d>", i),
			fmt.Sprintf("<%s.%d@example.com>", strings.Repeat("m", 900), i)))
	}
	if rng.IntN(3) == 0 {
		var ids []string
		for j := range rng.IntN(600) {
			ids = append(ids, fmt.Sprintf("<ref.%d.%d@example.com>", i, j))
		}
		header("References", strings.Join(ids, "\r\n "))
		header("In-Reply-To", pick("<hostile.1@example.com>", "garbage", "<x@y>"))
	}
	if rng.IntN(5) == 0 {
		header(pick("Auto-Submitted", "Precedence", "X-Autoreply", "List-Id"), pick("auto-replied", "bulk", "yes", "<list.example.com>"))
	}
	header("Date", pick("Mon, 7 Dec 2026 01:00:00 +0000", "yesterday", "Thu, 31 Feb 1970 99:99:99 +9999", ""))
	header("MIME-Version", "1.0")

	text := pick("Please help.", "\x00\x01\x02", "caf\xe9", "line\rwith\rcarriage returns", strings.Repeat("é", 3000),
		"<script>alert(1)</script>", "=ZZ=\r\n=", "")
	var body string
	switch rng.IntN(9) {
	case 0:
		header("Content-Type", pick("text/plain; charset=x-unknown", "text/plain; charset=utf-7", "text/plain; charset=\"", "text/html"))
		header("Content-Transfer-Encoding", pick("quoted-printable", "base64", "x-uuencode", "8bit", "7bit"))
		body = text
	case 1: // multipart without a boundary, or with one that never comes
		header("Content-Type", pick("multipart/mixed", "multipart/mixed; boundary=\"\"", "multipart/alternative; boundary=b"))
		body = "--c\r\nContent-Type: text/plain\r\n\r\n" + text + "\r\n"
	case 2: // multipart nested deep
		depth := 1 + rng.IntN(120)
		header("Content-Type", "multipart/mixed; boundary=b0")
		var open, close strings.Builder
		for d := range depth {
			fmt.Fprintf(&open, "--b%d\r\nContent-Type: multipart/mixed; boundary=b%d\r\n\r\n", d, d+1)
			close.WriteString(fmt.Sprintf("--b%d--\r\n", depth-d))
		}
		body = open.String() + fmt.Sprintf("--b%d\r\nContent-Type: text/plain\r\n\r\n%s\r\n", depth, text) + close.String() + "--b0--\r\n"
	case 3: // attachments with names and types no file should have
		header("Content-Type", "multipart/mixed; boundary=b")
		name := pick("filename=\"../../etc/passwd\"", "filename*=utf-8''%00evil.exe", "filename=\""+strings.Repeat("n", 400)+".txt\"",
			"filename*0*=x-unknown''a; filename*1=b", "filename=\"\xff.txt\"", "filename=", "name=\"a\x01b\"")
		body = "--b\r\nContent-Type: text/plain\r\n\r\n" + text + "\r\n--b\r\n" +
			"Content-Type: " + pick("image/png", "application/octet-stream", "", "text/plain; charset=x-unknown", "message/rfc822") + "\r\n" +
			"Content-Disposition: " + pick("attachment; ", "inline; ", "") + name + "\r\n" +
			"Content-Transfer-Encoding: " + pick("base64", "quoted-printable", "binary") + "\r\n\r\n" +
			pick("!!!not base64!!!", "aGVsbG8=", "=ZZ", "\x00\x00") + "\r\n--b--\r\n"
	case 4: // a delivery report that reports nothing usable
		header("Content-Type", "multipart/report; report-type=delivery-status; boundary=r")
		body = "--r\r\nContent-Type: text/plain\r\n\r\nSorry.\r\n--r\r\nContent-Type: message/delivery-status\r\n\r\n" +
			pick("Reporting-MTA: dns;\r\n\r\nFinal-Recipient: rfc822;\r\nAction: failed\r\nStatus: 9.9.9\r\n",
				"Final-Recipient: utf-8; \\x{D800}@example.com\r\nAction: delayed\r\nStatus: 4.4.7\r\n",
				"garbage\r\n", "") + "\r\n--r\r\nContent-Type: message/rfc822\r\n\r\n" + pick("Message-ID: <x@y>\r\n\r\n", "not a message") + "\r\n--r--\r\n"
	case 5: // a top-level part that is no text
		header("Content-Type", pick("application/octet-stream", "image/png", "message/rfc822", "message/partial; id=x; number=1"))
		body = text
	default:
		header("Content-Type", "text/plain; charset=utf-8")
		body = text
	}
	return []byte(h.String() + "\r\n" + body + "\r\n")
}

// TestHostileMailIsTakenOrRefusedForGood sends two hundred such mails
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
		raw := hostileMail(i)
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
		err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", hostileMail(i))
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
		conn, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		// A listener that stops answering fails the test, not CI's timeout.
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		c := textproto.NewConn(conn)
		send := func(cmd string) (int, string, error) {
			if err := c.PrintfLine("%s", cmd); err != nil {
				return 0, "", err
			}
			return c.ReadResponse(0)
		}
		if _, _, err := c.ReadResponse(220); err != nil {
			t.Fatal(err)
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
