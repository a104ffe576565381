package mail_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

func relayTo(t *testing.T, srv *smtptest.Server, url string) *mail.Relay {
	t.Helper()
	if url == "" {
		url = srv.URL()
	}
	r, err := mail.NewRelay(mail.RelayConfig{URL: url, HeloName: "helpdesk.example.com",
		DialTimeout: 5 * time.Second, CommandTimeout: 5 * time.Second, BodyTimeout: 5 * time.Second, ReplyTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	raw = []byte("From: support@helpdesk.example.com\r\nTo: ada@example.com\r\nSubject: Hi\r\nMessage-Id: <m1@helpdesk.example.com>\r\n\r\nHello\r\n")
	env = mail.Envelope{From: "support@helpdesk.example.com", To: []string{"ada@example.com", "bram@example.com"}}
)

func TestRelaySend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AcceptedMessageArrivesOnceWithTheQueueReply", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		res := relayTo(t, srv, "").Send(ctx, env, raw)
		if res.Err != nil || !res.BodySent || res.Uncertain || res.Reply == "" {
			t.Fatalf("result %+v", res)
		}
		got := srv.Deliveries()
		if len(got) != 1 || string(got[0].Raw) != string(raw) || len(got[0].To) != 2 {
			t.Errorf("deliveries %+v", got)
		}
	})

	t.Run("OneRecipientRefusedTheOtherServed", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		srv.Script(smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"bram@example.com": smtptest.ErrNoSuchUser}})
		res := relayTo(t, srv, "").Send(ctx, env, raw)
		if res.Err != nil || res.Rcpt["ada@example.com"] != nil || res.Rcpt["bram@example.com"] == nil || !res.Rcpt["bram@example.com"].Permanent() {
			t.Fatalf("result %+v", res)
		}
		if got := srv.Deliveries(); len(got) != 1 || len(got[0].To) != 1 || got[0].To[0] != "ada@example.com" {
			t.Errorf("deliveries %+v", got)
		}
	})

	t.Run("ALocalPartThatIsNotADotStringGoesQuoted", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		// net/mail reads "john doe"@example.com as john doe@example.com:
		// sent so, RCPT is malformed (RFC 5321 §4.1.2).
		quoted := mail.Envelope{From: env.From, To: []string{"john doe@example.com", `o"neil@example.com`, "ada.l+x@example.com"}}
		res := relayTo(t, srv, "").Send(ctx, quoted, raw)
		if res.Err != nil || !res.BodySent || len(res.Rcpt) != 3 {
			t.Fatalf("result %+v", res)
		}
		for addr, e := range res.Rcpt {
			if e != nil {
				t.Errorf("%s refused: %v", addr, e)
			}
		}
		if got := srv.Deliveries(); len(got) != 1 || !slices.Equal(got[0].To, quoted.To) {
			t.Errorf("deliveries %+v, want one to %q", got, quoted.To)
		}
	})

	// A customer may write from jörg@example.de (RFC 6530).
	eai := mail.Envelope{From: "support@helpdesk.example.com", To: []string{"jörg@example.de", "ada@example.com"}}
	eaiRaw := []byte("From: support@helpdesk.example.com\r\nTo: <jörg@example.de>\r\nCc: ada@example.com\r\nSubject: Hi\r\n\r\nHello\r\n")

	t.Run("AnAddressThatIsNotASCIIGoesWithSMTPUTF8AndOnlyThen", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.StartWith(t, smtptest.Options{SMTPUTF8: true})
		r := relayTo(t, srv, srv.URL())
		if res := r.Send(ctx, eai, eaiRaw); res.Err != nil || len(res.Rcpt) != 2 || res.Rcpt["jörg@example.de"] != nil {
			t.Fatalf("result %+v", res)
		}
		if res := r.Send(ctx, env, raw); res.Err != nil {
			t.Fatalf("result %+v", res)
		}
		got := srv.Deliveries()
		if len(got) != 2 || !got[0].UTF8 || !slices.Equal(got[0].To, eai.To) || got[1].UTF8 {
			t.Errorf("deliveries %+v, want the first with SMTPUTF8 to both, the second (ASCII) without", got)
		}
	})

	t.Run("ARelayWithoutSMTPUTF8GetsNoneOfAMessageThatNeedsIt", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		r := relayTo(t, srv, "")
		res := r.Send(ctx, eai, eaiRaw)
		if res.Err != nil || res.BodySent {
			t.Fatalf("result %+v", res)
		}
		o := mail.Classify(res, eai.To)
		for addr, enhanced := range map[string]string{"jörg@example.de": "5.6.7", "ada@example.com": "5.6.9"} {
			if got := o.Recipients[addr]; got.State != mail.StateFailed || got.Enhanced != enhanced {
				t.Errorf("%s: %+v, want failed for good with %s", addr, got, enhanced)
			}
		}
		if o.PausesRelay() || o.Delivered || !strings.Contains(o.LastError, "SMTPUTF8") {
			t.Errorf("outcome %+v", o)
		}
		if got := srv.Deliveries(); len(got) != 0 {
			t.Errorf("deliveries %+v, want none", got)
		}
		// Nothing was said on the session: the next mail goes on it.
		if res := r.Send(ctx, env, raw); res.Err != nil || !res.BodySent {
			t.Fatalf("the next mail: %+v", res)
		}
		if n := srv.Connections(); n != 1 {
			t.Errorf("%d sessions for the two mails, want the one kept", n)
		}
	})

	t.Run("LostAcknowledgementIsUncertain", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		srv.Script(smtptest.Fault{DropAfterBody: true})
		res := relayTo(t, srv, "").Send(ctx, env, raw)
		var ce *mail.ConnError
		if !res.Uncertain || !res.BodySent || !errors.As(res.Err, &ce) {
			t.Fatalf("result %+v, want uncertain", res)
		}
		if len(srv.Deliveries()) != 1 {
			t.Errorf("the server should hold the message it never acknowledged")
		}
	})

	t.Run("ReplyAfterTheBodyIsClassified", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		srv.Script(smtptest.Fault{DataErr: smtptest.ErrTryAgainLater}, smtptest.Fault{DataErr: smtptest.ErrRateLimited})
		r := relayTo(t, srv, "")
		var se *mail.SMTPError
		if res := r.Send(ctx, env, raw); !errors.As(res.Err, &se) || !se.Temporary() || se.SlowDown() || res.Uncertain {
			t.Errorf("451 4.3.0: %+v", res)
		}
		if res := r.Send(ctx, env, raw); !errors.As(res.Err, &se) || !se.SlowDown() {
			t.Errorf("451 4.7.1: %+v, want slow down", res)
		}
		if len(srv.Deliveries()) != 0 {
			t.Errorf("refused messages were delivered")
		}
	})

	t.Run("RefusalOnConnectAsksToSlowDown", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		srv.Script(smtptest.Fault{RejectConnect: smtptest.ErrServiceNotAvailable})
		res := relayTo(t, srv, "").Send(ctx, env, raw)
		var se *mail.SMTPError
		if !errors.As(res.Err, &se) || se.Code != 421 || !se.SlowDown() || se.Phase != mail.PhaseConnect {
			t.Errorf("result %+v (%v)", res, res.Err)
		}
	})

	t.Run("AServerThatNeverAnswersTimesOut", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		srv.Script(smtptest.Fault{Hang: true})
		// A server that never answers times out whatever the deadline, so
		// a short one here cannot fail on a slow machine.
		r, err := mail.NewRelay(mail.RelayConfig{URL: srv.URL(), CommandTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res := r.Send(ctx, env, raw)
		var ce *mail.ConnError
		if !errors.As(res.Err, &ce) || res.BodySent || time.Since(start) > 30*time.Second {
			t.Errorf("result %+v after %s, want a quick connection error", res, time.Since(start))
		}
	})

	t.Run("RequiredTLSThatIsNotOfferedIsAConfigError", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		res := relayTo(t, srv, "smtp://"+srv.Addr+"?tls=required").Send(ctx, env, raw)
		var ce *mail.ConfigError
		if !errors.As(res.Err, &ce) || len(srv.Deliveries()) != 0 {
			t.Errorf("result %+v", res)
		}
	})

	t.Run("OpportunisticTLSFallsBackToPlainWhenNotOffered", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		r := relayTo(t, srv, "smtp://"+srv.Addr)
		for range 2 {
			if res := r.Send(ctx, env, raw); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		if n := srv.Connections(); n != 1 {
			t.Errorf("%d connections, want the second message on the first one's session", n)
		}
		if d := srv.Deliveries(); d[0].TLS || d[0].Helo != "helpdesk.example.com" {
			t.Errorf("delivery %+v, want plain and our EHLO name", d[0])
		}
	})
}

func TestRelayConfig(t *testing.T) {
	t.Parallel()
	// smtp://us#er… would be a relay named "us": a # left as it is cuts the URL short.
	for _, url := range []string{"http://host", "smtp://", "smtp://host?tls=maybe", "smtp://u:p@mail.example.com:25?tls=none",
		"smtp://us#er:pass@mail.example.com:587"} {
		if _, err := mail.NewRelay(mail.RelayConfig{URL: url}); err == nil {
			t.Errorf("%s: accepted", url)
		}
	}
	for _, url := range []string{"smtp://u:p@host:587", "smtps://u:p@host", "smtp://host:25", "smtp://127.0.0.1:2525?tls=none"} {
		if _, err := mail.NewRelay(mail.RelayConfig{URL: url}); err != nil {
			t.Errorf("%s: %v", url, err)
		}
	}
}

func TestRelayTLSAndAuth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	users := map[string]string{"helpdesk": "s3cret"}
	relay := func(t *testing.T, srv *smtptest.Server, url string) *mail.Relay {
		t.Helper()
		r, err := mail.NewRelay(mail.RelayConfig{URL: url, HeloName: "helpdesk.example.com", CommandTimeout: 5 * time.Second,
			TLSConfig: &tls.Config{RootCAs: srv.RootCAs(), ServerName: "127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("STARTTLSWhenOfferedThenLogin", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.StartWith(t, smtptest.Options{StartTLS: true, Users: users})
		res := relay(t, srv, "smtp://helpdesk:s3cret@"+srv.Addr).Send(ctx, env, raw)
		got := srv.Deliveries()
		if res.Err != nil || len(got) != 1 || !got[0].TLS || got[0].User != "helpdesk" || got[0].Helo != "helpdesk.example.com" {
			t.Errorf("result %+v, deliveries %+v", res, got)
		}
	})

	t.Run("ImplicitTLS", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.StartWith(t, smtptest.Options{ImplicitTLS: true, Users: users})
		res := relay(t, srv, "smtps://helpdesk:s3cret@"+srv.Addr).Send(ctx, env, raw)
		if got := srv.Deliveries(); res.Err != nil || len(got) != 1 || !got[0].TLS {
			t.Errorf("result %+v, deliveries %+v", res, got)
		}
	})

	t.Run("AWrongPasswordIsAConfigError", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.StartWith(t, smtptest.Options{StartTLS: true, Users: users})
		res := relay(t, srv, "smtp://helpdesk:wrong@"+srv.Addr).Send(ctx, env, raw)
		var ce *mail.ConfigError
		if !errors.As(res.Err, &ce) || len(srv.Deliveries()) != 0 {
			t.Errorf("result %+v (%v)", res, res.Err)
		}
	})

	t.Run("AnUntrustedCertificateSendsNothing", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.StartWith(t, smtptest.Options{StartTLS: true})
		r, _ := mail.NewRelay(mail.RelayConfig{URL: "smtp://" + srv.Addr + "?tls=required", CommandTimeout: 5 * time.Second})
		res := r.Send(ctx, env, raw)
		if res.Err == nil || len(srv.Deliveries()) != 0 {
			t.Errorf("result %+v: sent over a certificate nobody trusts", res)
		}
		// The mail waits, as for a relay that cannot be reached, until the
		// certificate verifies: no recipient failed, no attempt is spent
		// (docs/deploy.md).
		o := mail.Classify(res, env.To)
		if !o.RelayDown || o.Config || o.Recipients["ada@example.com"].State != mail.StatePending {
			t.Errorf("outcome %+v (%v), want the relay down and every recipient pending", o, res.Err)
		}
	})
}

func TestRelayBodyWriteHasADeadline(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	srv.Script(smtptest.Fault{StallBody: true})
	r, err := mail.NewRelay(mail.RelayConfig{URL: srv.URL(), CommandTimeout: 5 * time.Second, BodyTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	big := append(append([]byte{}, raw...), bytes.Repeat([]byte(strings.Repeat("x", 76)+"\r\n"), 1<<19)...) // 40 MiB
	start := time.Now()
	res := r.Send(context.Background(), env, big)
	var ce *mail.ConnError
	if !errors.As(res.Err, &ce) || ce.Phase != mail.PhaseData || res.Uncertain || time.Since(start) > 30*time.Second {
		t.Errorf("result %+v (%v) after %s; want a data-phase timeout, certain that nothing was delivered", res, res.Err, time.Since(start))
	}
}

// tokens hands out "expired" until told the server refused it, then "fresh".
type tokens struct {
	mu      sync.Mutex
	refused int
}

func (k *tokens) Token(context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refused == 0 {
		return "expired", nil
	}
	return "fresh", nil
}

func (k *tokens) Refused() {
	k.mu.Lock()
	k.refused++
	k.mu.Unlock()
}

func TestRelayXOAUTH2RefreshesARefusedToken(t *testing.T) {
	t.Parallel()
	srv := smtptest.StartWith(t, smtptest.Options{StartTLS: true, Tokens: func(user string) string {
		if user != "support@example.org" {
			return ""
		}
		return "fresh"
	}})
	k := &tokens{}
	r, err := mail.NewRelay(mail.RelayConfig{URL: "smtp://support%40example.org@" + srv.Addr + "?auth=xoauth2&mailbox=support", HeloName: "helpdesk.example.com",
		CommandTimeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: srv.RootCAs(), ServerName: "127.0.0.1"}, Tokens: k})
	if err != nil {
		t.Fatal(err)
	}
	if res := r.Send(context.Background(), env, raw); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := srv.Deliveries(); len(got) != 1 || got[0].User != "support@example.org" || k.refused != 1 {
		t.Errorf("deliveries %+v after %d refusals", got, k.refused)
	}
	if mail.OAuthMailbox("smtp://u@h:587?auth=xoauth2&mailbox=support") != "support" {
		t.Error("the URL's mailbox is not read")
	}
	for _, bad := range []string{"smtp://h:587?auth=xoauth2&mailbox=x", "smtp://u@h:587?auth=xoauth2", "smtp://u@h:587?auth=cram"} {
		if _, err := mail.NewRelay(mail.RelayConfig{URL: bad}); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestRelayOnAServerWithoutSTARTTLS: opportunistic TLS asks in its own
// EHLO whether the server offers STARTTLS; where it does not, that EHLO is
// the session's only one, for a server may refuse a second (RFC 5321
// §4.1.4; Python's smtpd answers 503, and every mail failed for good).
func TestRelayOnAServerWithoutSTARTTLS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		greeting string
		noEHLO   bool
		hellos   []string // the EHLOs and HELOs the server hears
	}{
		"OneEHLOAndTheMailGoes":              {greeting: "220 strict.example ESMTP\r\n", hellos: []string{"EHLO helpdesk.example.com"}},
		"AGreetingOfSeveralLinesIsReadWhole": {greeting: "220-strict.example ESMTP\r\n220-no UCE\r\n220 ready\r\n", hellos: []string{"EHLO helpdesk.example.com"}},
		"AServerWithoutEHLOIsGreetedWithHELO": {greeting: "220 old.example SMTP\r\n", noEHLO: true,
			hellos: []string{"EHLO helpdesk.example.com", "EHLO helpdesk.example.com", "HELO helpdesk.example.com"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			addr, said := strictServer(t, tc.greeting, tc.noEHLO)
			res := relayTo(t, nil, "smtp://"+addr).Send(ctx, env, raw)
			if res.Err != nil || !res.BodySent || res.Rcpt["ada@example.com"] != nil {
				t.Fatalf("result %+v (%v)", res, res.Err)
			}
			hellos := slices.DeleteFunc(said(), func(c string) bool { return !strings.HasPrefix(c, "EHLO ") && !strings.HasPrefix(c, "HELO ") })
			if !slices.Equal(hellos, tc.hellos) {
				t.Errorf("the server heard %q, want %q", hellos, tc.hellos)
			}
		})
	}
}

// strictServer is an SMTP server on 127.0.0.1:0 that speaks as
// RFC 5321 lets a strict one: it greets with greeting, offers no
// extension that needs more than this, refuses a second EHLO with 503 (or,
// with noEHLO, every EHLO with 502, taking HELO), and takes every message.
// said lists the commands it heard.
func strictServer(t *testing.T, greeting string, noEHLO bool) (addr string, said func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var (
		mu       sync.Mutex
		commands []string
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tp := textproto.NewConn(c)
				fmt.Fprint(c, greeting)
				greeted := false
				for {
					line, err := tp.ReadLine()
					if err != nil {
						return
					}
					mu.Lock()
					commands = append(commands, line)
					mu.Unlock()
					verb, _, _ := strings.Cut(strings.ToUpper(line), " ")
					switch {
					case verb == "EHLO" && noEHLO:
						tp.PrintfLine("502 5.5.1 EHLO not implemented")
					case verb == "EHLO" && greeted:
						tp.PrintfLine("503 5.5.1 Duplicate HELO/EHLO")
					case verb == "EHLO":
						greeted = true
						tp.PrintfLine("250-strict.example\r\n250-8BITMIME\r\n250 ENHANCEDSTATUSCODES")
					case verb == "DATA":
						tp.PrintfLine("354 go ahead")
						if _, err := tp.ReadDotBytes(); err != nil {
							return
						}
						tp.PrintfLine("250 2.0.0 queued as 1")
					case verb == "QUIT":
						tp.PrintfLine("221 2.0.0 bye")
						return
					default:
						tp.PrintfLine("250 2.0.0 ok")
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(commands)
	}
}
