package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/internal/testcert"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TestMain reuses the tests' schemas, emptied, and drops them at the end.
func TestMain(m *testing.M) { storetest.Main(m) }

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// runCmd runs the CLI in process and returns its exit code and output.
func runCmd(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, envOf(env), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestConfigErrorsNameTheVariableAndStopTheStart(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		name, env, value, want string
	}{
		{"RetryBaseNotADuration", "HELPDESK_RETRY_BASE", "soon", "HELPDESK_RETRY_BASE (-retry-base) = \"soon\""},
		{"RetryCapNegative", "HELPDESK_RETRY_CAP", "-1s", "HELPDESK_RETRY_CAP (-retry-cap)"},
		{"RetryCapBelowBase", "HELPDESK_RETRY_CAP", "1s", "HELPDESK_RETRY_CAP (-retry-cap) = \"1s\": want at least HELPDESK_RETRY_BASE"},
		{"MaxAttemptsZero", "HELPDESK_TRIAGE_MAX_ATTEMPTS", "0", "HELPDESK_TRIAGE_MAX_ATTEMPTS (-triage-max-attempts)"},
		{"MaxAttemptsNotANumber", "HELPDESK_TRIAGE_MAX_ATTEMPTS", "five", "HELPDESK_TRIAGE_MAX_ATTEMPTS"},
		{"HTTPAddrWithoutPort", "HELPDESK_HTTP_ADDR", "127.0.0.1", "HELPDESK_HTTP_ADDR (-http-addr) = \"127.0.0.1\": want host:port"},
		{"HTTPAddrBadPort", "HELPDESK_HTTP_ADDR", "127.0.0.1:99999", "HELPDESK_HTTP_ADDR"},
		{"SMTPURLWrongScheme", "HELPDESK_SMTP_URL", "http://mail.example.com", "HELPDESK_SMTP_URL (-smtp-url)"},
		{"MailDomainNotADomain", "HELPDESK_MAIL_DOMAIN", "not a domain", "HELPDESK_MAIL_DOMAIN (-mail-domain)"},
		{"FromNotAnAddress", "HELPDESK_FROM", "Support", "HELPDESK_FROM (-from)"},
		{"EmailMaxAttemptsZero", "HELPDESK_EMAIL_MAX_ATTEMPTS", "0", "HELPDESK_EMAIL_MAX_ATTEMPTS"},
		{"InboundLMTPNotABoolean", "HELPDESK_INBOUND_LMTP", "yes", "HELPDESK_INBOUND_LMTP (-inbound-lmtp)"},
		{"InboundAddrWithoutPort", "HELPDESK_INBOUND_ADDR", "127.0.0.1", "HELPDESK_INBOUND_ADDR (-inbound-addr)"},
		{"InboundWithoutAReplySecret", "HELPDESK_INBOUND_ADDR", "127.0.0.1:2525", "HELPDESK_REPLY_SECRET (-reply-secret) is not set"},
		{"ReplySecretTooShort", "HELPDESK_REPLY_SECRET", "short", "HELPDESK_REPLY_SECRET (-reply-secret)"},
		{"InboundDomainsNotDomains", "HELPDESK_INBOUND_DOMAINS", "example.com,not a domain", "HELPDESK_INBOUND_DOMAINS"},
		{"IdempotencyRetentionNotADuration", "HELPDESK_IDEMPOTENCY_RETENTION", "1 day", "HELPDESK_IDEMPOTENCY_RETENTION"},
		{"DatabaseURLMissing", "DATABASE_URL", "", "DATABASE_URL (-database-url) is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			env[tc.env] = tc.value
			code, _, stderr := runCmd(t, env, "serve")
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tc.want)
			}
		})
	}

	t.Run("UnknownCommandAndArgumentsAreUsageErrors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"frobnicate"}, {"jobs"}, {"jobs", "retry"}, {"jobs", "retry", "x"}, {"migrate", "sideways"}, {"serve", "--nope"}} {
			if code, _, stderr := runCmd(t, base, args...); code != 2 || stderr == "" {
				t.Errorf("%v: exit %d, stderr %q; want exit 2 with a message", args, code, stderr)
			}
		}
	})

	t.Run("HelpOfEveryCommandExitsZero", func(t *testing.T) {
		t.Parallel()
		for _, cmd := range []string{"migrate", "serve", "jobs", "simulator", "apikey", "load", "demo", "provider", "burst", "agent", "customer", "suppressions", "mail"} {
			if code, stdout, _ := runCmd(t, nil, cmd, "--help"); code != 0 || !strings.Contains(stdout, "usage: helpdesk "+cmd) {
				t.Errorf("%s --help: exit %d, %q", cmd, code, stdout)
			}
		}
	})
}

func TestMigrateCommandIsSafeToRunTwice(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": storetest.NewURL(t)}
	all, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runCmd(t, env, "migrate"); code != 0 || !strings.Contains(out, "applied helpdesk migrations [1 ") || !strings.Contains(out, fmt.Sprintf(" %d]", len(all))) {
		t.Fatalf("first migrate: exit %d, %q %q", code, out, stderr)
	}
	if code, out, stderr := runCmd(t, env, "migrate"); code != 0 || !strings.Contains(out, "already up to date") {
		t.Fatalf("second migrate: exit %d, %q %q", code, out, stderr)
	}
}

func TestJobsCommand(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	b := jobstest.SetupOn(t, openPool(t, dbURL))
	b.Config.TriageMaxAttempts = 1
	if err := b.Sim.SetMode(simulator.ModeOutage); err != nil {
		t.Fatal(err)
	}
	q := b.StartQueue(t)
	_, id1 := b.OpenTicket(t, q, "One", "First.")
	_, id2 := b.OpenTicket(t, q, "Two", "Second.")
	jobstest.WaitFor(t, q, id1, jobs.StateDeadLetter, 10*time.Second)
	jobstest.WaitFor(t, q, id2, jobs.StateDeadLetter, 10*time.Second)

	t.Run("DeadGroupsByLastErrorWithCounts", func(t *testing.T) {
		code, out, stderr := runCmd(t, env, "jobs", "dead")
		if code != 0 || !strings.Contains(out, "     2  ProviderUnavailable: the provider answered 503 on classify") {
			t.Errorf("exit %d, out:\n%s%s", code, out, stderr)
		}
	})

	t.Run("RetrySendsTheJobBackWithAWholeBudget", func(t *testing.T) {
		env := map[string]string{"DATABASE_URL": dbURL, "HELPDESK_TRIAGE_MAX_ATTEMPTS": "4"}
		code, out, stderr := runCmd(t, env, "jobs", "retry", strconv.FormatInt(id1, 10))
		if code != 0 || !strings.Contains(out, "attempt 0 of 4") {
			t.Errorf("exit %d, out %q %q", code, out, stderr)
		}
		code, _, stderr = runCmd(t, env, "jobs", "retry", "999999")
		if code != 1 || !strings.Contains(stderr, "not found") {
			t.Errorf("retry of an unknown job: exit %d, %q", code, stderr)
		}
	})
}

// migratedURL is a schema of the test's own, migrated by the CLI.
func migratedURL(t *testing.T) string {
	t.Helper()
	dbURL := storetest.NewURL(t)
	if code, _, stderr := runCmd(t, map[string]string{"DATABASE_URL": dbURL}, "migrate"); code != 0 {
		t.Fatal(stderr)
	}
	return dbURL
}

func openPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := store.Open(context.Background(), dbURL, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// startServe runs serve in the test with env and returns its API address
// once it listens, and a stop that does what SIGTERM does and returns
// serve's result.
func startServe(t *testing.T, env map[string]string) (addr string, stop func() error) {
	t.Helper()
	return startServeWith(t, env, nil)
}

// startServeWith is startServe with a change to the parsed configuration.
func startServeWith(t *testing.T, env map[string]string, change func(*serveConfig)) (addr string, stop func() error) {
	t.Helper()
	if _, ok := env["HELPDESK_CAPTURE_DIR"]; !ok && env["HELPDESK_SMTP_URL"] == "" {
		env["HELPDESK_CAPTURE_DIR"] = t.TempDir()
	}
	cfg, err := parseServeConfig(nil, envOf(env), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, jobstest.Logger(), func(addr string) { ready <- addr }) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(30 * time.Second):
				result = errors.New("serve did not stop within 30s")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case addr = <-ready:
		return addr, stop
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve not ready after 30s")
	}
	return "", nil
}

func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()

	start := func(t *testing.T, grace string) (*jobstest.Bundle, func() error) {
		dbURL := migratedURL(t)
		b := jobstest.SetupOn(t, openPool(t, dbURL))

		// Every provider answer takes 1s, so a job is still running when the signal comes.
		settings := simulator.DefaultSettings()
		settings.Mode, settings.SlowDelay = simulator.ModeSlow, simulator.Duration(time.Second)
		if err := b.Sim.Set(settings); err != nil {
			t.Fatal(err)
		}
		addr, stop := startServe(t, map[string]string{
			"DATABASE_URL": dbURL, "HELPDESK_HTTP_ADDR": "127.0.0.1:0", "HELPDESK_PROVIDER_URL": b.Sim.URL,
			"HELPDESK_PROVIDER_TIMEOUT": "5s", "HELPDESK_SHUTDOWN_GRACE": grace,
		})
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		resp.Body.Close()
		return b, stop
	}

	// stop does what SIGTERM does through signal.NotifyContext, and expects exit 0.
	stopped := func(t *testing.T, stop func() error) {
		if err := stop(); err != nil {
			t.Fatalf("serve returned %v, want nil (exit 0)", err)
		}
	}

	waitRunning := func(t *testing.T, q *jobs.Queue, id int64) {
		jobstest.WaitFor(t, q, id, jobs.StateRunning, 10*time.Second)
	}

	t.Run("RunningJobsFinishWithinTheGracePeriod", func(t *testing.T) {
		t.Parallel()
		b, stop := start(t, "30s")
		q := b.NewQueue(t) // inserts only; the served queue works the job
		_, jobID := b.OpenTicket(t, q, "Slow", "Every answer takes a second.")
		waitRunning(t, q, jobID)

		stopped(t, stop)
		if s, _ := q.Get(b.Ctx, jobID); s.State != jobs.StateSucceeded {
			t.Errorf("job is %s after shutdown, want succeeded: it was let finish", s.State)
		}
	})

	t.Run("JobsStillRunningAfterTheGraceGoBackWithoutSpendingAnAttempt", func(t *testing.T) {
		t.Parallel()
		b, stop := start(t, "200ms")
		q := b.NewQueue(t)
		_, jobID := b.OpenTicket(t, q, "Slow", "Every answer takes a second.")
		waitRunning(t, q, jobID)

		stopped(t, stop)
		s, _ := q.Get(b.Ctx, jobID)
		if s.State != jobs.StateQueued || s.Attempt != 0 {
			t.Errorf("job is %s at attempt %d after shutdown, want queued at attempt 0", s.State, s.Attempt)
		}
	})
}

func TestServeReceivesMailWhenAnInboundAddressIsSet(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	pool := openPool(t, dbURL)
	if err := store.New(pool).UpsertCustomer(context.Background(), &store.InsertCustomerParams{
		ID: "C-0001", Name: "Ada Lovelace", Email: "ada.lovelace@example.com"}); err != nil {
		t.Fatal(err)
	}
	var inboundAddr string
	_, stop := startServeWith(t, map[string]string{
		"DATABASE_URL": dbURL, "HELPDESK_HTTP_ADDR": "127.0.0.1:0", "HELPDESK_MAIL_DOMAIN": "helpdesk.example.com",
		"HELPDESK_INBOUND_ADDR": "127.0.0.1:0", "HELPDESK_REPLY_SECRET": "a-test-secret-of-enough-length",
	}, func(c *serveConfig) {
		c.listening = func(what, addr string) {
			if what == "HELPDESK_INBOUND_ADDR" {
				inboundAddr = addr // told before serve is ready: no race
			}
		}
	})

	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mail", "gmail_new_ticket.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := smtptest.Send(inboundAddr, "ada.lovelace@example.com", "support@helpdesk.example.com", raw); err != nil {
		t.Fatalf("mail to the inbound listener: %v", err)
	}
	var tickets int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM tickets WHERE customer_id = 'C-0001'`).Scan(&tickets); err != nil || tickets != 1 {
		t.Errorf("%d tickets (%v), want the mail's one", tickets, err)
	}
	if err := stop(); err != nil {
		t.Errorf("serve returned %v", err)
	}
}

func TestProviderCommandShowsTheBreakerAndThePace(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	if code, out, stderr := runCmd(t, env, "provider"); code != 0 || !strings.Contains(out, "no provider called yet") {
		t.Fatalf("exit %d, %q %q", code, out, stderr)
	}
	pool := openPool(t, dbURL)
	if _, err := pool.Exec(context.Background(), `INSERT INTO providers (provider, state, failures, next_probe_at, last_error, call_interval, quota_limit, quota_remaining)
		VALUES ('http://provider.example', 'open', 10, now() + interval '5 seconds', 'ProviderUnavailable: the provider answered 503', '1200ms', 50, 7)`); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, env, "provider")
	for _, want := range []string{"http://provider.example", "breaker: open since", "next probe", "10 failures in a row",
		"last error: ProviderUnavailable: the provider answered 503", "one call every 1.2s (quota 50, 7 left"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, output %q (%q): want %q", code, out, stderr, want)
		}
	}
}

func TestWithoutARelayMailIsCapturedNotSent(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	pool := openPool(t, dbURL)
	st := store.New(pool)
	if err := st.UpsertCustomer(context.Background(), &store.InsertCustomerParams{ID: "C-0001", Name: "Ada", Email: "ada@example.com"}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertAgent(context.Background(), &store.UpsertAgentParams{Name: "alice", DisplayName: "Alice", Email: "alice@support.example.com"}); err != nil {
		t.Fatal(err)
	}
	key, err := createAPIKey(context.Background(), st, vocab.Agent("alice"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr, _ := startServe(t, map[string]string{"DATABASE_URL": dbURL, "HELPDESK_HTTP_ADDR": "127.0.0.1:0", "HELPDESK_CAPTURE_DIR": dir})
	apiURL := "http://" + addr
	ticket, err := postTicket(context.Background(), apiURL, key, "capture-1", `{"customer_id":"C-0001","subject":"Hello","body":"Hi."}`)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := postReply(context.Background(), apiURL, key, ticket.TicketID, "capture-2", `{"body":"Hello back."}`)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		em, err := st.GetOutboundEmail(context.Background(), reply.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		if em.State == store.DeliveryCaptured {
			if em.Recipients[0].State != store.RecipientCaptured {
				t.Errorf("recipient %s, want captured", em.Recipients[0].State)
			}
			break
		}
		if em.State == store.DeliverySent || time.Now().After(deadline) {
			t.Fatalf("email is %s, want captured: nothing left the machine", em.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	files, err := os.ReadDir(filepath.Join(dir, "new"))
	if err != nil || len(files) != 1 {
		t.Fatalf("%d files in the Maildir's new (%v), want the reply", len(files), err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "new", files[0].Name()))
	if !bytes.Contains(raw, []byte("Hello back.")) || !bytes.Contains(raw, []byte(reply.EmailMessageID)) {
		t.Errorf("the captured file is not the reply:\n%s", raw)
	}
}

func TestSuppressionsCommand(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	if err := store.New(openPool(t, dbURL)).Suppress(context.Background(), "bram@example.com", "5.1.1 User unknown", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runCmd(t, env, "suppressions"); code != 0 || !strings.Contains(out, "bram@example.com") || !strings.Contains(out, "5.1.1") {
		t.Errorf("list: exit %d, %q %q", code, out, stderr)
	}
	if code, out, _ := runCmd(t, env, "suppressions", "-clear", "bram@example.com"); code != 0 || !strings.Contains(out, "cleared") {
		t.Errorf("clear: exit %d, %q", code, out)
	}
	if code, _, stderr := runCmd(t, env, "suppressions", "-clear", "bram@example.com"); code != 2 || !strings.Contains(stderr, "is not suppressed") {
		t.Errorf("clear again: exit %d, %q", code, stderr)
	}
}

func TestMailReparseReadsTheRawMailAgain(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	st := store.New(openPool(t, dbURL))
	ctx := context.Background()
	if err := st.UpsertCustomer(ctx, &store.InsertCustomerParams{ID: "C-0001", Name: "Ada", Email: "ada.lovelace@example.com"}); err != nil {
		t.Fatal(err)
	}
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Charged twice"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mail", "mixed_text_parts.eml"))
	if err != nil {
		t.Fatal(err)
	}
	id := "<mixed.1@mail.example.com>"
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionInbound,
		Author: "customer:C-0001", Body: "what an old parser made of it", EmailMessageID: &id, RawEmail: raw})
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{strconv.FormatInt(msg.ID, 10), id} {
		code, out, stderr := runCmd(t, env, "mail", "reparse", arg)
		if code != 0 || !strings.Contains(out, "1 attachments") {
			t.Fatalf("reparse %s: exit %d, %q %q", arg, code, out, stderr)
		}
		again, err := st.GetMessage(ctx, msg.ID)
		if err != nil || !strings.Contains(again.Body, "First, the login page:") || !strings.Contains(again.Body, "Then the error") {
			t.Errorf("after reparse %s the text is %q (%v)", arg, again.Body, err)
		}
		// Read again, the attachment replaces the one before, with its content.
		files, err := st.MessageAttachmentFiles(ctx, msg.ID)
		if err != nil || len(files) != 1 || len(files[0].Content) == 0 || int64(len(files[0].Content)) != files[0].Size {
			t.Errorf("after reparse %s the attachments are %+v (%v), want one, kept", arg, files, err)
		}
	}
	noRaw, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionNote, Author: "agent:alice", Body: "note"})
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"999999", "<nobody@example.com>", strconv.FormatInt(noRaw.ID, 10)} {
		if code, _, stderr := runCmd(t, env, "mail", "reparse", arg); code != 2 || stderr == "" {
			t.Errorf("reparse %s: exit %d, %q; want exit 2 with a message", arg, code, stderr)
		}
	}
}

func TestServeSpeaksTLSWhenGivenACertificate(t *testing.T) {
	t.Parallel()
	cert := testcert.New(t)
	certFile, keyFile := cert.Files(t)
	addr, _ := startServe(t, map[string]string{"DATABASE_URL": migratedURL(t), "HELPDESK_HTTP_ADDR": "127.0.0.1:0",
		"HELPDESK_TLS_CERT": certFile, "HELPDESK_TLS_KEY": keyFile})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}}, Timeout: 10 * time.Second}
	resp, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("https: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Errorf("https: %d over TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP is served too")
		}
	}

	t.Run("ACertificateWithoutItsKeyOrAFileThatIsNoneStopsTheStart", func(t *testing.T) {
		t.Parallel()
		for _, env := range []map[string]string{
			{"HELPDESK_TLS_CERT": certFile},
			{"HELPDESK_TLS_CERT": keyFile, "HELPDESK_TLS_KEY": keyFile},
			{"HELPDESK_INBOUND_TLS_KEY": keyFile},
			{"HELPDESK_INBOUND_REQUIRE_TLS": "1"},
		} {
			env["DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/none"
			code, _, stderr := runCmd(t, env, "serve")
			if code != 2 || !strings.Contains(stderr, "TLS") {
				t.Errorf("%v: exit %d, %q; want 2 naming the setting", env, code, stderr)
			}
		}
	})
}
