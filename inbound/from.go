package inbound

import (
	"errors"
	"fmt"
	"io"
	"mime"
	netmail "net/mail"
	"regexp"
	"strings"

	"github.com/emersion/go-message"

	"github.com/helpdesk-dev/helpdesk/mail"
)

// fromParser reads the From field as RFC 5322 §3.4 writes an address list,
// its display names' encoded words decoded (RFC 2047) in every charset
// go-message knows, and in any other kept as they came.
var fromParser = netmail.AddressParser{WordDecoder: &mime.WordDecoder{CharsetReader: anyCharset}}

// anyCharset reads text of a charset go-message knows as UTF-8, and of
// any other as it came (its bytes made valid UTF-8 later, as Parse keeps a
// text of an unknown charset). A display name in a charset nobody knows
// ("unknown-8bit", RFC 1428, which MTAs write for 8-bit headers they could
// not label) is still only a name: failing it would refuse the mail of a
// sender whose address is plain.
func anyCharset(charset string, input io.Reader) (io.Reader, error) {
	if r, err := message.CharsetReader(charset, input); err == nil {
		return r, nil
	}
	return input, nil
}

// hostname is a domain a DMARC checker can look up: labels of letters,
// digits and hyphens (punycode for others), two or more.
var hostname = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// parseFrom reads the sender: exactly one From field holding exactly one
// well-formed mailbox (RFC 5322 §3.6.2), whose domain, in its ASCII form,
// is the one a DMARC checker takes as the RFC5322.From domain (RFC 7489
// §6.6.1). Anything
// else (no From, two, a list, a display name that hides another address,
// text no parser agrees on) is no usable sender: there is no fallback to
// the first address-like text, which is how a stranger's mail was once
// filed as a customer's. A display name is only a name: one that holds an
// address of its own (it would show one person's address on another's
// mail) or a control character is dropped, and bytes that are not UTF-8
// are read as U+FFFD.
func parseFrom(fields []string) (addr, name string, err error) {
	switch len(fields) {
	case 0:
		return "", "", errors.New("no From field")
	case 1:
	default:
		return "", "", fmt.Errorf("%d From fields, want one", len(fields))
	}
	raw := strings.ToValidUTF8(fields[0], "\uFFFD")
	if strings.ContainsAny(raw, "\x00\r\n") {
		return "", "", errors.New("a From field with control characters")
	}
	list, err := fromParser.ParseList(raw)
	if err != nil {
		return "", "", fmt.Errorf("a From field that is not an address: %v", err)
	}
	if len(list) != 1 {
		return "", "", fmt.Errorf("a From field of %d addresses, want one", len(list))
	}
	a := list[0]
	if !plainAddress(a.Address) {
		return "", "", errors.New("a From address with control characters")
	}
	addr, ok := mail.ASCIIAddress(strings.ToLower(a.Address))
	local, domain, _ := strings.Cut(addr, "@")
	if !ok || local == "" || len(addr) > 254 || !hostname.MatchString(domain) {
		return "", "", fmt.Errorf("a From address %q whose domain cannot be looked up", a.Address)
	}
	if d, _ := mail.ASCIIDomain(dmarcDomain(raw)); d != domain {
		return "", "", fmt.Errorf("a From field read as %s by one parser and as %q by another", domain, d)
	}
	if name = a.Name; !plainAddress(name) || strings.Contains(name, "@") {
		name = "" // "ada@example.com" <attacker@attacker.example>
	}
	name = oneLine(name)
	return addr, name, nil
}

// dmarcDomain is the From domain as DMARC checkers take it, with no
// address parser: comments and quoted strings left out, the text inside
// the last angle brackets if there are any, and what follows its last @.
// parseFrom accepts only From fields on which it and net/mail agree.
func dmarcDomain(raw string) string {
	var b strings.Builder
	depth, quoted, escaped := 0, false, false
	for _, r := range raw {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && (quoted || depth > 0):
			escaped = true
		case quoted:
			if r == '"' {
				quoted = false
			}
		case depth > 0:
			if r == '(' {
				depth++
			} else if r == ')' {
				depth--
			}
		case r == '"':
			quoted = true
		case r == '(':
			depth++
		default:
			b.WriteRune(r)
		}
	}
	s := b.String()
	if open := strings.LastIndexByte(s, '<'); open >= 0 {
		s = s[open+1:]
		if end := strings.IndexByte(s, '>'); end >= 0 {
			s = s[:end]
		}
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(s[at+1:]))
}
