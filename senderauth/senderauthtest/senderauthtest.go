// Package senderauthtest gives tests DNS as a map and DKIM-signed mail, for machines without DNS.
package senderauthtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

// Zone is DNS as a map: name → TXT records. It is a senderauth.Resolver
// that knows no MX, address or name records.
type Zone map[string][]string

// LookupTXT answers a name's TXT records, or that it does not exist.
func (z Zone) LookupTXT(_ context.Context, name string) ([]string, error) {
	if txt, ok := z[strings.TrimSuffix(strings.ToLower(name), ".")]; ok {
		return txt, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// LookupMX answers that there are none.
func (Zone) LookupMX(_ context.Context, name string) ([]*net.MX, error) {
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// LookupIPAddr answers that there are none.
func (Zone) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// LookupAddr answers that there are none.
func (Zone) LookupAddr(_ context.Context, addr string) ([]string, error) {
	return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
}

// Signer signs mail for a domain with a key of its own (selector s1).
type Signer struct {
	Domain string
	key    ed25519.PrivateKey
	record string
}

// NewSigner makes a key for domain.
func NewSigner(tb testing.TB, domain string) *Signer {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return &Signer{Domain: domain, key: priv, record: "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)}
}

// Publish adds the key's TXT record to z.
func (s *Signer) Publish(z Zone) { z["s1._domainkey."+s.Domain] = []string{s.record} }

// Sign returns raw with a DKIM-Signature of the domain on top (RFC 6376).
func (s *Signer) Sign(tb testing.TB, raw []byte) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := dkim.Sign(&b, bytes.NewReader(raw), &dkim.SignOptions{Domain: s.Domain, Selector: "s1", Signer: s.key}); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
