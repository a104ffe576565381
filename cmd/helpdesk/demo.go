//go:build demo

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	gomail "github.com/emersion/go-message/mail"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func init() { demoCommands["demo"] = cmdDemo }

func cmdDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "demo [-dir DIR]",
		"Shows both kinds of duplicate made harmless, on a scratch database that it creates and drops:\n"+
			"the same request sent twice with one Idempotency-Key, and the same job delivered twice after a\n"+
			"worker crashed. The API, two workers and the simulated provider run in this process.\n"+
			"Exits non-zero if any count differs from what it should be.", getenv, stdout, stderr)
	db := databaseSetting(fs)
	dir := fs.String("dir", "", "a folder with customers.csv and agents.csv; default the demo's, built in")
	if err := fs.parseNoArgs(args); err != nil {
		return err
	}
	if db.URL == "" {
		return usageErrorf("DATABASE_URL (-database-url) is not set")
	}
	dbURL := db.URL
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	_, err := runDemo(ctx, dbURL, *dir, stdout, logger)
	return err
}

// demoResult is what the demo saw, for its test.
type demoResult struct {
	First, Second        createAnswer
	AfterRequests        store.Counts
	AfterCrash, AfterAll store.Counts
	CrashState, EndState jobs.Status
	ProviderCalls        map[string]int
	Reply                replyAnswer
	Deliveries           []threadHeaders
}

// threadHeaders are a delivered mail's thread headers, read back with go-message.
type threadHeaders struct {
	MessageID  string
	InReplyTo  string
	References []string
	Raw        []byte
}

func deliveredHeaders(raw []byte) (threadHeaders, error) {
	r, err := gomail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		return threadHeaders{}, fmt.Errorf("read back the sent mail: %w", err)
	}
	h := threadHeaders{Raw: raw}
	id, err1 := r.Header.MessageID()
	irt, err2 := r.Header.MsgIDList("In-Reply-To")
	refs, err3 := r.Header.MsgIDList("References")
	if err := errors.Join(err1, err2, err3); err != nil {
		return h, fmt.Errorf("read back the sent mail's headers: %w", err)
	}
	h.MessageID = "<" + id + ">"
	if len(irt) > 0 {
		h.InReplyTo = "<" + irt[0] + ">"
	}
	for _, ref := range refs {
		h.References = append(h.References, "<"+ref+">")
	}
	return h, nil
}

// errDemoMismatch marks a count that differs from what the demo promises.
var errDemoMismatch = errors.New("the demo saw a duplicate")

func runDemo(ctx context.Context, serverURL, dir string, out io.Writer, logger *slog.Logger) (*demoResult, error) {
	start := time.Now()
	pool, drop, err := scratchPool(ctx, serverURL, logger)
	if err != nil {
		return nil, err
	}
	defer drop()
	source, _, err := demoSource(dir)
	if err != nil {
		return nil, err
	}
	if _, _, err := loadData(ctx, pool, source, false); err != nil {
		return nil, err
	}

	sim, err := simulator.Listen("127.0.0.1:0", simulator.DefaultSettings())
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	client, err := provider.New(provider.Config{BaseURL: sim.URL, Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	// The fake SMTP server reads the demo's first email and drops the
	// connection before answering: the lost acknowledgement of Part 3.
	smtpServer, err := smtptest.Listen()
	if err != nil {
		return nil, err
	}
	defer smtpServer.Close()
	relay, err := mail.NewRelay(mail.RelayConfig{URL: smtpServer.URL(), HeloName: "helpdesk.example.com",
		CommandTimeout: 2 * time.Second, BodyTimeout: 2 * time.Second, ReplyTimeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	// Worker 2 treats a job running for over two seconds as stuck (a job
	// may run for two), so the demo does not wait serve's two minutes.
	emailBackoff := backoff.Backoff{Base: 200 * time.Millisecond, Cap: time.Second}
	config := jobs.Config{Logger: logger, Provider: client, FetchPollInterval: 100 * time.Millisecond,
		RescueStuckJobsAfter: 2500 * time.Millisecond, TriageTimeout: 2 * time.Second, EmailTimeout: 2 * time.Second,
		Mail: true, EmailBackoff: emailBackoff}
	queue, err := jobs.NewQueue(pool, config)
	if err != nil {
		return nil, err
	}
	replies := &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: []byte("the demo's reply secret, not for use")}
	from := &mail.Address{Name: "Example Support", Address: "support@helpdesk.example.com"}
	cases := desk.New(pool, queue, desk.Config{MailDomain: "helpdesk.example.com", From: from, ReplyAddresses: replies,
		Logger: logger, Delivery: desk.DeliveryConfig{Sender: relay, Backoff: emailBackoff, Lease: config.EmailTimeout}})
	workers, err := jobs.NewWorkers(pool, queue, cases)
	if err != nil {
		return nil, err
	}
	apiURL, stopAPI, err := startDemoAPI(pool, queue, cases, logger)
	if err != nil {
		return nil, err
	}
	defer stopAPI()
	key, err := createAPIKey(ctx, store.New(pool), vocab.Customer("C-0022"))
	if err != nil {
		return nil, err
	}

	res := &demoResult{}
	var mismatches []string
	expect := func(what string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			mismatches = append(mismatches, fmt.Sprintf("%s: got %v, want %v", what, got, want))
		}
	}
	counts := func() store.Counts {
		c, cerr := store.New(pool).CountRows(ctx, jobs.TriageArgs{}.Kind())
		if cerr != nil {
			err = cerr
		}
		return c
	}

	fmt.Fprintln(out, "Part 1: the same request twice, with the same Idempotency-Key")
	body := `{"customer_id": "C-0022", "subject": "Charged twice", "body": "My card was charged twice for invoice 1042. Please refund one."}`
	if res.First, err = postTicket(ctx, apiURL, key, "demo-key-0001", body); err != nil {
		return nil, err
	}
	if res.Second, err = postTicket(ctx, apiURL, key, "demo-key-0001", body); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  first:  %d ticket %s job %d\n", res.First.Status, res.First.TicketID, res.First.JobID)
	fmt.Fprintf(out, "  second: %d ticket %s job %d%s\n", res.Second.Status, res.Second.TicketID, res.Second.JobID,
		map[bool]string{true: " (Idempotent-Replayed: true)"}[res.Second.Replayed])
	res.AfterRequests = counts()
	printCounts(out, "in the database:", res.AfterRequests)
	fmt.Fprintf(out, "  stopped by: %s, whose INSERT … ON CONFLICT on idempotency_keys (actor, key) lets one request claim the key\n",
		funcLocation((*store.Batch).ClaimIdempotencyKey))
	expect("second answer's ticket", res.Second.TicketID, res.First.TicketID)
	expect("second answer's job", res.Second.JobID, res.First.JobID)
	expect("second answer replayed", res.Second.Replayed, true)
	expect("counts after the requests", res.AfterRequests, store.Counts{Tickets: 1, Jobs: 1, AIResults: 0})

	fmt.Fprintln(out, "Part 2: the same job delivered twice (a simulated crash)")
	job, err := workers.SimulateCrash(ctx, jobs.CrashPoint{Task: desk.TaskEmbed})
	if err != nil {
		return nil, err
	}
	if res.CrashState, err = queue.Get(ctx, job.ID); err != nil {
		return nil, err
	}
	res.AfterCrash = counts()
	fmt.Fprintf(out, "  after worker-1 (crashed before finishing): job %s, attempt %d;", res.CrashState.State, res.CrashState.Attempt)
	printCounts(out, "", res.AfterCrash)

	// Worker 2 starts once the job counts as stuck; River's rescuer hands it back.
	time.Sleep(time.Until(job.AttemptedAt.Add(config.RescueStuckJobsAfter + 100*time.Millisecond)))
	if err := workers.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = workers.Stop(stopCtx)
	}()
	if res.EndState, err = awaitJob(ctx, queue, job.ID, jobs.StateSucceeded, 12*time.Second); err != nil {
		return nil, err
	}
	res.AfterAll = counts()
	res.ProviderCalls = sim.Calls(job.Args.TicketID)
	fmt.Fprintf(out, "  after worker-2: job %s, attempt %d;", res.EndState.State, res.EndState.Attempt)
	printCounts(out, "", res.AfterAll)
	total := 0
	for _, n := range res.ProviderCalls {
		total += n
	}
	fmt.Fprintf(out, "  provider calls for this job: %d (classify %d, draft_reply %d, embed %d)\n", total,
		res.ProviderCalls[desk.TaskClassify], res.ProviderCalls[desk.TaskDraftReply], res.ProviderCalls[desk.TaskEmbed])
	fmt.Fprintf(out, "  stopped by: %s, which skips the steps the job has results for,\n", funcLocation((*jobs.TriageWorker).Work))
	fmt.Fprintf(out, "              and %s, whose UNIQUE (job_id, task) saves one result per step\n",
		funcLocation((*store.Batch).InsertAIRun))
	if err != nil {
		return nil, err
	}
	expect("job state after the crash", res.CrashState.State, jobs.StateRunning)
	expect("attempt after the crash", res.CrashState.Attempt, 1)
	expect("counts after the crash", res.AfterCrash, store.Counts{Tickets: 1, Jobs: 1, AIResults: 2})
	expect("attempt that finished the job", res.EndState.Attempt, 2)
	expect("counts at the end", res.AfterAll, store.Counts{Tickets: 1, Jobs: 1, AIResults: 3})
	expect("provider calls", total, 3)

	// The agents' notifications of part 2 go out first; then the relay loses
	// the acknowledgement of the next mail, which is part 3's reply.
	if err := awaitIdle(ctx, pool, jobs.NotifyArgs{}.Kind()); err != nil {
		return nil, err
	}
	smtpServer.Script(smtptest.Fault{DropAfterBody: true})
	fmt.Fprintln(out, "Part 3: an agent's reply whose first send loses its acknowledgement")
	agentKey, err := createAPIKey(ctx, store.New(pool), vocab.Agent("alice"))
	if err != nil {
		return nil, err
	}
	if res.Reply, err = postReply(ctx, apiURL, agentKey, res.First.TicketID, "reply-key-0001",
		`{"body": "Hello Ada,\n\nwe refunded the second charge of invoice 1042.\n\nAlice"}`); err != nil {
		return nil, err
	}
	if _, err := awaitJob(ctx, queue, res.Reply.JobID, jobs.StateSucceeded, 10*time.Second); err != nil {
		return nil, err
	}
	for i, d := range deliveriesTo(smtpServer, "viktor.horvat@example.com") {
		h, err := deliveredHeaders(d.Raw)
		if err != nil {
			return nil, err
		}
		res.Deliveries = append(res.Deliveries, h)
		label := map[bool]string{true: "delivery 1 (acknowledgement lost)", false: fmt.Sprintf("delivery %d", i+1)}[i == 0]
		fmt.Fprintf(out, "  %s:\n    Message-ID:  %s\n    In-Reply-To: %s\n    References:  %s\n",
			label, h.MessageID, h.InReplyTo, strings.Join(h.References, " "))
	}
	if len(res.Deliveries) == 2 {
		fmt.Fprintf(out, "  same Message-ID: %v; same bytes: %v; cites itself: %v\n",
			res.Deliveries[0].MessageID == res.Deliveries[1].MessageID, bytes.Equal(res.Deliveries[0].Raw, res.Deliveries[1].Raw),
			slices.Contains(append(res.Deliveries[1].References, res.Deliveries[1].InReplyTo), res.Deliveries[1].MessageID))
	}
	fmt.Fprintf(out, "  stopped by: %s, which renders the bytes once and sends them on every retry,\n", funcLocation((*desk.Desk).Deliver))
	fmt.Fprintf(out, "              and %s, whose query leaves the reply itself out (id <> reply)\n", funcLocation((*store.Batch).ReplyThread))
	expect("deliveries of the reply", len(res.Deliveries), 2)
	if len(res.Deliveries) == 2 {
		a, b := res.Deliveries[0], res.Deliveries[1]
		expect("the retry's Message-ID", b.MessageID, a.MessageID)
		expect("the stored Message-ID", a.MessageID, res.Reply.EmailMessageID)
		expect("the retry's bytes are the first's", bytes.Equal(a.Raw, b.Raw), true)
		for _, h := range res.Deliveries {
			expect("the reply cites itself", slices.Contains(append(h.References, h.InReplyTo), h.MessageID), false)
		}
	}

	if err := agentRoundTrip(ctx, out, pool, queue, cases, replies, smtpServer, expect, logger); err != nil {
		return nil, err
	}

	fmt.Fprintf(out, "Done in %.1fs.\n", time.Since(start).Seconds())
	if len(mismatches) > 0 {
		return res, fmt.Errorf("%w:\n  %s", errDemoMismatch, strings.Join(mismatches, "\n  "))
	}
	return res, nil
}

func printCounts(out io.Writer, prefix string, c store.Counts) {
	if prefix != "" {
		prefix = "  " + prefix
	}
	fmt.Fprintf(out, "%s tickets %d, jobs %d, AI results %d\n", prefix, c.Tickets, c.Jobs, c.AIResults)
}

// funcLocation names a function and where it starts, relative to the
// repository, so the demo points at the code that exists, not at a comment
// that may have drifted.
func funcLocation(f any) string {
	fn := runtime.FuncForPC(reflect.ValueOf(f).Pointer())
	file, line := fn.FileLine(fn.Entry())
	_, self, _, _ := runtime.Caller(0) // <root>/cmd/helpdesk/demo.go
	if rel, err := filepath.Rel(filepath.Dir(filepath.Dir(filepath.Dir(self))), file); err == nil && !strings.HasPrefix(rel, "..") {
		file = rel
	} else {
		file = strings.TrimPrefix(file, "github.com/helpdesk-dev/helpdesk/") // built with -trimpath
	}
	name := fn.Name()
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return fmt.Sprintf("%s:%d %s", file, line, name)
}

// scratchPool creates a scratch database, migrates it and connects to it;
// drop closes the pool and drops the database.
func scratchPool(ctx context.Context, serverURL string, logger *slog.Logger) (*pgxpool.Pool, func(), error) {
	dbURL, drop, err := scratchDatabase(ctx, serverURL, logger)
	if err != nil {
		return nil, nil, err
	}
	pool, err := store.Open(ctx, dbURL, 0)
	if err != nil {
		drop()
		return nil, nil, err
	}
	if _, err := store.MigrateUp(ctx, pool); err != nil {
		pool.Close()
		drop()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); drop() }, nil
}

// scratchDatabase creates a database of its own next to the one at
// serverURL and returns its URL and a function that drops it, or says
// which database it left behind and why.
func scratchDatabase(ctx context.Context, serverURL string, logger *slog.Logger) (string, func(), error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "helpdesk_demo_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("reach PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return "", nil, fmt.Errorf("create scratch database: %w", err)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	drop := func() {
		// Its own time, not the run's: an interrupted run drops it too.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverURL)
		if err == nil {
			_, err = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
			conn.Close(ctx)
		}
		if err != nil {
			logger.Warn("the scratch database is left behind; drop it with DROP DATABASE", "database", name, "error", err)
		}
	}
	return u.String(), drop, nil
}

func startDemoAPI(pool *pgxpool.Pool, queue *jobs.Queue, cases *desk.Desk, logger *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: api.New(api.Config{Logger: logger, Pool: pool, Queue: queue, Desk: cases}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// awaitJob waits at most timeout for the job to reach state.
func awaitJob(ctx context.Context, q *jobs.Queue, id int64, state string, timeout time.Duration) (jobs.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return q.Await(ctx, id, state)
}
