package inbound_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/inbound"
)

func fixture(t testing.TB, name string, vars ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "mail", name))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer(vars...).Replace(string(b)))
}

func TestParseRealMail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		check func(t *testing.T, m *desk.InboundMail)
	}{
		{"gmail_new_ticket.eml", func(t *testing.T, m *desk.InboundMail) {
			if m.Subject != "Charged twice — invoice 1042" || m.From != "ada.lovelace@example.com" || m.FromName != "Ada Lovelace" {
				t.Errorf("subject %q from %q %q", m.Subject, m.FromName, m.From)
			}
			if m.MessageID != "<CAJx8k=Qd1mVb0bC7u+XQ2r9aH5tWzNq@mail.gmail.com>" || !m.HasOwnID {
				t.Errorf("Message-ID %q", m.MessageID)
			}
			if !strings.Contains(m.Text, "2 × 49,00 €") || strings.Contains(m.Text, "<div") {
				t.Errorf("text %q: want the plain part, decoded", m.Text)
			}
		}},
		{"outlook_reply.eml", func(t *testing.T, m *desk.InboundMail) {
			if !strings.Contains(m.Text, "Met vriendelijke groeten") && !strings.Contains(m.Text, "grüeten") {
				t.Errorf("ISO-8859-1 text not decoded: %q", m.Text)
			}
			if !strings.HasPrefix(m.MessageID, "<AM6PR08MB4214") || m.Subject != "RE: Re: Late parcel [#T-500001]" {
				t.Errorf("folded Message-ID %q, subject %q", m.MessageID, m.Subject)
			}
		}},
		{"applemail_html_only.eml", func(t *testing.T, m *desk.InboundMail) {
			want := "The app crashes when I open Settings . See this page (https://status.example.com/incident/42)"
			if !strings.Contains(m.Text, "Hello support team,") || !strings.Contains(m.Text, want) || strings.Contains(m.Text, "color") {
				t.Errorf("HTML turned into %q", m.Text)
			}
		}},
		{"outlook_inline_image.eml", func(t *testing.T, m *desk.InboundMail) {
			if len(m.Attachments) != 2 {
				t.Fatalf("attachments %+v, want the inline image and the file", m.Attachments)
			}
			img, file := m.Attachments[0], m.Attachments[1]
			if !img.Inline || img.ContentID != "<image001.png@01DB4A1B.2C3D4E50>" || img.Type != "image/png" ||
				img.Name != "attachment-1.png" || img.Content.Len() != 70 || !bytes.HasPrefix(img.Content.Bytes(), []byte("\x89PNG")) {
				t.Errorf("inline image %+v", img)
			}
			if file.Inline || file.Name != "Gerätedaten.txt" || string(file.Content.Bytes()) != "Seriennummer: 4711\n" {
				t.Errorf("file %+v", file)
			}
			if !strings.Contains(m.Text, "Display ist kaputt") {
				t.Errorf("text %q", m.Text)
			}
		}},
		{"thunderbird_latin1_attachment.eml", func(t *testing.T, m *desk.InboundMail) {
			if m.Subject != "Problème de livraison" || m.FromName != "Gaëlle Dubois" || !strings.Contains(m.Text, "arrivé") {
				t.Errorf("subject %q, name %q, text %q", m.Subject, m.FromName, m.Text)
			}
			if len(m.Attachments) != 1 || m.Attachments[0].Name != "facture-1042.pdf" || m.Attachments[0].Type != "application/pdf" || m.Attachments[0].Content.Len() < 500 {
				t.Errorf("attachments %+v", m.Attachments)
			}
		}},
		{"no_message_id.eml", func(t *testing.T, m *desk.InboundMail) {
			if m.HasOwnID || !strings.HasSuffix(m.MessageID, "@no-message-id.invalid>") {
				t.Errorf("Message-ID %q", m.MessageID)
			}
			again, _ := inbound.Parse(fixture(t, "no_message_id.eml"))
			if again.MessageID != m.MessageID {
				t.Errorf("the derived id is not stable")
			}
		}},
		{"autoreply.eml", func(t *testing.T, m *desk.InboundMail) {
			if !m.Automatic {
				t.Error("an out-of-office reply is not marked automatic")
			}
		}},
		{"delivery_report.eml", func(t *testing.T, m *desk.InboundMail) {
			r := m.Report
			if r == nil || r.OriginalMessageID != "<orig@helpdesk.example.com>" || !strings.HasPrefix(r.Failed["bram@example.com"], "5.1.1") {
				t.Errorf("report %+v", r)
			}
		}},
		{"lenient_ids.eml", func(t *testing.T, m *desk.InboundMail) {
			if m.MessageID != "<farah-1234@example.com>" || strings.Join(m.InReplyTo, " ") != "<a@x> <unbracketed@y>" ||
				strings.Join(m.References, " ") != "<a@x> <b@x> <noatsign> <c@x>" {
				t.Errorf("ids %q %v %v", m.MessageID, m.InReplyTo, m.References)
			}
		}},
		{"multipart_no_boundary.eml", func(t *testing.T, m *desk.InboundMail) {
			if !strings.Contains(m.Text, "My order 7781 never arrived.") || !strings.Contains(m.Text, "Please help.") {
				t.Errorf("a multipart without a boundary lost its text: %q", m.Text)
			}
		}},
		{"mixed_text_parts.eml", func(t *testing.T, m *desk.InboundMail) {
			first, second, third := strings.Index(m.Text, "First, the login page:"), strings.Index(m.Text, "Then the error"), strings.Index(m.Text, "Sent from my tablet")
			if first < 0 || second < first || third < second {
				t.Errorf("text parts not all kept in order: %q", m.Text)
			}
			if len(m.Attachments) != 1 || m.Attachments[0].Name != "login.png" {
				t.Errorf("attachments %+v", m.Attachments)
			}
		}},
		{"digest.eml", func(t *testing.T, m *desk.InboundMail) {
			zipper, size := strings.Index(m.Text, "The zipper broke on day one."), strings.Index(m.Text, "I ordered M and got XL.")
			if zipper < 0 || size < zipper || !strings.Contains(m.Text, "From: Jonas Berg <jonas@example.com>") || !strings.Contains(m.Text, "Subject: Wrong size") {
				t.Errorf("the digest's messages are not kept as messages: %q", m.Text)
			}
			if len(m.Attachments) != 2 || m.Attachments[0].Type != "message/rfc822" || m.Attachments[1].Name != "Wrong size.eml" {
				t.Errorf("attachments %+v, want the two inner messages", m.Attachments)
			}
		}},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".eml"), func(t *testing.T) {
			t.Parallel()
			m, err := inbound.Parse(fixture(t, tc.file, "{{IN_REPLY_TO}}", "<x@y>", "{{RECIPIENT}}", "bram@example.com",
				"{{ORIGINAL_MESSAGE_ID}}", "<orig@helpdesk.example.com>"))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m)
		})
	}
}

func TestParseIDList(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"<a@b>":                    "<a@b>",
		"<a@b> <c@d>":              "<a@b> <c@d>",
		"<a@b>,<c@d>, <e@f>":       "<a@b> <c@d> <e@f>",
		"a@b":                      "<a@b>",
		"<a@b> (comment (nested))": "<a@b>",
		"<a @b>":                   "<a@b>",
		"<unterminated@x":          "<unterminated@x>",
		"":                         "",
		"<a@b><a@b>":               "<a@b>",
	} {
		if got := strings.Join(inbound.ParseIDList(in), " "); got != want {
			t.Errorf("ParseIDList(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	root := filepath.Join("..", "testdata", "mail")
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			f.Add(fixture(f, rel))
		}
		return nil
	})
	cases := desk.New(nil, nil, desk.Config{Domains: []string{"helpdesk.example.com"}})
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := inbound.Parse(raw)
		if err != nil {
			return
		}
		for _, c := range cases.Candidates(m, []string{"support+t-500001@helpdesk.example.com", string(raw[:min(len(raw), 64)])}) {
			if !strings.HasPrefix(c.TicketID, "T-") || strings.ContainsAny(c.TicketID, " \r\n") {
				t.Errorf("candidate %+v", c)
			}
		}
		if m.MessageID == "" || !strings.HasPrefix(m.MessageID, "<") || strings.ContainsAny(m.Subject, "\r\n") {
			t.Errorf("parsed into %+v", m)
		}
		for _, id := range append(m.InReplyTo, m.References...) {
			if strings.ContainsAny(id, " \r\n") {
				t.Errorf("id %q", id)
			}
		}
		// Everything stored is text PostgreSQL takes: valid UTF-8, no NUL.
		for _, s := range append(append([]string{m.MessageID, m.From, m.FromName, m.Subject, m.Text}, m.InReplyTo...), m.References...) {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Errorf("stored text %q is not clean", s)
			}
		}
	})
}

func TestStoredTextHasLFLineEnds(t *testing.T) {
	t.Parallel()
	m, err := inbound.Parse([]byte("From: Ada <ada@example.com>\r\nSubject: Hi\r\n\r\nFirst line.\r\nSecond line.\r\n\r\nThird.\rFourth.\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Text != "First line.\nSecond line.\n\nThird.\nFourth." {
		t.Errorf("text %q, want LF line ends", m.Text)
	}
}

func TestAFlowedTextIsReadAsItsWriterMeantIt(t *testing.T) {
	t.Parallel()
	// Thunderbird's plain text: wrapped at 72 columns, each soft break a
	// space before the line end (RFC 3676).
	m, err := inbound.Parse([]byte("From: Ada <ada@example.com>\r\nSubject: Hi\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=UTF-8; format=flowed\r\n\r\n" +
		"My card was charged twice for invoice 1042, once on Monday and once \r\non Tuesday. Please refund one of them.\r\n\r\n" +
		"> An earlier line that was \r\n> wrapped too.\r\n\r\n-- \r\nAda\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "My card was charged twice for invoice 1042, once on Monday and once on Tuesday. Please refund one of them.\n\n" +
		"> An earlier line that was wrapped too.\n\n-- \nAda"
	if m.Text != want {
		t.Errorf("text %q, want %q", m.Text, want)
	}
}
