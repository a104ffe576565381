// Package senderauth judges whether an inbound mail comes from the domain its From names: by a trusted MTA's Authentication-Results, or by DKIM, SPF and DMARC checked here.
//
// It is a folder of its own because the judgement is one concern with its
// own standards (RFC 8601, 6376, 7208, 7489) and its own DNS, used by every
// way mail comes in (the SMTP listener, a mailbox fetcher); desk decides
// what a verdict allows, this package only reaches it.
package senderauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"

	"blitiri.com.ar/go/spf"
	"github.com/emersion/go-msgauth/authres"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-msgauth/dmarc"
	"golang.org/x/net/publicsuffix"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/settings"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Resolver is the DNS the checks ask; net.DefaultResolver is one, and
// tests give their own (these machines have no DNS).
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

// Config is whom the checks trust and what they do themselves.
type Config struct {
	// AuthservID is the authserv-id of the MTA in front (RFC 8601 §2.5):
	// its Authentication-Results, and only its, are believed. "" believes
	// none.
	AuthservID string
	// Verify checks DKIM, SPF and DMARC here, for mail that reaches the
	// listener straight from the sending MTA.
	Verify bool
	// Resolver answers the checks' DNS questions; nil: net.DefaultResolver.
	Resolver Resolver
}

// Settings declares the checks' settings.
func (c *Config) Settings() []settings.Setting {
	return []settings.Setting{
		settings.Text(&c.AuthservID, "HELPDESK_INBOUND_AUTHSERV_ID", "inbound-authserv-id", "",
			"the authserv-id of the MTA in front (what Postfix with OpenDMARC or Gmail write first in Authentication-Results, "+
				"or microsoft365 for Exchange Online, which writes none): "+
				"its DMARC result is each inbound message's verdict; Authentication-Results of any other id are ignored; unset: none are believed"),
		settings.Bool(&c.Verify, "HELPDESK_INBOUND_VERIFY", "inbound-verify", "0",
			"1: check DKIM, SPF and DMARC of each inbound message here (for mail that comes straight from the sending MTA, not through a relay of ours); "+
				"a trusted Authentication-Results wins"),
	}
}

// Mail is what the checks read of one message.
type Mail struct {
	FromDomain string           // the domain of its one From address
	Results    [][]string       // its Authentication-Results fields, topmost first, in runs of fields adjacent in the header
	Raw        func() io.Reader // its bytes as they came, for DKIM
	ClientIP   net.IP           // the SMTP client, for SPF; nil: unknown
	Helo       string           // what it said in EHLO
	MailFrom   string           // its envelope sender
}

// Verdict is what the checks found.
type Verdict struct {
	Result vocab.Verdict
	Detail string // how: "dmarc=pass by mx.example.com", "dkim=pass d=example.com; dmarc=pass"
}

// Check reaches a verdict on m: a trusted Authentication-Results first,
// else the checks done here when Verify is on, else none.
func (c *Config) Check(ctx context.Context, m *Mail) Verdict {
	if strings.EqualFold(c.AuthservID, Microsoft365) {
		if v, ok := microsoft365(m.Results); ok {
			return v
		}
	} else if c.AuthservID != "" {
		if v, ok := c.trusted(m.Results); ok {
			return v
		}
	}
	if c.Verify && m.FromDomain != "" {
		return c.verify(ctx, m)
	}
	return Verdict{Result: vocab.VerdictNone, Detail: "not checked"}
}

// trusted reads the topmost Authentication-Results of our MTA: the
// fields of its id at the top of the first run that has one, which it
// prepended (RFC 8601 §5: an MTA removes forged fields with its own
// authserv-id). An MTA may write its results in several adjacent fields
// (OpenDKIM's dkim, then OpenDMARC's spf and dmarc, each its own); a field
// of its id that is not adjacent to them came with the mail and is not
// read. Fields of any other id are ignored.
func (c *Config) trusted(runs [][]string) (Verdict, bool) {
	for _, run := range runs {
		found, unreadable := false, false
		for _, f := range run {
			id, results, err := authres.Parse(f)
			if !c.ours(id) {
				if found {
					break // another host's: what lies below is not our MTA's
				}
				continue
			}
			found = true
			if err != nil {
				unreadable = true
				continue
			}
			for _, r := range results {
				if d, ok := r.(*authres.DMARCResult); ok {
					return dmarcVerdict(string(d.Value), c.AuthservID), true
				}
			}
		}
		switch {
		case unreadable:
			return Verdict{Result: vocab.VerdictNone, Detail: "unreadable Authentication-Results of " + c.AuthservID}, true
		case found:
			return Verdict{Result: vocab.VerdictNone, Detail: "no dmarc result by " + c.AuthservID}, true
		}
	}
	return Verdict{}, false
}

// validID is an authserv-id as MTAs write it (RFC 8601 §2.5): a host
// name, a token without the separators that would make it another
// field's text.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// ValidID reports whether id can name an MTA to believe: an authserv-id
// as MTAs write it, or Microsoft365.
func ValidID(id string) bool { return validID.MatchString(id) }

// ours reports whether an authserv-id is the trusted MTA's: its own, or
// its own, a slash and a queue id, as OpenDKIM and OpenDMARC write it with
// AuthservIDWithJobID.
func (c *Config) ours(id string) bool {
	base, _, _ := strings.Cut(id, "/")
	return strings.EqualFold(base, c.AuthservID)
}

// dmarcVerdict is the verdict of a trusted MTA's dmarc result: pass and
// fail are ours, anything else (none, temperror, bestguesspass) is none.
func dmarcVerdict(value, by string) Verdict {
	v := Verdict{Result: vocab.VerdictNone, Detail: "dmarc=" + value + " by " + by}
	switch strings.ToLower(value) {
	case "pass":
		v.Result = vocab.VerdictPass
	case "fail":
		v.Result = vocab.VerdictFail
	}
	return v
}

// Microsoft365 is the AuthservID that believes Exchange Online, which
// writes its Authentication-Results with no authserv-id at all
// ("spf=pass (sender IP is …) smtp.mailfrom=…; dkim=…; dmarc=pass
// action=none header.from=…; compauth=pass reason=100"), against RFC 8601
// §2.2: for a team whose mail is fetched from a Microsoft 365 mailbox.
const Microsoft365 = "microsoft365"

// microsoft365 reads Exchange Online's results: the topmost
// Authentication-Results field, when it names no authserv-id (Exchange
// Online's own is written on top of whatever came with the mail). Its
// dmarc is the verdict; "bestguesspass" is what it says of a domain with
// no DMARC policy, which is none here as in verify.
func microsoft365(runs [][]string) (Verdict, bool) {
	if len(runs) == 0 || len(runs[0]) == 0 {
		return Verdict{}, false
	}
	segments := strings.Split(runs[0][0], ";")
	if first, _, _ := strings.Cut(strings.TrimSpace(segments[0]), " "); !strings.Contains(first, "=") {
		// An authserv-id: another host's field on top, not Exchange Online's.
		return Verdict{Result: vocab.VerdictNone, Detail: "the topmost Authentication-Results is not Microsoft 365's"}, true
	}
	for _, seg := range segments {
		method, value, _ := strings.Cut(strings.TrimSpace(seg), "=")
		if !strings.EqualFold(method, "dmarc") {
			continue
		}
		value, _, _ = strings.Cut(value, " ")
		return dmarcVerdict(value, "Microsoft 365"), true
	}
	return Verdict{Result: vocab.VerdictNone, Detail: "no dmarc result by Microsoft 365"}, true
}

func (c *Config) resolver() Resolver {
	if c.Resolver != nil {
		return c.Resolver
	}
	return net.DefaultResolver
}

// verify is DMARC (RFC 7489) as done here: the From domain's policy, and
// whether DKIM or SPF passes for a domain aligned with it.
func (c *Config) verify(ctx context.Context, m *Mail) Verdict {
	res := c.resolver()
	lookupTXT := func(name string) ([]string, error) { return res.LookupTXT(ctx, name) }
	from := strings.ToLower(strings.TrimSuffix(m.FromDomain, "."))
	record, err := dmarc.LookupWithOptions(from, &dmarc.LookupOptions{LookupTXT: lookupTXT})
	org := organizational(from)
	if errors.Is(err, dmarc.ErrNoPolicy) && org != from {
		record, err = dmarc.LookupWithOptions(org, &dmarc.LookupOptions{LookupTXT: lookupTXT})
	}
	var details []string
	switch {
	case errors.Is(err, dmarc.ErrNoPolicy):
		return Verdict{Result: vocab.VerdictNone, Detail: "no DMARC policy for " + from}
	case err != nil:
		return Verdict{Result: vocab.VerdictNone, Detail: "DMARC policy unavailable: " + err.Error()}
	}
	dkimAligned, spfAligned := false, false
	if m.Raw != nil {
		verifications, err := dkim.VerifyWithOptions(m.Raw(), &dkim.VerifyOptions{LookupTXT: lookupTXT, MaxVerifications: 5})
		if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
			details = append(details, "dkim: "+err.Error())
		}
		for _, v := range verifications {
			if v.Err == nil && aligned(v.Domain, from, record.DKIMAlignment == dmarc.AlignmentStrict) {
				dkimAligned = true
				details = append(details, "dkim=pass d="+v.Domain)
			}
		}
	}
	if m.ClientIP != nil {
		sender := m.MailFrom
		if sender == "" {
			sender = "postmaster@" + m.Helo
		}
		// An internationalized envelope sender (SMTPUTF8, RFC 6531) is
		// looked up by its domain's ASCII form, as the From's is.
		if a, ok := mail.ASCIIAddress(sender); ok {
			sender = a
		}
		_, spfDomain, _ := strings.Cut(sender, "@")
		r, _ := spf.CheckHostWithSender(m.ClientIP, m.Helo, sender, spf.WithContext(ctx), spf.WithResolver(res))
		details = append(details, fmt.Sprintf("spf=%s smtp.mailfrom=%s", r, spfDomain))
		spfAligned = r == spf.Pass && aligned(spfDomain, from, record.SPFAlignment == dmarc.AlignmentStrict)
	}
	if dkimAligned || spfAligned {
		return Verdict{Result: vocab.VerdictPass, Detail: strings.Join(append(details, "dmarc=pass"), "; ")}
	}
	return Verdict{Result: vocab.VerdictFail, Detail: strings.Join(append(details, "dmarc=fail p="+string(record.Policy)), "; ")}
}

// organizational is a domain's organizational domain (RFC 7489 §3.2): the
// public suffix and one label more.
func organizational(domain string) string {
	org, err := publicsuffix.EffectiveTLDPlusOne(domain)
	if err != nil {
		return domain
	}
	return org
}

// aligned reports whether an authenticated domain is aligned with the
// From domain: the same (strict), or of the same organizational domain
// (relaxed, the default).
func aligned(authenticated, from string, strict bool) bool {
	a := strings.ToLower(strings.TrimSuffix(authenticated, "."))
	if strict {
		return a == from
	}
	return a != "" && organizational(a) == organizational(from)
}
