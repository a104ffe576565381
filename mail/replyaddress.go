package mail

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"regexp"
	"strings"
)

// ReplyAddresses signs and checks the addresses agents answer to:
// support+T-500001.alice.<mac>@domain, the MAC an HMAC-SHA256 over ticket
// and agent, truncated to 10 base32 characters. Only someone who holds the
// secret can make one, so an address names a ticket and an agent that the
// service itself put together.
type ReplyAddresses struct {
	Local, Domain string   // support and helpdesk.example.com of support@helpdesk.example.com
	Secret        []byte   // signs new addresses
	Previous      [][]byte // still accepted, so that the secret can be rotated
}

// macLength is how much of the HMAC an address carries: 50 bits.
const macLength = 10

var lowerBase32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func mac(secret []byte, ticketID, agent string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ticketID + "." + agent))
	return strings.ToLower(lowerBase32.EncodeToString(h.Sum(nil)))[:macLength]
}

// Sign returns the address an agent answers a ticket's notification to.
func (r *ReplyAddresses) Sign(ticketID, agent string) string {
	return r.Local + "+" + ticketID + "." + agent + "." + mac(r.Secret, ticketID, agent) + "@" + r.Domain
}

var signedLocal = regexp.MustCompile(`^([^+@]+)\+(t-[0-9]+)\.([a-z0-9][a-z0-9._-]{0,63})\.([a-z2-7]{10})$`)

// ErrBadSignature is an address in the signed form whose MAC does not verify.
var ErrBadSignature = errors.New("the reply address's signature does not verify")

// Parse reads a signed address. ok is false when the address is not in the
// signed form at all; err is ErrBadSignature when it is but its MAC verifies
// with neither the secret nor a previous one.
func (r *ReplyAddresses) Parse(address string) (ticketID, agent string, ok bool, err error) {
	local, domain, found := strings.Cut(address, "@")
	if !found || !strings.EqualFold(domain, r.Domain) {
		return "", "", false, nil
	}
	m := signedLocal.FindStringSubmatch(strings.ToLower(local))
	if m == nil || m[1] != strings.ToLower(r.Local) {
		return "", "", false, nil
	}
	ticketID, agent, got := "T-"+strings.TrimPrefix(m[2], "t-"), m[3], m[4]
	for _, secret := range append([][]byte{r.Secret}, r.Previous...) {
		if len(secret) > 0 && hmac.Equal([]byte(mac(secret, ticketID, agent)), []byte(got)) {
			return ticketID, agent, true, nil
		}
	}
	return ticketID, agent, true, ErrBadSignature
}
