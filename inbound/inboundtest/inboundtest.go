// Package inboundtest builds hostile mail for the tests of every way mail comes in: the SMTP listener and the mailbox fetcher.
package inboundtest

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Hostile builds mail i of a sweep from pieces a broken or hostile
// sender writes: names in charsets nobody knows, encoded words that hide a
// line break, ids by the hundred, multiparts without a boundary or nested
// without end, transfer encodings that do not decode, file names that climb
// out of a folder or hold a NUL, reports that report nothing. The same i
// always builds the same mail.
func Hostile(i int) []byte {
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
