package inbound

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"helpdesk/desk"
	"io"
	"mime"
	netmail "net/mail"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // every charset go-message knows, ISO-8859-1 to Shift JIS
	gomail "github.com/emersion/go-message/mail"
)

// maxTextBytes bounds the text kept of one message.
const maxTextBytes = 64 << 10

// ErrUnparseable is a message that is not a mail at all.
var ErrUnparseable = errors.New("not a parseable email message")

// Parse reads a raw message into what the desk files. Unknown charsets
// and transfer encodings do not fail it: the text is kept as it came.
func Parse(raw []byte) (*desk.InboundMail, error) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, fmt.Errorf("%w: %v", ErrUnparseable, err)
	}
	h := gomail.Header{Header: e.Header}
	m := &desk.InboundMail{}
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
	m.NoAutoReply = m.Automatic || h.Has("List-Id") || h.Has("List-Post") || h.Has("List-Unsubscribe") ||
		suppressesAutoReply.MatchString(h.Get("X-Auto-Response-Suppress"))

	w := walker{m: m}
	m.Text = joinTexts(w.entity(e, 0, ""))
	if m.Report != nil {
		m.NoAutoReply = true
	}
	m.Text = clean(m.Text)
	if len(m.Text) > maxTextBytes {
		m.Text = strings.ToValidUTF8(m.Text[:maxTextBytes], "")
	}
	if strings.TrimSpace(m.Text) == "" {
		m.Text = "(no text)"
	}
	return m, nil
}

// maxPartBytes bounds what is read of one part; the SMTP listener bounds
// the whole message already.
const maxPartBytes = 64 << 20

// text is a readable part: plain text, or HTML to be turned into text.
type text struct {
	body string
	html bool
}

func joinTexts(texts []text) string {
	var parts []string
	for _, t := range texts {
		body := t.body
		if t.html {
			body = HTMLToText(body)
		}
		if strings.TrimSpace(body) != "" {
			parts = append(parts, strings.TrimRight(body, "\r\n"))
		}
	}
	return strings.Join(parts, "\n\n")
}

// walker collects a message's texts, attachments and delivery report.
type walker struct {
	m *desk.InboundMail
}

// entity returns the readable texts of e, in order. Every text part of a
// multipart/mixed (or any multipart but alternative) is kept; of a
// multipart/alternative, the plain text when there is one, else the
// HTML. A forwarded message (message/rfc822, and a digest's parts, which
// are messages unless they say otherwise, RFC 2046 §5.1.5) keeps its
// headers and text as a quoted block, and is listed as an attachment.
func (w *walker) entity(e *message.Entity, depth int, parentType string) []text {
	if depth > 10 {
		return nil // a nesting this deep is an attack or a mistake; what was read is kept
	}
	mediaType, params, _ := e.Header.ContentType()
	if parentType == "multipart/digest" && !e.Header.Has("Content-Type") {
		mediaType = "message/rfc822"
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		return w.multipart(e, depth, mediaType, params)
	}
	disposition, dparams, _ := e.Header.ContentDisposition()
	name := dparams["filename"]
	if name == "" {
		name = params["name"]
	}
	body, _ := io.ReadAll(io.LimitReader(e.Body, maxPartBytes))
	switch {
	case mediaType == "message/delivery-status" && w.m.Report != nil:
		parseDeliveryStatus(body, w.m.Report)
	case (mediaType == "message/rfc822" || mediaType == "text/rfc822-headers") && w.m.Report != nil:
		w.m.Report.OriginalMessageID = headerMessageID(body)
	case mediaType == "message/rfc822" && disposition != "attachment":
		return w.forwarded(body, depth)
	case disposition == "attachment" || (name != "" && !strings.HasPrefix(mediaType, "text/")):
		w.attach(e.Header, name, mediaType, disposition, body)
	case mediaType == "text/plain" || mediaType == "":
		return []text{{body: string(body)}}
	case mediaType == "text/html":
		return []text{{body: string(body), html: true}}
	case !strings.HasPrefix(mediaType, "text/") && len(body) > 0:
		// A part with no name that is not text: an inline image of an
		// HTML part, or a file a client sent without a name. Kept too.
		w.attach(e.Header, name, mediaType, disposition, body)
	}
	return nil
}

// maxAttachments bounds the attachments kept of one message; a message
// with more is an attack or a mistake, and the first ones are kept.
const maxAttachments = 100

// attach keeps a part as an attachment.
func (w *walker) attach(h message.Header, name, mediaType, disposition string, body []byte) {
	if len(w.m.Attachments) >= maxAttachments {
		return
	}
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	a := &desk.File{Name: fileName(decodeWord(name)), Type: oneLine(strings.ToLower(mediaType)), Content: body}
	if ids := ParseIDList(h.Get("Content-Id")); len(ids) > 0 {
		a.ContentID = ids[0]
	}
	a.Inline = disposition == "inline" || (disposition == "" && a.ContentID != "")
	if a.Name == "" {
		a.Name = fmt.Sprintf("attachment-%d%s", len(w.m.Attachments)+1, extensionOf(a.Type))
	}
	w.m.Attachments = append(w.m.Attachments, a)
}

// fileName is the last element of a name that may carry a client's folder
// (`C:\Users\ada\scan.pdf`, "../x"), on one line.
func fileName(name string) string {
	name = oneLine(name)
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "." || name == ".." {
		return ""
	}
	return strings.TrimSpace(name)
}

// extensionOf is the usual file extension of a media type, or "".
func extensionOf(mediaType string) string {
	switch mediaType {
	case "image/jpeg":
		return ".jpg"
	case "text/plain":
		return ".txt"
	case "message/rfc822":
		return ".eml"
	}
	if exts, _ := mime.ExtensionsByType(mediaType); len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}

func (w *walker) multipart(e *message.Entity, depth int, mediaType string, params map[string]string) []text {
	if mediaType == "multipart/report" && strings.EqualFold(params["report-type"], "delivery-status") {
		w.m.Report = &desk.DeliveryReport{Failed: map[string]string{}, Delayed: map[string]string{}}
	}
	// Read the body first, so that a multipart whose boundary is missing
	// or never appears still has its text.
	body, _ := io.ReadAll(io.LimitReader(e.Body, maxPartBytes))
	var children [][]text
	found := false
	if params["boundary"] != "" {
		whole, _ := message.New(e.Header, bytes.NewReader(body))
		mr := whole.MultipartReader()
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
				break // a broken multipart: keep what came before
			}
			found = true
			children = append(children, w.entity(part, depth+1, mediaType))
		}
	}
	if !found {
		return []text{{body: string(body)}}
	}
	if mediaType != "multipart/alternative" {
		var out []text
		for _, c := range children {
			out = append(out, c...)
		}
		return out
	}
	// RFC 2046 §5.1.4: the alternatives come in order of faithfulness; we
	// prefer plain text, which is what agents read and quote.
	for _, c := range children {
		for _, t := range c {
			if !t.html && strings.TrimSpace(t.body) != "" {
				return c
			}
		}
	}
	for _, c := range children {
		if len(c) > 0 {
			return c
		}
	}
	return nil
}

// forwarded reads a message inside the message: its text, under its From,
// Date and Subject, and an attachment entry that stands for it.
func (w *walker) forwarded(raw []byte, depth int) []text {
	inner, err := message.Read(bytes.NewReader(raw))
	if err != nil && inner == nil {
		return []text{{body: string(raw)}}
	}
	h := gomail.Header{Header: inner.Header}
	subject, err := h.Subject()
	if err != nil {
		subject = h.Get("Subject")
	}
	subject = oneLine(subject)
	var head strings.Builder
	head.WriteString("---------- Forwarded message ----------\n")
	for _, f := range []struct{ name, value string }{{"From", decodeWord(h.Get("From"))}, {"Date", h.Get("Date")}, {"Subject", subject}} {
		if v := oneLine(f.value); v != "" {
			head.WriteString(f.name + ": " + v + "\n")
		}
	}
	name := subject
	if name == "" {
		name = "message"
	}
	w.attach(message.Header{}, name+".eml", "message/rfc822", "attachment", raw)
	return []text{{body: head.String() + "\n" + joinTexts(w.entity(inner, depth+1, ""))}}
}

// parseDeliveryStatus reads RFC 3464 fields: a per-message block, then one
// block per recipient, blocks separated by blank lines.
func parseDeliveryStatus(body []byte, r *desk.DeliveryReport) {
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
		addr = strings.ToLower(strings.Trim(oneLine(addr), "<>"))
		status := oneLine(strings.TrimSpace(fields["status"] + " " + fields["diagnostic-code"]))
		switch {
		case addr == "":
		case strings.EqualFold(fields["action"], "failed"):
			r.Failed[addr] = status
		case strings.EqualFold(fields["action"], "delayed"):
			r.Delayed[addr] = status
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

// suppressesAutoReply is Exchange's "no automatic answers, please".
var suppressesAutoReply = regexp.MustCompile(`(?i)\b(all|autoreply)\b`)

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
	if list, err := h.AddressList("From"); err == nil && len(list) > 0 && plainAddress(list[0].Address) {
		return strings.ToLower(list[0].Address), oneLine(list[0].Name)
	}
	raw := h.Get("From")
	if a, err := netmail.ParseAddress(raw); err == nil && plainAddress(a.Address) {
		return strings.ToLower(a.Address), oneLine(a.Name)
	}
	if m := looseAddress.FindString(raw); m != "" {
		return strings.ToLower(m), ""
	}
	return "", ""
}

// plainAddress refuses an address with control characters or invalid
// UTF-8, which a quoted local part can smuggle in.
func plainAddress(a string) bool {
	return utf8.ValidString(a) && strings.IndexFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0
}

var looseAddress = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`)

var wordDecoder = mime.WordDecoder{CharsetReader: message.CharsetReader}

func decodeWord(s string) string {
	if d, err := wordDecoder.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// clean makes text safe to store: valid UTF-8 (invalid bytes become
// U+FFFD) and no NUL, which PostgreSQL's text cannot hold.
func clean(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.ReplaceAll(s, "\x00", "")
}

// oneLine makes a header value safe to store and to show: valid UTF-8, no
// control characters.
func oneLine(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' }), " ")
}
