package mail_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/metrics"
)

// TestRelaySessionsAreReused holds the pool to what a fresh session per
// message promised: each fault keeps its outcome, and a session the server
// dropped costs nothing but a new one.
func TestRelaySessionsAreReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := mail.Envelope{From: "bounce@helpdesk.example.com", To: []string{"ada@example.com"}}
	raw := []byte("From: support@helpdesk.example.com\r\nTo: ada@example.com\r\nSubject: Hi\r\n\r\nHello.\r\n")

	t.Run("MessagesShareASession", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		r := relayTo(t, srv, "")
		for range 5 {
			if res := r.Send(ctx, env, raw); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		if n, d := srv.Connections(), len(srv.Deliveries()); n != 1 || d != 5 {
			t.Errorf("%d connections for %d deliveries, want one for five", n, d)
		}
	})

	t.Run("ASessionTheServerDroppedIsRedialledWithinTheAttempt", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		r := relayTo(t, srv, "")
		if res := r.Send(ctx, env, raw); res.Err != nil {
			t.Fatal(res.Err)
		}
		srv.DropConnections()
		res := r.Send(ctx, env, raw)
		if res.Err != nil || res.Rcpt["ada@example.com"] != nil || len(srv.Deliveries()) != 2 || srv.Connections() != 2 {
			t.Errorf("after the drop: %+v, %d deliveries over %d connections; want it sent on a new session", res, len(srv.Deliveries()), srv.Connections())
		}
	})

	t.Run("EveryFaultKeepsItsOutcomeOnAKeptSession", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		r := relayTo(t, srv, "")
		if res := r.Send(ctx, env, raw); res.Err != nil { // the session to reuse
			t.Fatal(res.Err)
		}
		// Faults go by connection, and no session is kept after a fault:
		// each one below comes on a connection of its own.
		srv.Script(smtptest.Fault{DataErr: smtptest.ErrTryAgainLater}, smtptest.Fault{DropAfterBody: true},
			smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"ada@example.com": smtptest.ErrNoSuchUser}},
			smtptest.Fault{RejectConnect: smtptest.ErrServiceNotAvailable})
		srv.DropConnections() // the next send redials onto the scripted faults
		var se *mail.SMTPError
		if res := r.Send(ctx, env, raw); !errors.As(res.Err, &se) || se.Code != 451 || res.BodySent {
			t.Errorf("451 after the body: %+v", res)
		}
		if res := r.Send(ctx, env, raw); !res.Uncertain || !res.BodySent {
			t.Errorf("a lost acknowledgement: %+v, want uncertain", res)
		}
		if res := r.Send(ctx, env, raw); res.Rcpt["ada@example.com"] == nil || res.Rcpt["ada@example.com"].Code != 550 {
			t.Errorf("a refused recipient: %+v", res)
		}
		if res := r.Send(ctx, env, raw); !errors.As(res.Err, &se) || se.Code != 421 {
			t.Errorf("421 at connect: %+v", res)
		}
		if res := r.Send(ctx, env, raw); res.Err != nil {
			t.Errorf("afterwards: %+v", res)
		}
	})

	t.Run("AsManySessionsAreKeptAsSentAtOnce", func(t *testing.T) {
		t.Parallel()
		// More than the eight the pool kept before; serve runs twenty
		// email workers.
		const atOnce = 12
		var (
			mu      sync.Mutex
			arrived int
			all     = make(chan struct{})
		)
		// Each message waits in the server until every one has arrived:
		// the Sends of a round are all under way at once, each on a
		// session of its own.
		srv := smtptest.StartWith(t, smtptest.Options{Forward: func(smtptest.Delivery) error {
			mu.Lock()
			if arrived++; arrived%atOnce == 0 {
				close(all)
			}
			wait := all
			mu.Unlock()
			<-wait
			return nil
		}})
		r := relayTo(t, srv, "")
		round := func() {
			t.Helper()
			mu.Lock()
			all = make(chan struct{})
			mu.Unlock()
			var wg sync.WaitGroup
			for range atOnce {
				wg.Go(func() {
					if res := r.Send(ctx, env, raw); res.Err != nil {
						t.Error(res.Err)
					}
				})
			}
			wg.Wait()
		}
		round()
		round()
		if n, d := srv.Connections(), len(srv.Deliveries()); n != atOnce || d != 2*atOnce {
			t.Errorf("%d connections for %d deliveries, %d at a time: want the second round on the first round's sessions", n, d, atOnce)
		}
	})

	limited := func(t *testing.T, srv *smtptest.Server, messages int, idle time.Duration) *mail.Relay {
		t.Helper()
		r, err := mail.NewRelay(mail.RelayConfig{URL: srv.URL(), HeloName: "helpdesk.example.com",
			DialTimeout: 5 * time.Second, CommandTimeout: 5 * time.Second, BodyTimeout: 5 * time.Second, ReplyTimeout: 5 * time.Second,
			SessionMessages: messages, SessionIdle: idle})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("ASessionCarriesAtMostSessionMessages", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		r := limited(t, srv, 3, time.Minute)
		for range 7 {
			if res := r.Send(ctx, env, raw); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		if n, d := srv.Connections(), len(srv.Deliveries()); n != 3 || d != 7 {
			t.Errorf("%d connections for %d deliveries, want three (3 + 3 + 1) for seven", n, d)
		}
	})

	t.Run("ASessionIdleLongerThanSessionIdleIsNotReused", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		r := limited(t, srv, 0, time.Millisecond)
		if res := r.Send(ctx, env, raw); res.Err != nil {
			t.Fatal(res.Err)
		}
		time.Sleep(20 * time.Millisecond) // longer than the idle limit, whatever the machine's load
		if res := r.Send(ctx, env, raw); res.Err != nil {
			t.Fatal(res.Err)
		}
		if n := srv.Connections(); n != 2 {
			t.Errorf("%d connections, want a new session after the idle limit", n)
		}
	})

	t.Run("CloseEndsTheKeptSessions", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		r := relayTo(t, srv, "")
		if res := r.Send(ctx, env, raw); res.Err != nil {
			t.Fatal(res.Err)
		}
		r.Close()
		if res := r.Send(ctx, env, raw); res.Err != nil {
			t.Fatal(res.Err)
		}
		if n := srv.Connections(); n != 2 {
			t.Errorf("%d connections, want the session closed and a new one after Close", n)
		}
	})
}

// TestSessionsAreCounted is not parallel: the counter is the process's, and
// no parallel test runs beside a test that is not.
func TestSessionsAreCounted(t *testing.T) {
	ctx := context.Background()
	env := mail.Envelope{From: "bounce@helpdesk.example.com", To: []string{"ada@example.com"}}
	raw := []byte("From: support@helpdesk.example.com\r\nTo: ada@example.com\r\nSubject: Hi\r\n\r\nHello.\r\n")
	count := func(tls, how string) float64 {
		return testutil.ToFloat64(metrics.SMTPSessions.WithLabelValues(tls, how))
	}

	plain := smtptest.Start(t)
	secure := smtptest.StartWith(t, smtptest.Options{StartTLS: true})
	r := relayTo(t, plain, "")
	s, err := mail.NewRelay(mail.RelayConfig{URL: "smtp://" + secure.Addr + "?tls=required", HeloName: "helpdesk.example.com",
		CommandTimeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: secure.RootCAs(), ServerName: "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]float64{}
	for _, k := range [][2]string{{"plain", "opened"}, {"plain", "reused"}, {"tls", "opened"}, {"tls", "reused"}} {
		before[k[0]+"/"+k[1]] = count(k[0], k[1])
	}
	for range 3 {
		if res := r.Send(ctx, env, raw); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	for range 2 {
		if res := s.Send(ctx, env, raw); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	want := map[string]float64{"plain/opened": 1, "plain/reused": 2, "tls/opened": 1, "tls/reused": 1}
	for k, n := range want {
		tls, how, _ := strings.Cut(k, "/")
		if got := count(tls, how) - before[k]; got != n {
			t.Errorf("helpdesk_smtp_sessions_total{tls=%q,how=%q} rose by %v, want %v", tls, how, got, n)
		}
	}
}
