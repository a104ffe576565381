package mail

import (
	"mime"
	"strconv"
	"strings"
)

// fileParams writes a file name as MIME parameters (Content-Disposition's
// filename, Content-Type's name): quoted when it is short printable
// ASCII, else RFC 2231 (UTF-8, percent-encoded, split into numbered
// sections short enough that the header folds between them under 78
// characters). go-message would write an RFC 2047 encoded word, which
// RFC 2047 §5 forbids inside a parameter.
func fileParams(param, name string) string {
	if plainToken(name) {
		return param + `="` + name + `"`
	}
	enc := percentEncode(name)
	const section = 50
	if len(enc) <= section {
		return param + "*=utf-8''" + enc
	}
	// Sections end between characters: Python's parser (and others)
	// decode each on its own and find a character split in two broken.
	var parts []string
	var cur strings.Builder
	for _, r := range name {
		e := percentEncode(string(r))
		if cur.Len()+len(e) > section {
			parts = append(parts, cur.String())
			cur.Reset()
		}
		cur.WriteString(e)
	}
	parts = append(parts, cur.String())
	for i, p := range parts {
		prefix := ""
		if i == 0 {
			prefix = "utf-8''"
		}
		parts[i] = param + "*" + strconv.Itoa(i) + "*=" + prefix + p
	}
	return strings.Join(parts, "; ")
}

// plainToken reports whether a name can stand in a quoted string as is.
func plainToken(s string) bool {
	if len(s) == 0 || len(s) > 60 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// percentEncode is RFC 2231's encoding: attribute-chars as they are, every
// other octet as %XX.
func percentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > 0x20 && c < 0x7f && !strings.ContainsRune(`*'%()<>@,;:\"/[]?=`, rune(c)) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// mediaTypeOr returns t when it is a valid media type without parameters
// of its own, lower case; else the fallback.
func mediaTypeOr(t, fallback string) string {
	mt, _, err := mime.ParseMediaType(t)
	if err != nil || !strings.Contains(mt, "/") {
		return fallback
	}
	return mt
}
