package mail_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/mailtest"
)

func TestReplyBodies(t *testing.T) {
	t.Parallel()
	quote := &mail.Quote{Date: time.Date(2026, 11, 3, 10, 15, 0, 0, time.UTC), Name: "Ada Lovelace",
		Text: "Hello,\n\nmy card was charged twice.\n\nAda"}

	t.Run("TheTextIsTheAgentsThenTheSignatureThenTheQuote", func(t *testing.T) {
		t.Parallel()
		text, _ := mail.ReplyBodies("Hi Ada,\n\nrefunded.", "Dana Scully\nExample Support", quote)
		want := "Hi Ada,\n\nrefunded.\n\n-- \nDana Scully\nExample Support\n\n" +
			"On Tue, 3 Nov 2026 at 10:15 UTC, Ada Lovelace wrote:\n> Hello,\n>\n> my card was charged twice.\n>\n> Ada\n"
		if text != want {
			t.Errorf("text\n%q\nwant\n%q", text, want)
		}
		if got := mail.NewText(text); got != "Hi Ada,\n\nrefunded." {
			t.Errorf("a client reads the new text as %q", got)
		}
	})

	t.Run("TheHTMLIsEscapedWithParagraphsLinksAndABlockquote", func(t *testing.T) {
		t.Parallel()
		_, html := mail.ReplyBodies("Use <b>this</b> & see https://example.com/help?a=1&b=2.\nThanks\n\nSecond paragraph", "Dana", quote)
		for _, want := range []string{
			"<p>Use &lt;b&gt;this&lt;/b&gt; &amp; see <a href=\"https://example.com/help?a=1&amp;b=2\">https://example.com/help?a=1&amp;b=2</a>.<br>\nThanks</p>",
			"<p>Second paragraph</p>",
			"<div class=\"signature\">-- <br>\nDana</div>",
			"<p>On Tue, 3 Nov 2026 at 10:15 UTC, Ada Lovelace wrote:</p>\n<blockquote type=\"cite\"",
			"<p>my card was charged twice.</p>",
		} {
			if !strings.Contains(html, want) {
				t.Errorf("HTML lacks %q:\n%s", want, html)
			}
		}
		if strings.Contains(html, "<b>") {
			t.Error("the agent's markup reached the HTML unescaped")
		}
	})

	t.Run("ALongQuoteIsCut", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("a line of the customer's very long mail\n", 500)
		text, html := mail.ReplyBodies("Short answer.", "", &mail.Quote{Date: quote.Date, Name: "Ada", Text: long})
		if n := strings.Count(text, "\n> "); n > 41 {
			t.Errorf("%d quoted lines, want at most 40 and the mark of the cut", n)
		}
		if !strings.HasSuffix(text, "> […]\n") || !strings.Contains(html, "[…]") {
			t.Errorf("the cut is not marked:\n%s", text[len(text)-100:])
		}
		oneLine := strings.Repeat("x", 10000)
		text, _ = mail.ReplyBodies("Short answer.", "", &mail.Quote{Date: quote.Date, Name: "Ada", Text: oneLine})
		if len(text) > 4200 {
			t.Errorf("a quote of one 10,000-byte line made %d bytes of text", len(text))
		}
	})

	t.Run("NoSignatureAndNoQuoteLeaveTheTextAsWritten", func(t *testing.T) {
		t.Parallel()
		if text, _ := mail.ReplyBodies("Hello back.", "", nil); text != "Hello back.\n" {
			t.Errorf("text %q", text)
		}
	})
}

func TestRenderWithAttachmentsAndHTML(t *testing.T) {
	t.Parallel()
	pdf := bytes.Repeat([]byte("%PDF-1.4 binary \x00\x01\x02\xff"), 3000)
	names := []string{
		"invoice-1042.pdf",
		"Überweisung März – Quittung.pdf",
		"請求書_" + strings.Repeat("長い名前", 30) + ".pdf", // long: RFC 2231 sections
		`quote"and\backslash.txt`,
	}
	o := outgoing()
	o.To[0].Name = "Gaëlle Dubois"
	o.Body, o.HTML = mail.ReplyBodies("Bonjour Gaëlle,\n\nvoici la facture.", "Dana Scully", &mail.Quote{
		Date: time.Date(2026, 11, 3, 10, 15, 0, 0, time.UTC), Name: "Gaëlle Dubois", Text: strings.Repeat("Ligne du message précédent.\n", 100)})
	for _, n := range names {
		o.Attachments = append(o.Attachments, &mail.File{Name: n, ContentType: "application/pdf", Content: pdf})
	}
	raw, err := o.Render()
	if err != nil {
		t.Fatal(err)
	}
	got := mailtest.RequireNoDefects(t, raw)

	t.Run("TheTextPartReadsAsTheAgentWroteIt", func(t *testing.T) {
		if text := strings.ReplaceAll(got.Text, "\r\n", "\n"); !strings.HasPrefix(text, "Bonjour Gaëlle,\n\nvoici la facture.\n\n-- \nDana Scully\n\nOn ") {
			t.Errorf("Python reads the text as %q", text[:min(len(text), 200)])
		}
		if !strings.Contains(got.HTML, "<p>Bonjour Gaëlle,</p>") {
			t.Errorf("Python reads the HTML as %q", got.HTML)
		}
	})

	t.Run("EachFileArrivesWithItsNameAndBytes", func(t *testing.T) {
		sum := sha256.Sum256(pdf)
		if len(got.Attachments) != len(names) {
			t.Fatalf("Python sees %d attachments, want %d", len(got.Attachments), len(names))
		}
		for i, a := range got.Attachments {
			if a.Filename != names[i] || a.ContentType != "application/pdf" || a.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("attachment %d: %+v, want %q with the PDF's bytes", i, a, names[i])
			}
		}
	})

	t.Run("FileNamesAreRFC2231NotEncodedWords", func(t *testing.T) {
		if bytes.Contains(raw, []byte(`filename="=?`)) {
			t.Error("a file name is an RFC 2047 encoded word inside a parameter")
		}
		if !bytes.Contains(raw, []byte("filename*0*=utf-8''%C3%9Cberweisung")) || !bytes.Contains(raw, []byte("filename*0*=utf-8''")) {
			t.Errorf("RFC 2231 file names are missing:\n%s", raw[:min(len(raw), 3000)])
		}
	})

	t.Run("NoLineIsLongerThan78", func(t *testing.T) {
		for i, line := range bytes.Split(raw, []byte("\r\n")) {
			if len(line) > 78 {
				t.Errorf("line %d has %d characters: %q", i, len(line), line)
			}
		}
	})
}
