package inbound

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // every charset go-message knows, ISO-8859-1 to Shift JIS
	gomail "github.com/emersion/go-message/mail"
)

// maxTextBytes bounds the text kept of one message, and of one part.
const maxTextBytes = 64 << 10

// maxSmallPart bounds what is read of a part kept only for what it says:
// a delivery status, a returned message's headers.
const maxSmallPart = 64 << 10

// DefaultMaxFileBytes bounds the content kept of one attached file when
// the caller names no bound: the desk's default.
const DefaultMaxFileBytes = desk.DefaultAttachmentMaxBytes

// ErrUnparseable is a message that is not a mail at all.
var ErrUnparseable = errors.New("not a parseable email message")

// Parse reads a raw message into what the desk files. Unknown charsets
// and transfer encodings do not fail it: the text is kept as it came.
func Parse(raw []byte) (*desk.InboundMail, error) {
	sum := sha256.Sum256(raw)
	return ParseReader(bytes.NewReader(raw), int64(len(raw)), sum[:], DefaultMaxFileBytes)
}

// ParseReader reads a message of size bytes as a stream: every part is
// read once, as it comes, and nothing of a multipart is copied (its parts
// are read from its body as they pass); of a text part at most
// maxTextBytes are kept, of a file at most maxFile, of all files together
// at most the message's own size, and a message forwarded inside a
// forwarded one is kept only as part of the outer one (a file over a
// bound keeps its name, type and size). So what a message costs is
// bounded by its size, not by how its parts nest. sum is the SHA-256 of
// the whole message, which names one without a Message-ID.
func ParseReader(r io.Reader, size int64, sum []byte, maxFile int64) (*desk.InboundMail, error) {
	e, err := message.Read(r)
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, fmt.Errorf("%w: %v", ErrUnparseable, err)
	}
	h := gomail.Header{Header: e.Header}
	m := &desk.InboundMail{}
	if ids := ParseIDList(h.Get("Message-Id")); len(ids) > 0 {
		m.MessageID, m.HasOwnID = ids[0], true
	} else {
		m.MessageID = "<" + hex.EncodeToString(sum[:16]) + "@no-message-id.invalid>"
	}
	m.InReplyTo = ParseIDList(h.Get("In-Reply-To"))
	m.References = ParseIDList(h.Get("References"))
	if m.From, m.FromName, err = parseFrom(h.Values("From")); err != nil {
		m.From, m.FromName, m.FromProblem = "", "", err.Error()
	}
	m.AuthResults = authResultsRuns(e.Header.Fields())
	for _, field := range []string{"Delivered-To", "X-Original-To", "To", "Cc"} {
		list, _ := h.AddressList(field)
		for _, a := range list {
			if plainAddress(a.Address) {
				m.Recipients = append(m.Recipients, strings.ToLower(a.Address))
			}
		}
	}
	if m.Subject, err = h.Subject(); err != nil {
		m.Subject = h.Get("Subject")
	}
	m.Subject = oneLine(m.Subject)
	m.Date, _ = h.Date()
	m.Automatic = isAutomatic(h.Header)
	m.NoAutoReply = m.Automatic || h.Has("List-Id") || h.Has("List-Post") || h.Has("List-Unsubscribe") ||
		suppressesAutoReply.MatchString(h.Get("X-Auto-Response-Suppress")) || nullReturnPath(h.Get("Return-Path"))

	w := walker{m: m, maxFile: maxFile, budget: size}
	m.Text = joinTexts(w.entity(e, 0, ""))
	_, _ = io.Copy(io.Discard, r) // what no part read, such as an epilogue
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
	m           *desk.InboundMail
	maxFile     int64
	kept        int64 // the text kept so far, of every part
	budget      int64 // the bytes of files that may still be kept
	inForwarded int   // how many forwarded messages enclose the part read
}

// fileLimit is the most of the next file that may be kept, and what says so.
func (w *walker) fileLimit() (int64, string) {
	if w.budget < w.maxFile {
		return max(w.budget, 0), "the files before it took what one message may keep"
	}
	return w.maxFile, fmt.Sprintf("over the limit of %d bytes (HELPDESK_ATTACHMENT_MAX_BYTES)", w.maxFile)
}

// readUpTo reads r to its end and keeps at most max bytes of it; total is
// how many there were.
func readUpTo(r io.Reader, max int64) (kept []byte, total int64) {
	var b bytes.Buffer
	n, _ := b.ReadFrom(io.LimitReader(r, max))
	rest, _ := io.Copy(io.Discard, r)
	if kept = b.Bytes(); kept == nil {
		kept = []byte{}
	}
	return kept, n + rest
}

// readText reads a text part: at most what the message may still keep.
func (w *walker) readText(r io.Reader) string {
	left := max(maxTextBytes-w.kept, 0)
	b, _ := readUpTo(r, left)
	w.kept += int64(len(b))
	return string(b)
}

// entity returns the readable texts of e, in order. Every text part of a
// multipart/mixed (or any multipart but alternative) is kept; of a
// multipart/alternative, the plain text when there is one, else the
// HTML. A forwarded message (message/rfc822, and a digest's parts, which
// are messages unless they say otherwise, RFC 2046 §5.1.5) keeps its
// headers and text as a quoted block, and is listed as an attachment.
func (w *walker) entity(e *message.Entity, depth int, parentType string) []text {
	if depth > 10 {
		_, _ = io.Copy(io.Discard, e.Body)
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
	switch {
	case (mediaType == "message/delivery-status" || mediaType == "message/global-delivery-status") && w.m.Report != nil:
		body, _ := readUpTo(e.Body, maxSmallPart)
		parseDeliveryStatus(body, w.m.Report)
	case (mediaType == "message/rfc822" || mediaType == "text/rfc822-headers" ||
		mediaType == "message/global" || mediaType == "message/global-headers") && w.m.Report != nil:
		body, _ := readUpTo(e.Body, maxSmallPart)
		w.m.Report.OriginalMessageID = headerMessageID(body)
	case mediaType == "message/rfc822" && disposition != "attachment":
		return w.forwarded(e.Body, depth)
	case disposition == "attachment" || (name != "" && !strings.HasPrefix(mediaType, "text/")):
		w.attach(e.Header, name, mediaType, disposition, e.Body)
	case mediaType == "text/plain" || mediaType == "":
		body := w.readText(e.Body)
		if strings.EqualFold(params["format"], "flowed") {
			body = mail.Unflow(body, strings.EqualFold(params["delsp"], "yes"))
		}
		return []text{{body: body}}
	case mediaType == "text/html":
		return []text{{body: w.readText(e.Body), html: true}}
	case !strings.HasPrefix(mediaType, "text/"):
		// A part with no name that is not text: an inline image of an
		// HTML part, or a file a client sent without a name. Kept too.
		w.attach(e.Header, name, mediaType, disposition, e.Body)
	default:
		_, _ = io.Copy(io.Discard, e.Body) // another kind of text: not shown
	}
	return nil
}

// maxAttachments bounds the attachments kept of one message; a message
// with more is an attack or a mistake, and the first ones are kept.
const maxAttachments = 100

// attach keeps a part as an attachment: its content up to the file
// bound, and its whole size.
func (w *walker) attach(h message.Header, name, mediaType, disposition string, r io.Reader) {
	if len(w.m.Attachments) >= maxAttachments {
		_, _ = io.Copy(io.Discard, r)
		return
	}
	limit, why := w.fileLimit()
	body, size := blob.ReadUpTo(r, limit+1)
	w.keep(h, name, mediaType, disposition, body, size, limit, why)
}

// keep adds an attachment of content already read, which it keeps within
// limit; past it, why says why not.
func (w *walker) keep(h message.Header, name, mediaType, disposition string, body *blob.Buffer, size, limit int64, why string) {
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	a := &desk.File{Name: fileName(decodeWord(name)), Type: oneLine(strings.ToLower(mediaType)), Content: body, Size: size}
	if body.Len() > limit || body == nil {
		body.Release()
		a.Content, a.Note = nil, fmt.Sprintf("content not kept: %d bytes, %s", size, why)
	} else {
		w.budget -= body.Len()
	}
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
	name = desk.FileName(oneLine(name))
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
	// RFC 6533: a report on mail sent with SMTPUTF8 is a global one, its
	// status in message/global-delivery-status, the message returned as
	// message/global or its headers as message/global-headers.
	if rt := params["report-type"]; mediaType == "multipart/report" &&
		(strings.EqualFold(rt, "delivery-status") || strings.EqualFold(rt, "global-delivery-status")) {
		w.m.Report = &desk.DeliveryReport{Failed: map[string]string{}, Delayed: map[string]string{}}
	}
	// The first bytes are kept as they pass, so that a multipart whose
	// boundary is missing or never appears still has its text.
	head := &prefix{max: maxTextBytes}
	var children [][]text
	found := false
	if params["boundary"] != "" {
		whole, _ := message.New(e.Header, io.TeeReader(e.Body, head))
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
	_, _ = io.Copy(io.Discard, io.TeeReader(e.Body, head))
	if !found {
		return []text{{body: w.readText(bytes.NewReader(head.b))}}
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

// prefix keeps the first max bytes written to it and drops the rest.
type prefix struct {
	b   []byte
	max int
}

func (p *prefix) Write(b []byte) (int, error) {
	if room := p.max - len(p.b); room > 0 {
		p.b = append(p.b, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// capped keeps the first max bytes written to it, in chunks, counts them
// all, and lets go of what it kept once it is over max.
type capped struct {
	buf  *blob.Buffer
	max  int64
	size int64
}

func (c *capped) Write(b []byte) (int, error) {
	c.size += int64(len(b))
	switch {
	case c.buf == nil:
	case c.size > c.max:
		c.buf.Release()
		c.buf = nil
	default:
		_, _ = c.buf.Write(b)
	}
	return len(b), nil
}

// forwarded reads a message inside the message, as it passes: its text,
// under its From, Date and Subject, and an attachment entry that stands
// for it, with its bytes up to the file bound unless a forwarded message
// around it keeps them already.
func (w *walker) forwarded(r io.Reader, depth int) []text {
	limit, why := w.fileLimit()
	if w.inForwarded > 0 {
		limit, why = -1, "inside a forwarded message, which is kept whole"
	}
	raw := &capped{buf: &blob.Buffer{}, max: limit}
	tee := io.TeeReader(r, raw)
	w.inForwarded++
	defer func() { w.inForwarded-- }()
	inner, err := message.Read(tee)
	if err != nil && inner == nil {
		head := &prefix{max: maxTextBytes}
		_, _ = io.Copy(head, tee)
		w.keepForwarded(raw, "message", limit, why)
		return []text{{body: w.readText(bytes.NewReader(head.b))}}
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
	body := joinTexts(w.entity(inner, depth+1, ""))
	_, _ = io.Copy(io.Discard, tee)
	name := subject
	if name == "" {
		name = "message"
	}
	w.keepForwarded(raw, name, limit, why)
	return []text{{body: head.String() + "\n" + body}}
}

// keepForwarded lists a forwarded message as an attachment.
func (w *walker) keepForwarded(raw *capped, name string, limit int64, why string) {
	if len(w.m.Attachments) >= maxAttachments {
		raw.buf.Release()
		return
	}
	w.keep(message.Header{}, name+".eml", "message/rfc822", "attachment", raw.buf, raw.size, limit, why)
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
		if typ, a, ok := strings.Cut(addr, ";"); ok {
			addr = a
			if strings.EqualFold(strings.TrimSpace(typ), "utf-8") {
				addr = utf8Address(addr)
			}
		}
		addr = reportedAddress(strings.Trim(oneLine(addr), "<>"))
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

// utf8Address reads an address of RFC 6533's utf-8 type: UTF-8, where
// \x{HEX} stands for a character that may not be written as it is (its
// xtext and unitext forms).
func utf8Address(s string) string {
	return xtextChar.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.ParseUint(m[3:len(m)-1], 16, 32)
		if err != nil || !utf8.ValidRune(rune(n)) || n < 0x20 {
			return m
		}
		return string(rune(n))
	})
}

var xtextChar = regexp.MustCompile(`\\x\{[0-9A-Fa-f]{1,6}\}`)

// reportedAddress is a recipient as a report names it, as our recipients
// are kept: lower case, its domain in ASCII (mail.ParseAddress).
func reportedAddress(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if a, ok := mail.ASCIIAddress(s); ok {
		return a
	}
	return s
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

// nullReturnPath reports a Return-Path of <>, which the mailbox's last MTA
// writes for a message sent from the null sender (RFC 5321 §4.4; RFC 5322
// §3.6.7 allows space between the brackets): a fetched mail's envelope,
// where no SMTP session of ours saw it. A stranger who writes one into
// their mail only keeps their own acknowledgement from coming.
func nullReturnPath(v string) bool {
	return strings.Join(strings.Fields(v), "") == "<>"
}

// isAutomatic tells mail that a machine sent (RFC 3834), which must never
// get an automatic answer or start work.
func isAutomatic(h message.Header) bool {
	if v := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); v != "" && v != "no" {
		return true
	}
	return autoPrecedence.MatchString(h.Get("Precedence")) || h.Has("X-Autoreply") || h.Has("X-Autorespond")
}

// plainAddress refuses an address with control characters or invalid
// UTF-8, which a quoted local part can smuggle in.
func plainAddress(a string) bool {
	return utf8.ValidString(a) && strings.IndexFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0
}

var wordDecoder = mime.WordDecoder{CharsetReader: message.CharsetReader}

func decodeWord(s string) string {
	if d, err := wordDecoder.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// clean makes text fit to store: valid UTF-8 (invalid bytes become
// U+FFFD), no NUL (PostgreSQL's text cannot hold it), and line ends as
// every other message has them, LF (mail carries CRLF, RFC 5322 §2.3; the
// raw mail is kept as it came).
func clean(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
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

// authResultsRuns gathers the Authentication-Results fields, topmost
// first, in runs of fields adjacent to each other: what one MTA wrote in
// several fields at once stays together, apart from fields that came with
// the mail below some other field.
func authResultsRuns(fields message.HeaderFields) [][]string {
	var (
		runs     [][]string
		adjacent bool
	)
	for fields.Next() {
		if !strings.EqualFold(fields.Key(), "Authentication-Results") {
			adjacent = false
			continue
		}
		if !adjacent {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], fields.Value())
		adjacent = true
	}
	return runs
}
