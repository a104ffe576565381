// Package jobstest sets up a real queue for tests: its own schema, a simulated provider on loopback, River.
package jobstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// ProviderTimeout is the provider client's timeout in tests: long enough
// that no call times out on a loaded machine. A test of timeouts makes its
// own client with ShortTimeoutProvider against a simulator that never answers.
const ProviderTimeout = 10 * time.Second

// Bundle is one test's world. Change Config before StartQueue to change the
// queue.
type Bundle struct {
	Ctx      context.Context
	Pool     *pgxpool.Pool
	Store    *store.Store
	Sim      *simulator.Running
	Provider *provider.Client
	Config   jobs.Config
	// DeskConfig is the use cases' configuration; Desk builds them over a queue.
	DeskConfig desk.Config
	// Relay is WithSMTP's relay, the desk's sender; nil without.
	Relay *mail.Relay

	customers int
}

// Setup gives the test a migrated schema, a simulator and a queue config
// with short waits: backoff 10ms to 50ms, polling every 50ms.
func Setup(tb testing.TB) *Bundle {
	tb.Helper()
	return SetupOn(tb, storetest.NewPool(tb))
}

// SetupOn is Setup on a migrated pool of the caller's.
func SetupOn(tb testing.TB, pool *pgxpool.Pool) *Bundle {
	tb.Helper()
	sim, err := simulator.Listen("127.0.0.1:0", simulator.DefaultSettings())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sim.Close() })
	client, err := provider.New(provider.Config{BaseURL: sim.URL, Timeout: ProviderTimeout})
	if err != nil {
		tb.Fatal(err)
	}
	return &Bundle{
		Ctx:      context.Background(),
		Pool:     pool,
		Store:    store.New(pool),
		Sim:      sim,
		Provider: client,
		Config: jobs.Config{
			Logger:            Logger(),
			Provider:          client,
			TriageBackoff:     backoff.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
			TriageMaxAttempts: 5,
			FetchPollInterval: 50 * time.Millisecond,
		},
		DeskConfig: desk.Config{Logger: Logger()},
	}
}

// ShortTimeoutProvider points the queue at the simulator through a client
// that gives up after timeout, for tests of what a timeout does. Pair it
// with a simulator mode that never answers in time (slow, with a delay far
// longer than timeout), so the outcome does not depend on the machine's load.
func (b *Bundle) ShortTimeoutProvider(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	client, err := provider.New(provider.Config{BaseURL: b.Sim.URL, Timeout: timeout})
	if err != nil {
		tb.Fatal(err)
	}
	b.Provider, b.Config.Provider = client, client
}

// AllowLoopbackWebhooks lets webhooks reach loopback, where the tests'
// receivers (httptest servers) listen: the egress policy refuses it
// otherwise.
func (b *Bundle) AllowLoopbackWebhooks() {
	b.Config.WebhookEgress.Allow = append(b.Config.WebhookEgress.Allow, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
}

// ReplySecret signs the reply and bounce addresses of WithSMTP's desk.
const ReplySecret = "the reply secret of these tests"

// BounceAddress is the envelope sender WithSMTP's desk gives outbound
// message messageID: where a delivery report on it is taken.
func BounceAddress(messageID int64) string {
	return (&mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: []byte(ReplySecret)}).BounceAddress(messageID)
}

// WithSMTP starts a fake SMTP server and points the queue's relay at it,
// with short timeouts and a backoff of 10ms to 50ms, and signs reply and
// bounce addresses with ReplySecret.
func (b *Bundle) WithSMTP(tb testing.TB) *smtptest.Server {
	tb.Helper()
	return b.WithSMTPServer(tb, smtptest.Options{})
}

// WithSMTPServer is WithSMTP with a server of these options.
func (b *Bundle) WithSMTPServer(tb testing.TB, opts smtptest.Options) *smtptest.Server {
	tb.Helper()
	srv := smtptest.StartWith(tb, opts)
	relay, err := mail.NewRelay(mail.RelayConfig{URL: srv.URL(), HeloName: "helpdesk.example.com",
		DialTimeout: 5 * time.Second, CommandTimeout: 5 * time.Second, BodyTimeout: 5 * time.Second, ReplyTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	b.Relay, b.Config.Mail, b.DeskConfig.Delivery.Sender = relay, true, relay
	b.DeskConfig.MailDomain = "helpdesk.example.com"
	b.DeskConfig.From = &mail.Address{Name: "Example Support", Address: "support@helpdesk.example.com"}
	b.DeskConfig.ReplySecret = ReplySecret
	b.Config.EmailBackoff = backoff.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}
	return srv
}

// Reply writes an agent's reply to the ticket, with its email job.
func (b *Bundle) Reply(tb testing.TB, q *jobs.Queue, ticketID, body string, cc ...string) (*store.Message, int64) {
	tb.Helper()
	p := &desk.ReplyParams{TicketID: ticketID, Author: "agent:alice", Body: body}
	for _, c := range cc {
		a, err := mail.ParseAddress(c)
		if err != nil {
			tb.Fatal(err)
		}
		p.Cc = append(p.Cc, a)
	}
	var (
		msg   *store.Message
		jobID int64
	)
	err := store.Run(b.Ctx, b.Pool, func(tx *store.Tx) (err error) {
		msg, jobID, err = b.Desk(q).CreateReplyTx(b.Ctx, tx, p)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return msg, jobID
}

// Logger logs warnings and errors, or everything with HELPDESK_TEST_LOG set.
func Logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("HELPDESK_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Desk returns the use cases over the queue, with the bundle's DeskConfig;
// the email backoff and a relay's probe lease are the queue's, as serve
// has them.
func (b *Bundle) Desk(q *jobs.Queue) *desk.Desk {
	config := b.DeskConfig
	config.Delivery.Backoff = b.Config.EmailBackoff
	if config.Delivery.Lease == 0 {
		config.Delivery.Lease = b.Config.EmailTimeout
	}
	return desk.New(b.Pool, q, config)
}

// NewQueue builds the insert-only queue on the bundle's config.
func (b *Bundle) NewQueue(tb testing.TB) *jobs.Queue {
	tb.Helper()
	q, err := jobs.NewQueue(b.Pool, b.Config)
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// NewWorkers builds the workers of q's jobs, over the bundle's desk,
// without starting them.
func (b *Bundle) NewWorkers(tb testing.TB, q *jobs.Queue) *jobs.Workers {
	tb.Helper()
	w, err := jobs.NewWorkers(b.Pool, q, b.Desk(q))
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// StartWorkers starts workers of q's jobs and stops them when the test ends.
func (b *Bundle) StartWorkers(tb testing.TB, q *jobs.Queue) *jobs.Workers {
	tb.Helper()
	w := b.NewWorkers(tb, q)
	if err := w.Start(b.Ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}

// StartQueue builds the queue and starts its workers, which stop when the
// test ends.
func (b *Bundle) StartQueue(tb testing.TB) *jobs.Queue {
	tb.Helper()
	q := b.NewQueue(tb)
	b.StartWorkers(tb, q)
	return q
}

// OpenTicket creates a customer and a ticket with its triage job.
func (b *Bundle) OpenTicket(tb testing.TB, q *jobs.Queue, subject, body string) (ticketID string, jobID int64) {
	tb.Helper()
	b.customers++
	cust, err := b.Store.InsertCustomer(b.Ctx, &store.InsertCustomerParams{
		ID: fmt.Sprintf("C-%04d", b.customers), Email: fmt.Sprintf("c%d@example.com", b.customers), Name: "Ada Customer",
	})
	if err != nil {
		tb.Fatal(err)
	}
	ticket, jobID, err := b.Desk(q).OpenTicket(b.Ctx, &desk.OpenTicketParams{CustomerID: cust.ID, Subject: subject, Body: body})
	if err != nil {
		tb.Fatal(err)
	}
	return ticket.ID, jobID
}

// WaitFor polls the job until it is in the state, failing the test after timeout.
func WaitFor(tb testing.TB, q *jobs.Queue, jobID int64, state string, timeout time.Duration) jobs.Status {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := q.Await(ctx, jobID, state)
	if err != nil {
		tb.Fatalf("%v (attempt %d)", err, s.Attempt)
	}
	return s
}

// Deref shows a last error that may be nil.
func Deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// RequireOneResultPerStep checks the ticket's ai_runs: exactly one per step,
// all under jobID, and the ticket carries what they say.
func (b *Bundle) RequireOneResultPerStep(tb testing.TB, ticketID string, jobID int64) {
	tb.Helper()
	runs, err := b.Store.ListAIRuns(b.Ctx, ticketID)
	if err != nil {
		tb.Fatal(err)
	}
	perTask := map[string]int{}
	for _, r := range runs {
		perTask[r.Task]++
		if r.JobID != jobID {
			tb.Errorf("result %s belongs to job %d, want %d", r.Task, r.JobID, jobID)
		}
	}
	for _, task := range desk.TriageTasks {
		if perTask[task] != 1 {
			tb.Errorf("ticket %s has %d %s results (all: %v), want 1", ticketID, perTask[task], task, perTask)
		}
	}
	ticket, err := b.Store.GetTicket(b.Ctx, ticketID)
	if err != nil {
		tb.Fatal(err)
	}
	vec, err := b.Store.TicketEmbedding(b.Ctx, ticketID)
	if err != nil {
		tb.Fatal(err)
	}
	if ticket.Team == nil || ticket.Priority == nil || ticket.DraftReply == nil || len(vec) != simulator.EmbeddingDims {
		tb.Errorf("ticket %s not fully triaged: team %v, priority %v, draft %v, embedding of %d",
			ticketID, ticket.Team, ticket.Priority, ticket.DraftReply != nil, len(vec))
	}
}

// TotalCalls adds up the simulator's calls by task.
func TotalCalls(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}

// LogBuffer keeps what a JSON logger writes, from any goroutine, for a
// test to read back line by line.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Logger is a JSON logger at debug level that writes into l.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Lines are the records written so far, each decoded, in order.
func (l *LogBuffer) Lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// AwaitCompleted waits until n jobs of the kind are completed and returns
// how many times it counted (each count a transaction, for a benchmark
// that counts transactions to leave out).
func AwaitCompleted(tb testing.TB, pool *pgxpool.Pool, kind string, n int) (counts int) {
	tb.Helper()
	return poll(func() bool { return CompletedJobs(tb, pool, kind) >= n })
}

// poll asks done until it says so, and returns how many times it asked.
// Each ask reads the jobs: asking more often than every 50 ms takes from
// the path measured more than it adds to the time.
func poll(done func() bool) (counts int) {
	for {
		counts++
		if done() {
			return counts
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AwaitIdle waits until no job of any kind is waiting or running: the
// work that came before, mail included, is done. It counts as
// AwaitCompleted does.
func AwaitIdle(tb testing.TB, pool *pgxpool.Pool) (counts int) {
	tb.Helper()
	return poll(func() bool {
		var busy int
		if err := pool.QueryRow(context.Background(),
			`SELECT count(*) FROM river_job WHERE state IN ('available', 'running', 'retryable')`).Scan(&busy); err != nil {
			tb.Fatal(err)
		}
		return busy == 0
	})
}

// CompletedJobs counts the completed jobs of the kind.
func CompletedJobs(tb testing.TB, pool *pgxpool.Pool, kind string) int {
	tb.Helper()
	var done int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE state = 'completed' AND kind = $1`, kind).Scan(&done); err != nil {
		tb.Fatal(err)
	}
	return done
}
