package faulttest_test

// The fault suite: the built binary runs as separate processes (os/exec)
// against the real PostgreSQL, a simulated provider and a fake SMTP relay
// in this process, and the faults are inflicted from outside: SIGKILL,
// a relay that refuses connections, PostgreSQL out of reach. Each test then
// checks the promises: one result per triage step, every reply at the
// relay with identical copies, and no job stuck or given up.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/faulttest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// binary is $HELPDESK_BIN (make faults builds it first), else the binary
// built once for this test run.
func binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("HELPDESK_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "helpdesk-bin-")
		if err != nil {
			buildErr = err
			return
		}
		built = dir + "/helpdesk"
		out, err := exec.Command("go", "build", "-o", built, "github.com/helpdesk-dev/helpdesk/cmd/helpdesk").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// world is what the processes share: a database schema, the simulated
// provider, the fake relay, and an agent's API key.
type world struct {
	dbURL string
	pool  *pgxpool.Pool
	sim   *simulator.Running
	smtp  *smtptest.Server
	agent string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	// Every provider answer takes a little while, so that work is under
	// way when a fault strikes.
	settings := simulator.DefaultSettings()
	settings.Mode, settings.SlowDelay = simulator.ModeSlow, simulator.Duration(50*time.Millisecond)
	return newWorldWith(t, settings)
}

// newWorldWith is newWorld with a provider of these settings.
func newWorldWith(t testing.TB, settings simulator.Settings) *world {
	t.Helper()
	w := &world{dbURL: storetest.NewURL(t)}
	cmd := exec.Command(binary(t), "migrate")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+w.dbURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	pool, err := pgxpool.New(context.Background(), w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w.pool = pool
	st := store.New(pool)
	ctx := context.Background()
	for i := range 10 {
		if _, err := st.InsertCustomer(ctx, &store.InsertCustomerParams{ID: fmt.Sprintf("C-%04d", i+1),
			Email: fmt.Sprintf("customer%d@example.com", i+1), Name: fmt.Sprintf("Customer %d", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: "alice", DisplayName: "Alice", Email: "alice@support.example.com"}); err != nil {
		t.Fatal(err)
	}
	key, sha := api.NewAPIKey()
	if err := st.InsertAPIKey(ctx, "agent:alice", sha); err != nil {
		t.Fatal(err)
	}
	w.agent = key
	if w.sim, err = simulator.Listen("127.0.0.1:0", settings); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.sim.Close() })
	w.smtp = smtptest.Start(t)
	return w
}

// env is the environment of a service process: short waits, so that a
// crashed process's jobs come back within seconds.
func (w *world) env(overrides map[string]string) []string {
	vars := map[string]string{
		"DATABASE_URL":                w.dbURL + "&pool_max_conns=10", // several processes, several worlds, one server's 100 connections
		"HELPDESK_HTTP_ADDR":          "127.0.0.1:0",
		"HELPDESK_PROVIDER_URL":       w.sim.URL,
		"HELPDESK_PROVIDER_TIMEOUT":   "5s",
		"HELPDESK_SMTP_URL":           w.smtp.URL(),
		"HELPDESK_MAIL_DOMAIN":        "helpdesk.example.com",
		"HELPDESK_RETRY_BASE":         "100ms",
		"HELPDESK_RETRY_CAP":          "1s",
		"HELPDESK_EMAIL_RETRY_BASE":   "30ms",
		"HELPDESK_EMAIL_RETRY_CAP":    "300ms",
		"HELPDESK_TRIAGE_TIMEOUT":     "10s",
		"HELPDESK_EMAIL_TIMEOUT":      "10s",
		"HELPDESK_RESCUE_AFTER":       "11s",
		"HELPDESK_REQUEST_TIMEOUT":    "5s",
		"HELPDESK_DB_CONNECT_TIMEOUT": "5s",
		"HELPDESK_LOG_LEVEL":          "info",
		"HELPDESK_API_RATE":           "100000/s",
	}
	// To measure the rescue at serve's defaults (about two and a half
	// minutes), not the suite's: HELPDESK_FAULTS_DEFAULT_TIMEOUTS=1.
	if os.Getenv("HELPDESK_FAULTS_DEFAULT_TIMEOUTS") == "1" {
		for _, k := range []string{"HELPDESK_PROVIDER_TIMEOUT", "HELPDESK_TRIAGE_TIMEOUT", "HELPDESK_EMAIL_TIMEOUT", "HELPDESK_RESCUE_AFTER"} {
			delete(vars, k)
		}
	}
	for k, v := range overrides {
		vars[k] = v
	}
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "HELPDESK_") && k != "DATABASE_URL" {
			out = append(out, kv)
		}
	}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// process is one running `helpdesk serve`.
type process struct {
	name string
	cmd  *exec.Cmd
	url  string // the API
	done chan struct{}

	mu  sync.Mutex
	log bytes.Buffer
}

func (w *world) start(t testing.TB, name string, overrides map[string]string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(binary(t), "serve"), done: make(chan struct{})}
	p.cmd.Env = w.env(overrides)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			line := s.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if _, api, ok := strings.Cut(line, " http=http://"); ok && strings.Contains(line, "helpdesk is serving") {
				addr, _, _ := strings.Cut(api, " ")
				ready <- "http://" + addr
			}
		}
		_ = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", p.name, p.logText())
		}
	})
	select {
	case p.url = <-ready:
	case <-p.done:
		t.Fatalf("%s exited before serving:\n%s", name, p.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not serving after 60s:\n%s", name, p.logText())
	}
	return p
}

func (p *process) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill is kill -9: no shutdown, no goodbye; whatever it ran stays running.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// post sends a JSON request as the agent and decodes the answer.
func (w *world) post(baseURL, path string, body any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, baseURL+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.agent)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("answer %d is not JSON: %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, out, nil
}

// ticketsWithReplies opens n tickets through the API, each with an
// agent's reply, four requests at a time.
func (w *world) ticketsWithReplies(t *testing.T, baseURL string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 4)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			status, body, err := w.post(baseURL, "/v1/tickets", map[string]string{
				"customer_id": fmt.Sprintf("C-%04d", i%10+1), "subject": fmt.Sprintf("Order %d is late", i), "body": "Where is my parcel?"})
			if err != nil || status != http.StatusAccepted {
				errs <- fmt.Errorf("ticket %d: %d %v %v", i, status, body, err)
				return
			}
			id := body["ticket_id"].(string)
			status, body, err = w.post(baseURL, "/v1/tickets/"+id+"/replies", map[string]string{"body": "We are on it: " + id})
			if err != nil || status != http.StatusAccepted {
				errs <- fmt.Errorf("reply to %s: %d %v %v", id, status, body, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

func (w *world) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := w.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// awaitSettled waits until no job is left to do, and fails at once on a
// job that was given up.
func (w *world) awaitSettled(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if n := w.count(t, `SELECT count(*) FROM river_job WHERE state IN ('cancelled', 'discarded')`); n > 0 {
			var detail string
			_ = w.pool.QueryRow(context.Background(), `SELECT string_agg(id || ' ' || kind || ' ' || state || ': ' || coalesce(errors[array_length(errors, 1)]->>'error', ''), '; ')
				FROM river_job WHERE state IN ('cancelled', 'discarded')`).Scan(&detail)
			t.Fatalf("%d jobs given up: %s", n, detail)
		}
		// The periodic maintenance job may run at any time; the work is triage and email.
		if w.count(t, `SELECT count(*) FROM river_job WHERE state <> 'completed' AND kind IN ('triage', 'email_outbound')`) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > within {
			var detail string
			_ = w.pool.QueryRow(context.Background(), `SELECT string_agg(state || ' ' || n, ', ') FROM
				(SELECT state, count(*) AS n FROM river_job WHERE state <> 'completed' AND kind IN ('triage', 'email_outbound') GROUP BY state) s`).Scan(&detail)
			t.Fatalf("jobs still not done after %s: %s", within, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requirePromisesKept checks what every fault must leave intact: each
// ticket has one result per triage step, every reply was sent and reached
// the relay, and every copy of one Message-ID is the same bytes.
func (w *world) requirePromisesKept(t *testing.T, tickets int) {
	t.Helper()
	if n := w.count(t, `SELECT count(*) FROM tickets`); n != tickets {
		t.Errorf("%d tickets, want %d", n, tickets)
	}
	if n := w.count(t, `SELECT count(*) FROM tickets t WHERE (SELECT count(*) FROM ai_runs a WHERE a.job_id = t.triage_job_id) <> 3
		OR EXISTS (SELECT 1 FROM ai_runs a WHERE a.ticket_id = t.id AND a.job_id <> t.triage_job_id)`); n != 0 {
		t.Errorf("%d tickets without exactly one result per step", n)
	}
	if n := w.count(t, `SELECT count(*) FROM tickets t WHERE team IS NULL OR draft_reply IS NULL
		OR NOT EXISTS (SELECT FROM ticket_embeddings e WHERE e.ticket_id = t.id)`); n != 0 {
		t.Errorf("%d tickets not fully triaged", n)
	}
	if n := w.count(t, `SELECT count(*) FROM outbound_emails WHERE state <> 'sent'`); n != 0 {
		t.Errorf("%d replies not sent", n)
	}
	copies := map[string][][]byte{}
	for _, d := range w.smtp.Deliveries() {
		id := messageID(d.Raw)
		copies[id] = append(copies[id], d.Raw)
	}
	rows, err := w.pool.Query(context.Background(), `SELECT m.email_message_id FROM messages m JOIN outbound_emails e ON e.message_id = m.id`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != tickets {
		t.Errorf("%d replies stored, want %d", len(ids), tickets)
	}
	resent := 0
	for _, id := range ids {
		got := copies[id]
		if len(got) == 0 {
			t.Errorf("reply %s never reached the relay", id)
			continue
		}
		resent += len(got) - 1
		for _, c := range got[1:] {
			if !bytes.Equal(c, got[0]) {
				t.Errorf("reply %s reached the relay %d times with different bytes", id, len(got))
				break
			}
		}
	}
	t.Logf("%d replies at the relay, %d sent again after an unknown outcome (identical bytes)", len(ids), resent)
}

func messageID(raw []byte) string {
	for _, line := range strings.Split(string(raw), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Message-Id") {
			return strings.TrimSpace(v)
		}
		if line == "" {
			break
		}
	}
	return ""
}

// killWhileBusy SIGKILLs the worker once jobs run, waits until every job
// is done, and checks that every promise was kept for the tickets. It
// returns how many jobs ran at the kill and how long the rest took.
func (w *world) killWhileBusy(t *testing.T, victim *process, tickets int) (held int, settled time.Duration) {
	t.Helper()
	for w.count(t, `SELECT count(*) FROM river_job WHERE state = 'running'`) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	held = w.count(t, `SELECT count(*) FROM river_job WHERE state = 'running'`)
	victim.kill(t)
	settled = w.awaitSettled(t, 5*time.Minute)
	w.requirePromisesKept(t, tickets)
	return held, settled
}

func TestFaults(t *testing.T) {
	t.Parallel()

	// One API process and two workers (serve -role api, -role worker): the
	// workers share the jobs, and one of them is SIGKILLed mid-way.
	t.Run("KillingOneOfTwoWorkersLosesNothingAndDoublesNothing", func(t *testing.T) {
		t.Parallel()
		const tickets = 200
		w := newWorld(t)
		apiProcess := w.start(t, "api", map[string]string{"HELPDESK_ROLE": "api"})
		a := w.start(t, "worker-a", map[string]string{"HELPDESK_ROLE": "worker"})
		w.start(t, "worker-b", map[string]string{"HELPDESK_ROLE": "worker"})
		// A worker answers probes and metrics, not the API.
		for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/v1/tickets": 404} {
			resp, err := http.Get(a.url + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("worker %s: %d, want %d", path, resp.StatusCode, want)
			}
		}
		w.ticketsWithReplies(t, apiProcess.url, tickets)
		held, settled := w.killWhileBusy(t, a, tickets)
		t.Logf("one API and two workers, one SIGKILLed with %d jobs running: every job finished within %s", held, settled.Round(100*time.Millisecond))
		// The API process queued every job and sent no mail.
		if log := apiProcess.logText(); strings.Contains(log, "email sent") {
			t.Errorf("the API process worked jobs:\n%s", log)
		}
	})

	t.Run("ARelayThatRefusesConnectionsSpendsNoAttempt", func(t *testing.T) {
		t.Parallel()
		const tickets = 50
		w := newWorld(t)
		proxy := faulttest.Start(t, w.smtp.Addr)
		p := w.start(t, "worker", map[string]string{"HELPDESK_SMTP_URL": "smtp://" + proxy.Addr + "?tls=none",
			"HELPDESK_EMAIL_MAX_ATTEMPTS": "2"})
		proxy.Refuse()
		w.ticketsWithReplies(t, p.url, tickets)
		// Down for 100 times the backoff's base (30ms): far longer than two
		// attempts' worth of backoff.
		time.Sleep(3 * time.Second)
		if n := w.count(t, `SELECT count(*) FROM river_job WHERE kind = 'email_outbound' AND state <> 'running' AND attempt > 0`); n != 0 {
			t.Errorf("%d email jobs spent an attempt on the outage", n)
		}
		if err := proxy.Pass(); err != nil {
			t.Fatal(err)
		}
		w.awaitSettled(t, 120*time.Second)
		w.requirePromisesKept(t, tickets)
		if n := w.count(t, `SELECT count(*) FROM river_job WHERE kind = 'email_outbound' AND attempt <> 1`); n != 0 {
			t.Errorf("%d email jobs needed more than one attempt", n)
		}
	})

	t.Run("PostgreSQLOutOfReachThenBackLosesNothing", func(t *testing.T) {
		t.Parallel()
		const tickets = 50
		w := newWorld(t)
		u, err := url.Parse(w.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		proxy := faulttest.Start(t, net.JoinHostPort(u.Hostname(), cmpOr(u.Port(), "5432")))
		u.Host = proxy.Addr
		p := w.start(t, "worker", map[string]string{"DATABASE_URL": u.String()})
		w.ticketsWithReplies(t, p.url, tickets)

		proxy.Refuse()
		status, body, err := w.post(p.url, "/v1/tickets", map[string]string{"customer_id": "C-0001", "subject": "During the outage", "body": "Hello?"})
		if err != nil || status != http.StatusServiceUnavailable {
			t.Errorf("a request while PostgreSQL is out of reach: %d %v %v, want 503", status, body, err)
		}
		time.Sleep(3 * time.Second)
		if err := proxy.Pass(); err != nil {
			t.Fatal(err)
		}
		w.awaitSettled(t, 120*time.Second)
		w.requirePromisesKept(t, tickets)
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
