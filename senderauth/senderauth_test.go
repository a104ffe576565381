package senderauth_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/senderauth"
	"github.com/helpdesk-dev/helpdesk/senderauth/senderauthtest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

const message = "From: Ada <ada@example.com>\r\nTo: support@helpdesk.example.com\r\nSubject: Hello\r\n" +
	"Message-ID: <1@example.com>\r\nDate: Tue, 01 Dec 2026 10:00:00 +0000\r\n\r\nHello.\r\n"

// signed signs message for domain with a new key, and returns the
// signed bytes and the zone that publishes the key.
func signed(t *testing.T, domain string) ([]byte, zone) {
	t.Helper()
	s := senderauthtest.NewSigner(t, domain)
	z := zone{}
	s.Publish(z)
	return s.Sign(t, []byte(message)), z
}

type zone = senderauthtest.Zone

func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := func(b []byte) func() io.Reader { return func() io.Reader { return bytes.NewReader(b) } }

	t.Run("OnlyTheTrustedMTAsResultsCountTopmostFirst", func(t *testing.T) {
		t.Parallel()
		c := &senderauth.Config{AuthservID: "mx.helpdesk.example.com"}
		// Each inner list is a run of fields adjacent in the header.
		for _, tc := range []struct {
			name string
			runs [][]string
			want vocab.Verdict
		}{
			{"Pass", [][]string{{"mx.helpdesk.example.com; dkim=pass header.d=example.com; dmarc=pass header.from=example.com"}}, vocab.VerdictPass},
			{"Fail", [][]string{{"mx.helpdesk.example.com; spf=fail; dmarc=fail header.from=example.com"}}, vocab.VerdictFail},
			{"AnotherIDIsIgnored", [][]string{{"evil.example; dmarc=pass"}}, vocab.VerdictNone},
			{"OursWinsOverAForgedOneBelow", [][]string{{"mx.helpdesk.example.com; dmarc=fail", "mx.helpdesk.example.com; dmarc=pass"}}, vocab.VerdictFail},
			{"NoDMARCResultIsNone", [][]string{{"mx.helpdesk.example.com; spf=pass smtp.mailfrom=example.com"}}, vocab.VerdictNone},
			// Postfix with OpenDKIM and OpenDMARC: three adjacent fields of
			// one id, the dmarc result in whichever the milters' order put last.
			{"ResultsSplitOverAdjacentFieldsAreOurMTAs", [][]string{{
				"mx.helpdesk.example.com; dkim=pass header.d=example.com header.s=s1",
				"mx.helpdesk.example.com; spf=fail smtp.mailfrom=example.com",
				"mx.helpdesk.example.com; dmarc=fail (p=reject dis=reject) header.from=example.com",
			}}, vocab.VerdictFail},
			// A field of our id below some other field came with the mail.
			{"AFieldOfOursApartFromTheMTAsIsNotRead", [][]string{
				{"mx.helpdesk.example.com; spf=pass smtp.mailfrom=example.com"},
				{"mx.helpdesk.example.com; dmarc=pass header.from=example.com"},
			}, vocab.VerdictNone},
			{"AnotherHostsFieldEndsOurMTAsRun", [][]string{{
				"mx.helpdesk.example.com; spf=pass smtp.mailfrom=example.com",
				"evil.example; dkim=pass",
				"mx.helpdesk.example.com; dmarc=pass header.from=example.com",
			}}, vocab.VerdictNone},
			// OpenDKIM and OpenDMARC with AuthservIDWithJobID write the
			// id, a slash and the MTA's queue id.
			{"OursWithAJobIDIsOurs", [][]string{{
				"mx.helpdesk.example.com/4B2C1F3A9; dkim=pass header.d=example.com",
				"mx.helpdesk.example.com/4B2C1F3A9; dmarc=fail (p=reject dis=reject) header.from=example.com",
			}}, vocab.VerdictFail},
			{"AnIDThatOnlyBeginsLikeOursIsAnother", [][]string{{"mx.helpdesk.example.com.evil.example/1; dmarc=pass"},
				{"mx.helpdesk.example.comx; dmarc=pass"}}, vocab.VerdictNone},
		} {
			if v := c.Check(ctx, &senderauth.Mail{FromDomain: "example.com", Results: tc.runs}); v.Result != tc.want {
				t.Errorf("%s: %+v, want %s", tc.name, v, tc.want)
			}
		}
	})

	// Exchange Online writes no authserv-id (seen in every Microsoft 365
	// mailbox; parsers such as MimeKit had to learn it).
	t.Run("Microsoft365sResultsAreReadWithoutAnID", func(t *testing.T) {
		t.Parallel()
		c := &senderauth.Config{AuthservID: senderauth.Microsoft365}
		const (
			pass = "spf=pass (sender IP is 209.85.128.48) smtp.mailfrom=example.com; dkim=pass (signature was verified) " +
				"header.d=example.com;dmarc=pass action=none header.from=example.com;compauth=pass reason=100"
			fail = "spf=fail (sender IP is 192.0.2.7) smtp.mailfrom=attacker.example; dkim=none (message not signed) " +
				"header.d=none;dmarc=fail action=oreject header.from=example.com;compauth=fail reason=000"
			noPolicy = "spf=pass (sender IP is 192.0.2.8) smtp.mailfrom=example.com; helpdesk.example.com; dkim=none " +
				"(message not signed) header.d=none;helpdesk.example.com; dmarc=bestguesspass action=none header.from=example.com;"
		)
		for _, tc := range []struct {
			name string
			runs [][]string
			want vocab.Verdict
		}{
			{"Pass", [][]string{{pass}}, vocab.VerdictPass},
			{"Fail", [][]string{{fail}}, vocab.VerdictFail},
			{"AForgedPassBelowItsFailIsNotRead", [][]string{{fail}, {pass}}, vocab.VerdictFail},
			{"NoPolicyIsNone", [][]string{{noPolicy}}, vocab.VerdictNone},
			{"AnotherHostsFieldOnTopIsNotMicrosofts", [][]string{{"evil.example; dmarc=pass header.from=example.com"}, {fail}}, vocab.VerdictNone},
			{"NoFieldIsNone", nil, vocab.VerdictNone},
		} {
			if v := c.Check(ctx, &senderauth.Mail{FromDomain: "example.com", Results: tc.runs}); v.Result != tc.want {
				t.Errorf("%s: %+v, want %s", tc.name, v, tc.want)
			}
		}
	})

	t.Run("AnAlignedDKIMSignaturePasses", func(t *testing.T) {
		t.Parallel()
		b, z := signed(t, "example.com")
		z["_dmarc.example.com"] = []string{"v=DMARC1; p=reject"}
		c := &senderauth.Config{Verify: true, Resolver: z}
		if v := c.Check(ctx, &senderauth.Mail{FromDomain: "example.com", Raw: raw(b)}); v.Result != vocab.VerdictPass {
			t.Errorf("%+v, want pass", v)
		}
	})

	t.Run("ASignatureOfAnotherDomainFailsItsPolicy", func(t *testing.T) {
		t.Parallel()
		b, z := signed(t, "attacker.example")
		z["_dmarc.example.com"] = []string{"v=DMARC1; p=reject"}
		c := &senderauth.Config{Verify: true, Resolver: z}
		if v := c.Check(ctx, &senderauth.Mail{FromDomain: "example.com", Raw: raw(b)}); v.Result != vocab.VerdictFail {
			t.Errorf("%+v, want fail", v)
		}
	})

	t.Run("AnAlignedSPFPassPasses", func(t *testing.T) {
		t.Parallel()
		c := &senderauth.Config{Verify: true, Resolver: zone{"example.com": {"v=spf1 ip4:192.0.2.7 -all"}, "_dmarc.example.com": {"v=DMARC1; p=quarantine"}}}
		m := &senderauth.Mail{FromDomain: "example.com", Raw: raw([]byte(message)), ClientIP: net.ParseIP("192.0.2.7"), Helo: "mx.example.com", MailFrom: "bounce@example.com"}
		if v := c.Check(ctx, m); v.Result != vocab.VerdictPass {
			t.Errorf("%+v, want pass", v)
		}
		m.ClientIP = net.ParseIP("198.51.100.9")
		if v := c.Check(ctx, m); v.Result != vocab.VerdictFail {
			t.Errorf("from another address: %+v, want fail", v)
		}
	})

	// RFC 6531: jörg@bücher.de, the From's domain already in the ASCII form
	// inbound keeps it in.
	t.Run("AnInternationalizedEnvelopeSenderIsLookedUpInASCII", func(t *testing.T) {
		t.Parallel()
		c := &senderauth.Config{Verify: true, Resolver: zone{"xn--bcher-kva.de": {"v=spf1 ip4:192.0.2.7 -all"},
			"_dmarc.xn--bcher-kva.de": {"v=DMARC1; p=reject; aspf=s"}}}
		m := &senderauth.Mail{FromDomain: "xn--bcher-kva.de", Raw: raw([]byte(message)), ClientIP: net.ParseIP("192.0.2.7"),
			Helo: "mx.bücher.de", MailFrom: "jörg@bücher.de"}
		if v := c.Check(ctx, m); v.Result != vocab.VerdictPass || !strings.Contains(v.Detail, "spf=pass smtp.mailfrom=xn--bcher-kva.de") {
			t.Errorf("%+v, want an aligned SPF pass", v)
		}
	})

	t.Run("WithoutAPolicyThereIsNoVerdict", func(t *testing.T) {
		t.Parallel()
		c := &senderauth.Config{Verify: true, Resolver: zone{}}
		if v := c.Check(ctx, &senderauth.Mail{FromDomain: "sub.example.com", Raw: raw([]byte(message))}); v.Result != vocab.VerdictNone {
			t.Errorf("%+v, want none", v)
		}
	})

	t.Run("ASubdomainFallsUnderItsOrganizationsPolicy", func(t *testing.T) {
		t.Parallel()
		c := &senderauth.Config{Verify: true, Resolver: zone{"_dmarc.example.com": {"v=DMARC1; p=reject"}}}
		if v := c.Check(ctx, &senderauth.Mail{FromDomain: "mail.example.com", Raw: raw([]byte(message))}); v.Result != vocab.VerdictFail {
			t.Errorf("%+v, want fail", v)
		}
	})
}

// Authentication-Results come from strangers' mail as much as from our
// MTA: no field, however malformed, may panic a check.
func FuzzTrustedResults(f *testing.F) {
	for _, seed := range []string{
		"mx.helpdesk.example.com; dmarc=pass header.from=example.com",
		"spf=pass (sender IP is 192.0.2.1) smtp.mailfrom=example.com;dmarc=fail action=oreject header.from=example.com",
		";;;", "=", "dmarc=", "mx.helpdesk.example.com;", "",
	} {
		f.Add(seed, seed)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, top, below string) {
		runs := [][]string{{top, below}, {below}}
		for _, id := range []string{"mx.helpdesk.example.com", senderauth.Microsoft365} {
			c := &senderauth.Config{AuthservID: id}
			v := c.Check(ctx, &senderauth.Mail{FromDomain: "example.com", Results: runs})
			switch v.Result {
			case vocab.VerdictPass, vocab.VerdictFail, vocab.VerdictNone:
			default:
				t.Fatalf("verdict %q", v.Result)
			}
		}
	})
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"mx.example.com": true, "mx.google.com": true, senderauth.Microsoft365: true, "mail-01_a.example.org": true,
		"": false, "mx.example.com; dmarc=pass": false, "mx example com": false, ".example.com": false,
		"mx.example.com/4B2C1F3A9": false, strings.Repeat("a", 254): false,
	} {
		if got := senderauth.ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}
