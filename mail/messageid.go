// Package mail builds helpdesk's outbound email with go-message and sends it over SMTP with go-smtp, or keeps it in a Maildir.
package mail

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strings"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

func randomToken() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b)
	return strings.ToLower(idEncoding.EncodeToString(b))
}

// NewMessageID mints `<random@domain>` for an outbound message. It is minted
// once, stored with the message, and sent verbatim on every attempt.
func NewMessageID(domain string) string {
	return fmt.Sprintf("<%s@%s>", randomToken(), domain)
}

// NewRootMessageID mints the synthetic thread root of a ticket that did not
// come by email, so that every reply can reference one root and the whole
// ticket is one thread in the customer's mail client.
func NewRootMessageID(domain, ticketID string) string {
	return fmt.Sprintf("<%s.%s@%s>", ticketID, randomToken(), domain)
}

// bare strips the angle brackets of a stored Message-ID, as go-message wants it.
func bare(id string) string {
	return strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">")
}
