package desk

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTextBytes bounds what an agent or a customer writes through the API
// or the console: a reply, a note, a new ticket. Mail is bounded by the
// listener's message size instead.
const MaxTextBytes = 64 << 10

// ErrInvalidText is text the desk does not keep: empty, too long, or
// bytes that PostgreSQL's text refuses (a NUL, what is not UTF-8).
var ErrInvalidText = errors.New("invalid text")

// CheckText says whether s can be a message's text as written through the
// API or the console: 1 byte to MaxTextBytes of UTF-8 without NUL.
func CheckText(s string) error {
	if len(s) > MaxTextBytes {
		return fmt.Errorf("%w: it has %d bytes, at most %d", ErrInvalidText, len(s), MaxTextBytes)
	}
	return messageText(s)
}

// messageText says whether s can be a message's text whatever its way in.
// The use cases check it again after their edges, so that an edge that
// forgets cannot make PostgreSQL refuse a write.
func messageText(s string) error {
	if s == "" {
		return fmt.Errorf("%w: it is empty", ErrInvalidText)
	}
	return storable(s)
}

// storable says whether PostgreSQL's text can hold s as it is.
func storable(s string) error {
	switch {
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: it is not UTF-8", ErrInvalidText)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("%w: it holds a NUL character", ErrInvalidText)
	}
	return nil
}

// CheckName refuses a person's name the desk cannot use: it ends up in
// mail headers, so 1 to 200 characters of UTF-8 without control
// characters.
func CheckName(s string) error {
	switch n := utf8.RuneCountInString(s); {
	case !utf8.ValidString(s):
		return errors.New("name must be UTF-8")
	case strings.TrimSpace(s) == "" || n > 200:
		return errors.New("name must be 1 to 200 characters")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errors.New("name must not contain control characters")
	}
	return nil
}
