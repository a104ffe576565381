// Package inbound receives email over SMTP or LMTP and parses it; desk files each message once.
//
// It is an edge of the service, as api/ is: it turns mail into calls of
// desk/, so it stands beside api/ above the use cases, not inside mail/,
// which holds what both directions of mail share (composing, the relay,
// threading, reply addresses, quote cutting).
package inbound

import (
	"strings"
	"unicode/utf8"
)

// ParseIDList reads a Message-ID list leniently, as mail in the wild writes
// it: ids in angle brackets separated by spaces, commas or nothing, bare ids
// without brackets, ids without an @, comments in parentheses. Every id
// comes back in angle brackets, without duplicates, in order. Invalid
// UTF-8 becomes U+FFFD and control characters (NUL included) go, so that
// every id can be stored and compared; an id over 250 octets is dropped.
func ParseIDList(s string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		id = strings.Trim(id, " \t\r\n,;\"'")
		if !utf8.ValidString(id) {
			id = strings.ToValidUTF8(id, "\uFFFD")
		}
		id = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, id)
		if id == "" || strings.ContainsAny(id, " <>") || len(id) > 250 {
			return
		}
		id = "<" + id + ">"
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	s = stripComments(s)
	for len(s) > 0 {
		open := strings.IndexByte(s, '<')
		if open < 0 {
			for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\r' || r == '\n' || r == ';' }) {
				add(f)
			}
			break
		}
		for _, f := range strings.FieldsFunc(s[:open], func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\r' || r == '\n' || r == ';' }) {
			add(f)
		}
		closeIdx := strings.IndexByte(s[open:], '>')
		if closeIdx < 0 {
			add(s[open+1:])
			break
		}
		add(strings.Join(strings.Fields(s[open+1:open+closeIdx]), ""))
		s = s[open+closeIdx+1:]
	}
	return out
}

// stripComments removes RFC 5322 comments, (which may (nest)).
func stripComments(s string) string {
	if !strings.Contains(s, "(") {
		return s
	}
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
