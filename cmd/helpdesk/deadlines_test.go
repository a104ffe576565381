package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// silentServer takes TCP connections and never says a word, as a
// PostgreSQL that hangs does.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestEveryCommandGivesUpOnADatabaseThatNeverAnswers(t *testing.T) {
	t.Parallel()
	addr := silentServer(t)
	env := map[string]string{"DATABASE_URL": "postgres://postgres@" + addr + "/helpdesk?sslmode=disable",
		"HELPDESK_DB_CONNECT_TIMEOUT": "1s", "HELPDESK_HTTP_ADDR": "127.0.0.1:0"}
	for _, args := range [][]string{{"migrate"}, {"serve"}, {"jobs", "dead"}, {"apikey", "create", "-actor", "agent:dana"}} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			code, _, stderr := runCmd(t, env, args...)
			if code != 1 || !strings.Contains(stderr, "did not answer within 1s") || !strings.Contains(stderr, addr) {
				t.Errorf("exit %d, stderr %q; want exit 1 naming the database and the timeout", code, stderr)
			}
			if elapsed := time.Since(start); elapsed > 30*time.Second {
				t.Errorf("gave up after %s", elapsed)
			}
		})
	}
}

func TestTimeoutSettingsAreChecked(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"RescueNotAfterTheJobTimeouts", map[string]string{"HELPDESK_EMAIL_TIMEOUT": "90s", "HELPDESK_RESCUE_AFTER": "60s"},
			"HELPDESK_RESCUE_AFTER (-rescue-after) = \"60s\": want longer than the longest job timeout (1m30s)"},
		{"NegativeRequestTimeout", map[string]string{"HELPDESK_REQUEST_TIMEOUT": "-1s"}, "HELPDESK_REQUEST_TIMEOUT"},
		{"ConnectTimeoutNotADuration", map[string]string{"HELPDESK_DB_CONNECT_TIMEOUT": "ten"}, "HELPDESK_DB_CONNECT_TIMEOUT"},
		{"GiveUpNotADuration", map[string]string{"HELPDESK_EMAIL_GIVE_UP_AFTER": "3 days"}, "HELPDESK_EMAIL_GIVE_UP_AFTER"},
		{"MaxSessionsZero", map[string]string{"HELPDESK_INBOUND_MAX_SESSIONS": "0"}, "HELPDESK_INBOUND_MAX_SESSIONS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			if code, _, stderr := runCmd(t, env, "serve"); code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tc.want)
			}
		})
	}

	t.Run("TheRescueFollowsTheLongestJobTimeout", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseServeConfig(nil, envOf(base), io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		// Defaults: triage 3 × 10s + 15s, email 90s, rescue 90s + 30s.
		if cfg.Jobs.TriageTimeout != 45*time.Second || cfg.Jobs.EmailTimeout != 90*time.Second || cfg.Jobs.RescueStuckJobsAfter != 2*time.Minute {
			t.Errorf("triage %s, email %s, rescue %s", cfg.Jobs.TriageTimeout, cfg.Jobs.EmailTimeout, cfg.Jobs.RescueStuckJobsAfter)
		}
	})
}

func TestServeClosesIdleKeepAliveConnections(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	addr, _ := startServe(t, map[string]string{
		"DATABASE_URL": dbURL, "HELPDESK_HTTP_ADDR": "127.0.0.1:0", "HELPDESK_HTTP_IDLE_TIMEOUT": "1s",
	})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: helpdesk\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("healthz over keep-alive: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The connection now idles; the server closes it. The deadline is only
	// a guard against a hang, far past the idle timeout.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Errorf("idle connection: %v, want the server to close it (EOF)", err)
	}
}

// A connection past HELPDESK_HTTP_MAX_CONNECTIONS is not taken until
// another closes: strangers cannot make the process hold more.
func TestServeHoldsNoMoreConnectionsThanItsCap(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	addr, _ := startServe(t, map[string]string{
		"DATABASE_URL": dbURL, "HELPDESK_HTTP_ADDR": "127.0.0.1:0", "HELPDESK_HTTP_MAX_CONNECTIONS": "2",
	})
	// healthz sends a request on a connection of its own, which stays open.
	healthz := func(t *testing.T) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: helpdesk\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		return c, bufio.NewReader(c)
	}
	answered := func(r *bufio.Reader) error {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	first, r1 := healthz(t)
	_, r2 := healthz(t)
	for _, r := range []*bufio.Reader{r1, r2} {
		if err := answered(r); err != nil {
			t.Fatalf("a connection within the cap: %v", err)
		}
	}
	third, r3 := healthz(t)
	// Held back while both stay open: a cap that let it through answers
	// at once (this waits only to see that nothing comes).
	_ = third.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := r3.Peek(1); err == nil {
		t.Fatal("a third connection was answered while two were open, with a cap of two")
	}
	first.Close()
	// The guard against a hang only, far past what it takes.
	_ = third.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := answered(r3); err != nil {
		t.Errorf("the third connection, once the first closed: %v", err)
	}
}
