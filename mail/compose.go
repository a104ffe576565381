package mail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	netmail "net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	gomail "github.com/emersion/go-message/mail"
	"golang.org/x/net/idna"
)

// Address is an RFC 5322 mailbox: a name and an address.
type Address = gomail.Address

// ErrInvalidAddress is returned for an address that is not an RFC 5322
// mailbox or would break a header.
var ErrInvalidAddress = errors.New("invalid email address")

// ParseAddress reads one mailbox ("Ada <ada@example.com>" or
// "ada@example.com"). CR, LF and other control characters are refused
// outright: they must never reach a header.
func ParseAddress(s string) (*Address, error) {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return nil, fmt.Errorf("%w %q: control characters (CR, LF, …) are not allowed", ErrInvalidAddress, s)
	}
	a, err := netmail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidAddress, s, err)
	}
	if strings.IndexFunc(a.Name, unicode.IsControl) >= 0 {
		return nil, fmt.Errorf("%w %q: control characters in the name", ErrInvalidAddress, s)
	}
	// An internationalized domain is kept in the form DNS looks up, as
	// inbound mail's From is: one customer, however the domain is written.
	var ok bool
	if a.Address, ok = ASCIIAddress(a.Address); !ok {
		return nil, fmt.Errorf("%w %q: the domain has no ASCII form (RFC 5891)", ErrInvalidAddress, s)
	}
	// RFC 5321 §4.5.3.1.1 and errata 1690: a local part of at most 64
	// octets, a path of at most 256 with its brackets, so 254 for the address.
	local, _, _ := strings.Cut(a.Address, "@")
	if len(local) > maxLocalPart {
		return nil, fmt.Errorf("%w: the local part has %d octets; at most %d", ErrInvalidAddress, len(local), maxLocalPart)
	}
	if len(a.Address) > maxAddress {
		return nil, fmt.Errorf("%w: the address has %d octets; at most %d", ErrInvalidAddress, len(a.Address), maxAddress)
	}
	return &Address{Name: a.Name, Address: a.Address}, nil
}

// ASCIIDomain is a domain as DNS looks it up: an internationalized one
// (RFC 6532) in its ASCII form (RFC 5891, with UTS #46's mapping),
// xn--bcher-kva.de for bücher.de, and an ASCII one as it is. ok is false
// for one that has no ASCII form.
func ASCIIDomain(domain string) (ascii string, ok bool) {
	if IsASCII(domain) {
		return domain, true
	}
	ascii, err := idna.Lookup.ToASCII(domain)
	return ascii, err == nil
}

// ASCIIAddress is address with its domain as ASCIIDomain writes it, the
// local part as it is: how every edge names a person (a From, a report's
// recipient, the API, the CLI). ok is false for an address without @ or
// whose domain has no ASCII form. The domain is what follows the last @:
// a quoted local part may hold one ("a@b"@example.com, RFC 5321 §4.1.2).
func ASCIIAddress(address string) (string, bool) {
	at := strings.LastIndexByte(address, '@')
	if at < 0 {
		return address, false
	}
	ascii, ok := ASCIIDomain(address[at+1:])
	return address[:at+1] + ascii, ok
}

// AddrSpec writes an address as it is kept (net/mail's form, the local
// part unquoted) as an addr-spec again, for a header to parse or SMTP's MAIL
// and RCPT to carry (RFC 5322 §3.4.1, RFC 5321 §4.1.2): a local part that
// is not a dot-string goes quoted, its " and \ escaped. "john doe"@example.com,
// kept as john doe@example.com, is "john doe"@example.com again. Not
// net/mail's Address.String: its quoting drops CR and LF, so a stored
// header injection would be sent as a mangled address; kept here, they
// make ParseAddress refuse the address.
func AddrSpec(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 || isDotString(addr[:at]) {
		return addr
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range addr[:at] {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	b.WriteString(addr[at:])
	return b.String()
}

// isDotString reports whether local is atoms joined by single dots: atext
// of RFC 5322 §3.2.3, with UTF-8 beyond ASCII as RFC 6531 §3.3 allows.
func isDotString(local string) bool {
	if local == "" || local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return false
	}
	for i := 0; i < len(local); i++ {
		c := local[i]
		if c >= utf8.RuneSelf || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// IsASCII reports whether s is 7-bit: an envelope address that is not
// needs SMTPUTF8 (RFC 6531).
func IsASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// The longest local part and address that SMTP carries (RFC 5321).
const (
	maxLocalPart = 64
	maxAddress   = 254
)

// ReplySubject is the subject of an agent's reply: "Re: <subject> [#T-500001]".
// The ticket token lets a reply to it find its ticket again; it is added
// once, and "Re:" is not stacked.
func ReplySubject(subject, ticketID string) string {
	s := oneLine(subject)
	for {
		lower := strings.ToLower(s)
		if !strings.HasPrefix(lower, "re:") {
			break
		}
		s = strings.TrimSpace(s[3:])
	}
	token := "[#" + ticketID + "]"
	if !strings.Contains(s, token) {
		s = strings.TrimSpace(s + " " + token)
	}
	return "Re: " + s
}

// oneLine turns every control character into a space, so that a subject
// that came from anywhere cannot end a header early or start a new one.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// Outgoing is everything an outbound reply's bytes depend on.
type Outgoing struct {
	From        *Address
	To          []*Address
	Cc          []*Address
	Subject     string // the ticket's subject; ReplySubject is applied
	TicketID    string
	Date        time.Time
	MessageID   string   // "<…>", as stored
	InReplyTo   string   // "<…>"
	References  []string // "<…>" each, oldest first, the message itself never among them
	ThreadRoot  string   // the ticket's root Message-ID, for Thread-Index
	ThreadStart time.Time
	Body        string

	// For mail to agents: a Subject as is (not "Re: … [#T-…]"), a Reply-To,
	// an HTML part beside the text, and the marks of a machine's mail
	// (Auto-Submitted: auto-generated, X-Auto-Response-Suppress: All) that
	// keep out-of-office answers away.
	SubjectLine string
	ReplyTo     *Address
	HTML        string
	Automatic   bool
	// AutoReply marks the service's answer to a person's mail, such as
	// the acknowledgement of a new ticket (RFC 3834: auto-replied).
	AutoReply bool

	Attachments []*File
}

// File is an attachment of an outgoing message.
type File struct {
	Name        string
	ContentType string // invalid or empty: application/octet-stream
	Content     []byte
}

// Render writes the message with go-message: headers folded under 78
// characters where possible, a text/plain UTF-8 body in quoted-printable.
// It refuses what would make a broken or forged header.
func (o *Outgoing) Render() ([]byte, error) {
	if o.From == nil || len(o.To) == 0 {
		return nil, errors.New("render: a message needs From and To")
	}
	for _, a := range append(append([]*Address{o.From}, o.To...), o.Cc...) {
		if _, err := ParseAddress(a.String()); err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
	}
	ids := append([]string{o.MessageID, o.InReplyTo}, o.References...)
	for _, id := range ids {
		if id != "" && (!strings.HasPrefix(id, "<") || !strings.HasSuffix(id, ">") || strings.ContainsAny(id, " \t\r\n")) {
			return nil, fmt.Errorf("render: malformed Message-ID %q", id)
		}
	}
	for _, ref := range o.References {
		if ref == o.MessageID {
			return nil, fmt.Errorf("render: References holds the message's own Message-ID %s", ref)
		}
	}
	if o.InReplyTo == o.MessageID {
		return nil, fmt.Errorf("render: In-Reply-To is the message's own Message-ID %s", o.InReplyTo)
	}

	var h gomail.Header
	h.SetDate(o.Date)
	h.SetAddressList("From", []*Address{o.From})
	h.SetAddressList("To", o.To)
	if len(o.Cc) > 0 {
		h.SetAddressList("Cc", o.Cc)
	}
	if o.SubjectLine != "" {
		h.SetSubject(oneLine(o.SubjectLine))
	} else {
		h.SetSubject(ReplySubject(o.Subject, o.TicketID))
	}
	if o.ReplyTo != nil {
		if _, err := ParseAddress(o.ReplyTo.String()); err != nil {
			return nil, fmt.Errorf("render: Reply-To: %w", err)
		}
		h.SetAddressList("Reply-To", []*Address{o.ReplyTo})
	}
	h.SetMessageID(bare(o.MessageID))
	if o.InReplyTo != "" {
		h.SetMsgIDList("In-Reply-To", []string{bare(o.InReplyTo)})
	}
	if len(o.References) > 0 {
		refs := make([]string, len(o.References))
		for i, r := range o.References {
			refs[i] = bare(r)
		}
		h.SetMsgIDList("References", refs)
	}
	if o.ThreadRoot != "" {
		if o.Subject != "" {
			h.SetText("Thread-Topic", oneLine(o.Subject))
		}
		h.Set("Thread-Index", ThreadIndex(o.ThreadRoot, o.ThreadStart, o.Date))
	}
	switch {
	case o.AutoReply:
		// RFC 3834 §5: the service answered a person's mail; and
		// Exchange's way of saying "no out-of-office answers, please".
		h.Set("Auto-Submitted", "auto-replied")
		h.Set("X-Auto-Response-Suppress", "All")
	case o.Automatic:
		h.Set("Auto-Submitted", "auto-generated")
		h.Set("X-Auto-Response-Suppress", "All")
	default:
		h.Set("Auto-Submitted", "no") // a person wrote it (RFC 3834)
	}

	var buf bytes.Buffer
	if err := o.writeBody(&buf, h); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return buf.Bytes(), nil
}

// writeBody writes the header and the body: text/plain alone, or
// multipart/alternative with the HTML; inside multipart/mixed when there
// are attachments, the text first.
func (o *Outgoing) writeBody(buf *bytes.Buffer, h gomail.Header) error {
	if len(o.Attachments) == 0 {
		if o.HTML == "" {
			h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
			w, err := gomail.CreateSingleInlineWriter(buf, h)
			if err != nil {
				return err
			}
			return writeAll(w, o.Body)
		}
		mw, err := gomail.CreateInlineWriter(buf, h)
		if err != nil {
			return err
		}
		return o.writeAlternatives(mw)
	}
	mw, err := gomail.CreateWriter(buf, h) // multipart/mixed
	if err != nil {
		return err
	}
	if o.HTML == "" {
		var ph gomail.InlineHeader
		ph.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
		w, err := mw.CreateSingleInline(ph)
		if err != nil {
			return err
		}
		if err := writeAll(w, o.Body); err != nil {
			return err
		}
	} else {
		iw, err := mw.CreateInline()
		if err != nil {
			return err
		}
		if err := o.writeAlternatives(iw); err != nil {
			return err
		}
	}
	for _, f := range o.Attachments {
		var ah gomail.AttachmentHeader
		ah.Set("Content-Type", mediaTypeOr(f.ContentType, "application/octet-stream")+"; "+fileParams("name", f.Name))
		ah.Set("Content-Disposition", "attachment; "+fileParams("filename", f.Name))
		w, err := mw.CreateAttachment(ah)
		if err != nil {
			return err
		}
		if _, err := w.Write(f.Content); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return mw.Close()
}

// writeAlternatives writes the text part, then the HTML (RFC 2046
// §5.1.4: the plainest first), and closes the multipart.
func (o *Outgoing) writeAlternatives(mw *gomail.InlineWriter) error {
	for _, part := range []struct{ mediaType, body string }{{"text/plain", o.Body}, {"text/html", o.HTML}} {
		var ph gomail.InlineHeader
		ph.SetContentType(part.mediaType, map[string]string{"charset": "utf-8"})
		pw, err := mw.CreatePart(ph)
		if err != nil {
			return err
		}
		if err := writeAll(pw, part.body); err != nil {
			return err
		}
	}
	return mw.Close()
}

func writeAll(w io.WriteCloser, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return err
	}
	return w.Close()
}
