package inbound

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	netmail "net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // every charset go-message knows, ISO-8859-1 to Shift JIS
	gomail "github.com/emersion/go-message/mail"
)

// maxTextBytes bounds the text kept of one message.
const maxTextBytes = 64 << 10

// Attachment is what is kept of an attachment: not its bytes.
type Attachment struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int    `json:"size"`
}

// Message is an inbound email as helpdesk needs it.
type Message struct {
	MessageID   string   // "<…>"; for mail without one, derived from a hash of its content
	HasOwnID    bool     // false when MessageID was derived
	InReplyTo   []string // "<…>" each
	References  []string
	From        string // the sender's address, lower case
	FromName    string
	Subject     string
	Date        time.Time
	Text        string // the readable text: text/plain, else the HTML turned into text
	Attachments []Attachment
	Automatic   bool // an auto-reply or bulk mail: store it, answer nothing, triage nothing
	Report      *DeliveryReport
}

// DeliveryReport is what a delivery status notification (RFC 3464) says.
type DeliveryReport struct {
	OriginalMessageID string            // the Message-ID of the mail it reports on
	Failed            map[string]string // recipient → status and diagnostic, for Action: failed
}

// ErrUnparseable is a message that is not a mail at all.
var ErrUnparseable = errors.New("not a parseable email message")

// Parse reads a raw message. Unknown charsets and transfer encodings do
// not fail it: the text is kept as it came.
func Parse(raw []byte) (*Message, error) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, fmt.Errorf("%w: %v", ErrUnparseable, err)
	}
	h := gomail.Header{Header: e.Header}
	m := &Message{}
	if ids := ParseIDList(h.Get("Message-Id")); len(ids) > 0 {
		m.MessageID, m.HasOwnID = ids[0], true
	} else {
		sum := sha256.Sum256(raw)
		m.MessageID = "<" + hex.EncodeToString(sum[:16]) + "@no-message-id.invalid>"
	}
	m.InReplyTo = ParseIDList(h.Get("In-Reply-To"))
	m.References = ParseIDList(h.Get("References"))
	m.From, m.FromName = parseFrom(h)
	if m.Subject, err = h.Subject(); err != nil {
		m.Subject = h.Get("Subject")
	}
	m.Subject = oneLine(m.Subject)
	m.Date, _ = h.Date()
	m.Automatic = isAutomatic(h.Header)

	var html string
	if err := walk(e, 0, m, &html); err != nil {
		return nil, err
	}
	if strings.TrimSpace(m.Text) == "" && html != "" {
		m.Text = HTMLToText(html)
	}
	m.Text = strings.ToValidUTF8(strings.ReplaceAll(m.Text, "\x00", ""), "\uFFFD")
	if len(m.Text) > maxTextBytes {
		m.Text = strings.ToValidUTF8(m.Text[:maxTextBytes], "")
	}
	if strings.TrimSpace(m.Text) == "" {
		m.Text = "(no text)"
	}
	return m, nil
}

// walk visits the parts, keeping the first plain text and the first HTML,
// the attachments' metadata and a delivery report.
func walk(e *message.Entity, depth int, m *Message, html *string) error {
	if depth > 10 {
		return nil // a nesting this deep is an attack or a mistake; what was read is kept
	}
	mediaType, params, _ := e.Header.ContentType()
	if mr := e.MultipartReader(); mr != nil {
		if mediaType == "multipart/report" && strings.EqualFold(params["report-type"], "delivery-status") {
			m.Report = &DeliveryReport{Failed: map[string]string{}}
		}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
				return nil // a broken multipart: keep what came before
			}
			if err := walk(part, depth+1, m, html); err != nil {
				return err
			}
		}
	}
	disposition, dparams, _ := e.Header.ContentDisposition()
	name := dparams["filename"]
	if name == "" {
		name = params["name"]
	}
	body, _ := io.ReadAll(io.LimitReader(e.Body, 64<<20))
	switch {
	case mediaType == "message/delivery-status" && m.Report != nil:
		parseDeliveryStatus(body, m.Report)
	case (mediaType == "message/rfc822" || mediaType == "text/rfc822-headers") && m.Report != nil:
		m.Report.OriginalMessageID = headerMessageID(body)
	case disposition == "attachment" || (name != "" && !strings.HasPrefix(mediaType, "text/")):
		m.Attachments = append(m.Attachments, Attachment{Name: oneLine(decodeWord(name)), Type: mediaType, Size: len(body)})
	case mediaType == "text/plain" || mediaType == "":
		if m.Text == "" {
			m.Text = string(body)
		}
	case mediaType == "text/html":
		if *html == "" {
			*html = string(body)
		}
	}
	return nil
}

// parseDeliveryStatus reads RFC 3464 fields: a per-message block, then one
// block per recipient, blocks separated by blank lines.
func parseDeliveryStatus(body []byte, r *DeliveryReport) {
	text := strings.ReplaceAll(string(body), "\r\n", "\n")
	for _, block := range strings.Split(text, "\n\n") {
		fields := map[string]string{}
		var last string
		for _, line := range strings.Split(block, "\n") {
			if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && last != "" {
				fields[last] += " " + strings.TrimSpace(line) // a folded field
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok {
				last = strings.ToLower(strings.TrimSpace(k))
				fields[last] = strings.TrimSpace(v)
			}
		}
		addr := fields["final-recipient"]
		if addr == "" {
			addr = fields["original-recipient"]
		}
		if _, a, ok := strings.Cut(addr, ";"); ok {
			addr = a
		}
		addr = strings.ToLower(strings.Trim(strings.TrimSpace(addr), "<>"))
		if addr != "" && strings.EqualFold(fields["action"], "failed") {
			r.Failed[addr] = oneLine(strings.TrimSpace(fields["status"] + " " + fields["diagnostic-code"]))
		}
	}
}

// headerMessageID finds the Message-ID field of a returned message's
// headers, which reports often cut short of their blank line.
func headerMessageID(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		if len(line) == 0 || line == "\r" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "Message-Id") {
			if ids := ParseIDList(v); len(ids) > 0 {
				return ids[0]
			}
		}
	}
	return ""
}

var autoPrecedence = regexp.MustCompile(`(?i)^\s*(bulk|auto_reply|list|junk)\s*$`)

// isAutomatic tells mail that a machine sent (RFC 3834), which must never
// get an automatic answer or start work.
func isAutomatic(h message.Header) bool {
	if v := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); v != "" && v != "no" {
		return true
	}
	return autoPrecedence.MatchString(h.Get("Precedence")) || h.Has("X-Autoreply") || h.Has("X-Autorespond")
}

// parseFrom reads the sender leniently: a well-formed From, else anything
// in it that looks like an address.
func parseFrom(h gomail.Header) (addr, name string) {
	if list, err := h.AddressList("From"); err == nil && len(list) > 0 {
		return strings.ToLower(list[0].Address), list[0].Name
	}
	raw := h.Get("From")
	if a, err := netmail.ParseAddress(raw); err == nil {
		return strings.ToLower(a.Address), a.Name
	}
	if m := looseAddress.FindString(raw); m != "" {
		return strings.ToLower(m), ""
	}
	return "", ""
}

var looseAddress = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`)

var wordDecoder = mime.WordDecoder{CharsetReader: message.CharsetReader}

func decodeWord(s string) string {
	if d, err := wordDecoder.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// oneLine makes a header value safe to store and to show: valid UTF-8, no
// control characters.
func oneLine(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' }), " ")
}
