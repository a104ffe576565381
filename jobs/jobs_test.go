package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"helpdesk/jobs/provider"
	"helpdesk/jobs/provider/simulator"
	"helpdesk/store"
	"helpdesk/store/storetest"
)

// testBundle is one test's world: its own schema, simulator and queue.
type testBundle struct {
	ctx      context.Context
	pool     *pgxpool.Pool
	store    *store.Store
	sim      *simulator.Running
	provider *provider.Client
	config   Config

	customers int
}

// The provider's timeout in tests; the simulator's slow mode answers later.
const testProviderTimeout = 300 * time.Millisecond

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := storetest.NewPool(t)
	sim, err := simulator.Listen("127.0.0.1:0", simulator.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	client, err := provider.New(provider.Config{BaseURL: sim.URL, Timeout: testProviderTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{
		ctx:      context.Background(),
		pool:     pool,
		store:    store.New(pool),
		sim:      sim,
		provider: client,
		config: Config{
			Logger:            testLogger(),
			Provider:          client,
			TriageBackoff:     Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
			TriageMaxAttempts: 5,
			FetchPollInterval: 50 * time.Millisecond,
		},
	}
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("HELPDESK_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// startQueue starts a queue on the bundle's config and stops it when the test ends.
func (b *testBundle) startQueue(t *testing.T) *Queue {
	t.Helper()
	q := b.newQueue(t)
	if err := q.Start(b.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Stop(ctx)
	})
	return q
}

func (b *testBundle) newQueue(t *testing.T) *Queue {
	t.Helper()
	q, err := New(b.pool, b.config)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// openTicket creates a customer and a ticket with its triage job, not yet worked.
func (b *testBundle) openTicket(t *testing.T, q *Queue, subject, body string) (ticketID string, jobID int64) {
	t.Helper()
	b.customers++
	cust, err := b.store.InsertCustomer(b.ctx, &store.InsertCustomerParams{
		ID: fmt.Sprintf("C-%04d", b.customers), Email: fmt.Sprintf("c%d@example.com", b.customers), Name: "Ada Customer",
	})
	if err != nil {
		t.Fatal(err)
	}
	ticket, jobID, err := q.OpenTicket(b.ctx, &OpenTicketParams{CustomerID: cust.ID, Subject: subject, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return ticket.ID, jobID
}

// waitFor polls the job until it is in the state, failing the test after timeout.
func waitFor(t *testing.T, q *Queue, jobID int64, state string, timeout time.Duration) Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s, err := q.Get(context.Background(), jobID)
		if err != nil {
			t.Fatal(err)
		}
		if s.State == state {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still %s (attempt %d, last error %v) after %s, want %s",
				jobID, s.State, s.Attempt, deref(s.LastError), timeout, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// requireOneResultPerStep checks the ticket's ai_runs: exactly one per step,
// all under jobID, and the ticket carries what they say.
func (b *testBundle) requireOneResultPerStep(t *testing.T, ticketID string, jobID int64) {
	t.Helper()
	runs, err := b.store.ListAIRuns(b.ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	perTask := map[string]int{}
	for _, r := range runs {
		perTask[r.Task]++
		if r.JobID != jobID {
			t.Errorf("result %s belongs to job %d, want %d", r.Task, r.JobID, jobID)
		}
	}
	if len(runs) != len(TriageTasks) {
		t.Errorf("ticket %s has %d results %v, want one per step", ticketID, len(runs), perTask)
	}
	for _, task := range TriageTasks {
		if perTask[task] != 1 {
			t.Errorf("ticket %s has %d %s results, want 1", ticketID, perTask[task], task)
		}
	}
	ticket, err := b.store.GetTicket(b.ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	if ticket.Team == nil || ticket.Priority == nil || ticket.DraftReply == nil || len(ticket.Embedding) != simulator.EmbeddingDims {
		t.Errorf("ticket %s not fully triaged: team %v, priority %v, draft %v, embedding of %d",
			ticketID, ticket.Team, ticket.Priority, ticket.DraftReply != nil, len(ticket.Embedding))
	}
}

func totalCalls(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}

var errCrash = errors.New("simulated crash")

// crashWorker plays a worker process that dies mid-job: it locks the next
// job exactly as River's producer does (state running, attempt + 1), then
// runs the triage worker until the hook "crashes" it. Nothing reports the
// outcome to River, so the job stays running, as after a killed process.
func (b *testBundle) crashWorker(t *testing.T, hook func(w *TriageWorker)) *river.Job[TriageArgs] {
	t.Helper()
	res, err := riverpgxv5.New(b.pool).GetExecutor().JobGetAvailable(b.ctx, &riverdriver.JobGetAvailableParams{
		ClientID: "worker-1", MaxAttemptedBy: 100, MaxToLock: 1, Queue: river.QueueDefault,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 1 {
		t.Fatalf("worker 1 locked %d jobs, want 1", len(res.Jobs))
	}
	job := &river.Job[TriageArgs]{JobRow: res.Jobs[0]}
	if err := json.Unmarshal(job.EncodedArgs, &job.Args); err != nil {
		t.Fatal(err)
	}
	w := &TriageWorker{pool: b.pool, provider: b.provider, backoff: b.config.TriageBackoff, logger: b.config.Logger}
	hook(w)
	if err := w.Work(b.ctx, job); !errors.Is(err, errCrash) {
		t.Fatalf("worker 1 ended with %v, want the simulated crash", err)
	}
	return job
}

// rescueAndFinish starts worker 2 once the crashed job counts as stuck, so
// River's rescuer hands it back and worker 2 finishes it.
func (b *testBundle) rescueAndFinish(t *testing.T, job *river.Job[TriageArgs]) (*Queue, Status) {
	t.Helper()
	const rescueAfter = time.Second
	b.config.RescueStuckJobsAfter = rescueAfter
	b.config.JobTimeout = rescueAfter
	time.Sleep(time.Until(job.AttemptedAt.Add(rescueAfter + 100*time.Millisecond)))
	q := b.startQueue(t) // its rescuer runs at start; its scheduler re-queues the job within 5s
	return q, waitFor(t, q, job.ID, StateSucceeded, 15*time.Second)
}
