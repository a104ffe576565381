package mail

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ReplyAddresses signs and checks the addresses that only the service can
// make: where an agent answers a notification, and where a delivery report
// on one of our messages comes back (VERP). Each carries an HMAC-SHA256
// truncated to 80 bits (16 base32 characters); only someone who holds the
// secret can make one.
//
//   - The reply address of a notification,
//     support+T-500001.n1234.e20790.<mac>@domain, names the ticket, the
//     notification (its message number: the agent it went to is the
//     notification's recipient) and the day after which it expires.
//   - The envelope sender of an outbound message,
//     bounces+1234.<mac>@domain, names the message a report is about; at
//     a support address the service only reads as a mailbox (IMAP), where
//     bounces@ would go nowhere, it is support+bounces.1234.<mac>@domain.
//
// Reply addresses may be at any support address (SignAt): the MAC covers
// what they name, not where; the caller checks that the recipient is one
// of ours.
type ReplyAddresses struct {
	Local, Domain string   // support and helpdesk.example.com of support@helpdesk.example.com
	Secret        []byte   // signs new addresses
	Previous      [][]byte // still accepted, so that the secret can be rotated
}

// macLength is how much of the HMAC an address carries: 16 base32
// characters, 80 bits.
const macLength = 16

var lowerBase32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func mac(secret []byte, parts ...string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(strings.Join(parts, "|")))
	return strings.ToLower(lowerBase32.EncodeToString(h.Sum(nil)))[:macLength]
}

// verify reports whether got is the MAC of parts under the secret or a
// previous one.
func (r *ReplyAddresses) verify(got string, parts ...string) bool {
	for _, secret := range append([][]byte{r.Secret}, r.Previous...) {
		if len(secret) > 0 && hmac.Equal([]byte(mac(secret, parts...)), []byte(got)) {
			return true
		}
	}
	return false
}

// Errors of a signed address that is not to be taken.
var (
	ErrBadSignature = errors.New("the address's signature does not verify")
	ErrExpired      = errors.New("the reply address has expired")
)

// Reply is what a notification's reply address names.
type Reply struct {
	TicketID     string
	Notification int64     // the notification's message number
	Expires      time.Time // the end of the day it names, UTC
}

// day is the number of days since 1970-01-01 UTC.
func day(t time.Time) int64 { return t.UTC().Unix() / 86400 }

// Sign returns the address an agent answers notification (a message of
// ticketID) to, good until expires (to the end of that day, UTC).
func (r *ReplyAddresses) Sign(ticketID string, notification int64, expires time.Time) string {
	return r.SignAt(r.Local+"@"+r.Domain, ticketID, notification, expires)
}

// SignAt is Sign at another support address (local@domain).
func (r *ReplyAddresses) SignAt(address, ticketID string, notification int64, expires time.Time) string {
	local, domain, _ := strings.Cut(address, "@")
	n, e := strconv.FormatInt(notification, 10), strconv.FormatInt(day(expires), 10)
	return local + "+" + ticketID + ".n" + n + ".e" + e + "." + mac(r.Secret, "reply", ticketID, n, e) + "@" + domain
}

var (
	signedReply  = regexp.MustCompile(`^([^+@]+)\+(t-[0-9]{1,18})\.n([0-9]{1,18})\.e([0-9]{1,9})\.([a-z2-7]{16})$`)
	signedBounce = regexp.MustCompile(`^(?:bounces\+|[^+@]+\+bounces\.)([0-9]{1,18})\.([a-z2-7]{16})$`)
)

// Parse reads a reply address. ok is false when the address is not in the
// signed form at all; err is ErrBadSignature when it is but its MAC
// verifies with neither the secret nor a previous one, ErrExpired when
// its day is past now.
func (r *ReplyAddresses) Parse(address string, now time.Time) (reply Reply, ok bool, err error) {
	local, _, found := strings.Cut(address, "@")
	if !found {
		return Reply{}, false, nil
	}
	m := signedReply.FindStringSubmatch(strings.ToLower(local))
	if m == nil {
		return Reply{}, false, nil
	}
	ticketID := "T-" + strings.TrimPrefix(m[2], "t-")
	notification, _ := strconv.ParseInt(m[3], 10, 64)
	expiryDay, _ := strconv.ParseInt(m[4], 10, 64)
	reply = Reply{TicketID: ticketID, Notification: notification, Expires: time.Unix((expiryDay+1)*86400, 0).UTC()}
	if !r.verify(m[5], "reply", ticketID, m[3], m[4]) {
		return reply, true, ErrBadSignature
	}
	if !now.Before(reply.Expires) {
		return reply, true, fmt.Errorf("%w on %s", ErrExpired, reply.Expires.Format(time.DateOnly))
	}
	return reply, true, nil
}

// BounceAddress is the envelope sender of outbound message messageID:
// where the receiving side sends a report on it.
func (r *ReplyAddresses) BounceAddress(messageID int64) string {
	n := strconv.FormatInt(messageID, 10)
	return "bounces+" + n + "." + mac(r.Secret, "bounce", n) + "@" + r.Domain
}

// BounceAddressAt is BounceAddress in the plus form of a support address
// read as a mailbox: support+bounces.1234.<mac>@domain.
func (r *ReplyAddresses) BounceAddressAt(address string, messageID int64) string {
	local, domain, _ := strings.Cut(address, "@")
	n := strconv.FormatInt(messageID, 10)
	return local + "+bounces." + n + "." + mac(r.Secret, "bounce", n) + "@" + domain
}

// ParseBounce reads a bounce address: the message it names. ok is false
// when the address is not in that form at all; err is ErrBadSignature
// when it is but does not verify.
func (r *ReplyAddresses) ParseBounce(address string) (messageID int64, ok bool, err error) {
	local, _, found := strings.Cut(address, "@")
	if !found {
		return 0, false, nil
	}
	m := signedBounce.FindStringSubmatch(strings.ToLower(local))
	if m == nil {
		return 0, false, nil
	}
	messageID, _ = strconv.ParseInt(m[1], 10, 64)
	if !r.verify(m[2], "bounce", m[1]) {
		return messageID, true, ErrBadSignature
	}
	return messageID, true, nil
}
