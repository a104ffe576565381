package inbound

import (
	"fmt"
	"net/mail"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/emersion/go-message"
	gomail "github.com/emersion/go-message/mail"

	"github.com/helpdesk-dev/helpdesk/desk"
	hdmail "github.com/helpdesk-dev/helpdesk/mail"
)

// fromProbes are Froms an attacker wrote to be read as Ada's by one parser
// and as the attacker's by a DMARC checker.
var fromProbes = []string{
	"ada.lovelace@example.com <attacker@attacker.example>",
	"=?utf-8?q?ada.lovelace@example.com=0A?= <attacker@attacker.example>",
	"ada.lovelace@example.com, <attacker@attacker.example>",
	`"ada.lovelace@example.com" <attacker@attacker.example>`,
	"Ada <ada.lovelace@example.com> (attacker@attacker.example)",
	"<ada.lovelace@example.com>, attacker@attacker.example",
	"ada.lovelace@example.com (<attacker@attacker.example>)",
	`"Ada <ada.lovelace@example.com>" <attacker@attacker.example>`,
	"attacker@attacker.example@example.com",
	"Ada Lovelace <ada.lovelace@example.com>",
	"ada.lovelace@EXAMPLE.com",
	"=?iso-8859-1?q?Ren=E9?= <rene@example.fr>",
	"Ada <ada@bücher.de>",
	"ada.lovelace@exаmple.com",
}

func TestParseFromTakesOnlyOneWellFormedMailbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fields []string
		want   string // "" for no usable From
	}{
		{[]string{"Ada Lovelace <ada.lovelace@example.com>"}, "ada.lovelace@example.com"},
		{[]string{"ada.lovelace@EXAMPLE.com"}, "ada.lovelace@example.com"},
		{[]string{`"ada.lovelace@example.com" <attacker@attacker.example>`}, "attacker@attacker.example"},
		{[]string{"=?utf-8?q?Ada=00Lovelace?= <ada.lovelace@example.com>"}, "ada.lovelace@example.com"},
		{[]string{"Ada \xff <ada.lovelace@example.com>"}, "ada.lovelace@example.com"},
		{[]string{"ada.lovelace@example.com <attacker@attacker.example>"}, ""},
		{[]string{"=?utf-8?q?ada.lovelace@example.com=0A?= <attacker@attacker.example>"}, ""},
		{[]string{"ada.lovelace@example.com, <attacker@attacker.example>"}, ""},
		{[]string{"Ada <ada.lovelace@example.com>", "attacker@attacker.example"}, ""},
		{nil, ""},
		{[]string{"undisclosed-recipients:;"}, ""},
		{[]string{"ada@localhost"}, ""},
		{[]string{"ada@[127.0.0.1]"}, ""},
		// An address need not be ASCII (RFC 6530); its domain is kept in
		// the ASCII form DNS looks up.
		{[]string{"Jörg <jörg@example.de>"}, "jörg@example.de"},
		{[]string{"Ada <ada@bücher.de>"}, "ada@xn--bcher-kva.de"},
		{[]string{"ADA@BÜCHER.DE"}, "ada@xn--bcher-kva.de"},
		{[]string{"Ada <ada@xn--bcher-kva.de>"}, "ada@xn--bcher-kva.de"},
		{[]string{"Ada <ada@bücher.de> (ada@example.com)"}, "ada@xn--bcher-kva.de"},
		{[]string{"ada@b‍ücher.de"}, ""},                        // a joiner has no ASCII form
		{[]string{"ada@exаmple.com"}, "ada@xn--exmple-4nf.com"}, // a Cyrillic а is another domain, not example.com
		// A name in a charset nobody knows is still only a name (RFC 1428's
		// unknown-8bit, which MTAs write for headers they could not label).
		{[]string{"=?unknown-8bit?q?Ada_Lovel=E9ce?= <ada.lovelace@example.com>"}, "ada.lovelace@example.com"},
		{[]string{"=?x-no-such-charset?b?QWRh?= <ada.lovelace@example.com>"}, "ada.lovelace@example.com"},
		{[]string{"=?unknown-8bit?q?ada.lovelace@example.com?= <attacker@attacker.example>"}, ""}, // as in UTF-8: no parser agrees
	} {
		addr, name, err := parseFrom(tc.fields)
		if addr != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%q: %q (%v), want %q", tc.fields, addr, err, tc.want)
		}
		if strings.Contains(name, "@") || !utf8.ValidString(name) {
			t.Errorf("%q: the name %q shows an address or is not UTF-8", tc.fields, name)
		}
	}
}

// FuzzFrom checks parseFrom against go-message's and net/mail's readings
// of the same field, and against the domain a DMARC checker takes: where
// it finds a sender, every parser that reads the field at all reads the
// same one address.
func FuzzFrom(f *testing.F) {
	for _, p := range fromProbes {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		addr, name, err := parseFrom([]string{raw})
		if err != nil {
			if addr != "" || name != "" {
				t.Fatalf("%q: an error and a sender %q %q", raw, addr, name)
			}
			return
		}
		local, domain, ok := strings.Cut(addr, "@")
		if !ok || local == "" || strings.Contains(domain, "@") || !hostname.MatchString(domain) || addr != strings.ToLower(addr) {
			t.Fatalf("%q: sender %q is no plain lower-case address", raw, addr)
		}
		if !plainAddress(name) || strings.Contains(name, "@") || strings.ContainsAny(name, "\r\n") {
			t.Fatalf("%q: display name %q", raw, name)
		}
		if d, _ := hdmail.ASCIIDomain(dmarcDomain(strings.ToValidUTF8(raw, "\uFFFD"))); d != domain {
			t.Fatalf("%q: sender %s, but a DMARC checker takes the domain %q", raw, addr, d)
		}
		if a, err := mail.ParseAddress(raw); err == nil && !sameAddress(a.Address, addr) {
			t.Fatalf("%q: net/mail reads %q, parseFrom %q", raw, a.Address, addr)
		}
		var h gomail.Header
		h.Header = message.Header{}
		h.Set("From", raw)
		if list, err := h.AddressList("From"); err == nil && (len(list) != 1 || !sameAddress(list[0].Address, addr)) {
			t.Fatalf("%q: go-message reads %v, parseFrom %q", raw, list, addr)
		}
	})
}

// sameAddress reports whether another parser's reading is parseFrom's:
// the same address, its domain in the ASCII form DNS looks up.
func sameAddress(theirs, ours string) bool {
	local, domain, ok := strings.Cut(strings.ToLower(theirs), "@")
	if !ok {
		return false
	}
	domain, ok = hdmail.ASCIIDomain(domain)
	return ok && local+"@"+domain == ours
}

func TestTheRefusalOfAnUnusableFromSaysWhatItCan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"AProblem", fmt.Errorf("file: %w", &desk.SenderError{Problem: "a From field of 2 addresses, want one"}),
			"The message has no usable sender address: a From field of 2 addresses, want one"},
		{"NoProblemSaid", fmt.Errorf("file: %w", &desk.SenderError{}), errNoSender.Message},
		{"ErrNoSenderAlone", fmt.Errorf("file: %w", desk.ErrNoSender), errNoSender.Message},
		{"ControlsAndBytesPastASCII", &desk.SenderError{Problem: "a\r\n250 OK\x00\xc3\xa9" + strings.Repeat("x", 300)},
			"The message has no usable sender address: a??250 OK???" + strings.Repeat("x", maxReplyDetail-15) + "..."},
	} {
		got := noSender(tc.err)
		if got.Code != 550 || got.EnhancedCode != errNoSender.EnhancedCode || got.Message != tc.want {
			t.Errorf("%s: %d %v %q, want 550 5.1.7 %q", tc.name, got.Code, got.EnhancedCode, got.Message, tc.want)
		}
	}
}
