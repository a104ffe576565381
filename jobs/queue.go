// Package jobs runs helpdesk's background work on River: the queue the use cases insert into, and the workers that map their answers onto River's control flow.
//
// Construction runs one way: NewQueue is an insert-only River client, which
// desk.New takes as its Enqueuer and the API as the jobs' administration;
// NewWorkers then builds the River client that works the jobs, holding the
// *desk.Desk whose use cases each worker calls.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/egress"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/settings"
	"github.com/helpdesk-dev/helpdesk/store"
)

// Config is what the queue and the workers need; zero durations and
// counts take the defaults.
type Config struct {
	Logger   *slog.Logger
	Provider *provider.Client // the AI provider triage calls; nil: triage is worked by another process

	TriageBackoff     backoff.Backoff // default base 2s, cap 60s
	TriageMaxAttempts int             // default 5; then the job is a dead letter
	Breaker           BreakerConfig
	// AutocloseAfter is how long a solved ticket stays solved before a
	// periodic job closes it; default 168h. Now is that job's clock; nil
	// is time.Now.
	AutocloseAfter time.Duration
	Now            func() time.Time

	// Jobs worked at once by a worker process, per queue: replies never
	// wait behind triage.
	TriageWorkers int // default 50: they mostly wait on the provider
	EmailWorkers  int // default 20

	// Mail: mail goes out (the workers' desk has a sender), so email jobs
	// may be queued; without it, queueing one is desk.ErrNoRelay.
	Mail         bool
	EmailBackoff backoff.Backoff // default base 5s, cap 15m
	// EmailMaxAttempts bounds the attempts spent on errors that concern the
	// message (4xx at RCPT or after the body, an unknown outcome); default
	// 8, then the email is a dead letter. A relay that is down or slow
	// spends none: an email is given up by its age instead.
	EmailMaxAttempts int

	// How long one attempt of a job may run before River cancels it. They
	// bound how soon a job whose process died is handed to another.
	TriageTimeout time.Duration // default 45s: three provider calls and their saves
	EmailTimeout  time.Duration // default 90s: every SMTP phase of one attempt together

	// RescueStuckJobsAfter is when River's rescuer hands a job that is still
	// "running" (its process died) to another worker. Default: the longest
	// job timeout plus 30s; it must exceed every job timeout, so that a
	// live attempt is never worked twice at once.
	RescueStuckJobsAfter time.Duration

	// Webhook deliveries: attempts, backoff, the receiver's time to answer,
	// and how often recorded events are turned into deliveries.
	WebhookMaxAttempts int             // default 10
	WebhookBackoff     backoff.Backoff // default base 5s, cap 1h
	WebhookTimeout     time.Duration   // default 10s
	WebhookWorkers     int             // default 10
	WebhookPoll        time.Duration   // default 500ms
	// WebhookEgress is where deliveries may connect: public addresses and
	// the networks it allows; the API refuses to register what it refuses.
	WebhookEgress egress.Policy

	// How River fetches: at most every FetchCooldown while jobs come in
	// (LISTEN/NOTIFY wakes it), every FetchPollInterval when none do.
	// Defaults DefaultFetchCooldown and River's 1s.
	FetchPollInterval time.Duration
	FetchCooldown     time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	settings.Defaults(c.Settings())
	setDuration(&c.TriageTimeout, 45*time.Second)
	setDuration(&c.RescueStuckJobsAfter, c.LongestJobTimeout()+30*time.Second)
	// Webhook deliveries are not configured: their receivers are the
	// ones who wait.
	setInt(&c.WebhookMaxAttempts, 10)
	setDuration(&c.WebhookBackoff.Base, 5*time.Second)
	setDuration(&c.WebhookBackoff.Cap, time.Hour)
	setDuration(&c.WebhookTimeout, 10*time.Second)
	setInt(&c.WebhookWorkers, 10)
	setDuration(&c.WebhookPoll, 500*time.Millisecond)
	setDuration(&c.FetchCooldown, DefaultFetchCooldown)
}

func setDuration(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

func setInt(n *int, v int) {
	if *n <= 0 {
		*n = v
	}
}

// LongestJobTimeout is the longest a triage or email job may run.
func (c *Config) LongestJobTimeout() time.Duration {
	return max(c.TriageTimeout, c.EmailTimeout)
}

// DefaultFetchCooldown is River's least, 1 ms, not its 100 ms: with
// River's, a busy queue fetched at most ten times a second and triage ended
// near 100 tickets/s whatever the workers; at 10 ms, the 20 email workers
// waited on the next fetch, and the whole email path ran at 800–920 emails/s
// on two cores against 1,270–1,310 at 1 ms, for no more CPU an email
// (BenchmarkEmailThroughput/WholePathAsShipped). It costs no more
// fetches: River fetches only when workers are free, as many jobs as there
// are free workers, so a busy queue makes at most one fetch a job, as an
// idle queue does, whose fetches come from notifications and the poll
// interval.
const DefaultFetchCooldown = time.Millisecond

// Workers a process runs on each queue unless told otherwise: triage jobs
// mostly wait on the provider, email jobs on the relay.
const (
	DefaultTriageWorkers = 50
	DefaultEmailWorkers  = 20
)

// The River queues. Each kind of job inserts into its own.
const (
	QueueTriage      = "triage"
	QueueEmail       = "email"       // replies, and every other mail the service sends
	QueueMaintenance = "maintenance" // periodic jobs
)

// Queue is an insert-only River client: what the use cases enqueue with
// (it is their desk.Enqueuer), and the jobs' administration (state, dead
// letters, retry) for the API and the CLI. It works no job.
type Queue struct {
	Client *river.Client[pgx.Tx]

	pool   *pgxpool.Pool
	config Config
}

// NewQueue builds the insert-only client.
func NewQueue(pool *pgxpool.Pool, config Config) (*Queue, error) {
	config.setDefaults()
	// River inserts and administers jobs without queues or workers.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: config.Logger, MaxAttempts: config.TriageMaxAttempts,
		Middleware: []rivertype.Middleware{river.JobInsertMiddlewareFunc(insertWithTakenIDs)}})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return &Queue{Client: client, pool: pool, config: config}, nil
}

// QueueTriageAtCommit has tx insert the triage job of the ticket, with the
// id taken for it (store.Batch.NextJobID), with its commit.
func (q *Queue) QueueTriageAtCommit(tx *store.Tx, ticketID string, jobID int64, quiet bool) {
	q.atCommit(tx, jobID, TriageArgs{TicketID: ticketID, Quiet: quiet}, &river.InsertOpts{MaxAttempts: q.config.TriageMaxAttempts, Queue: QueueTriage})
}

// QueueEmailAtCommit has tx insert, with its commit, the job that delivers
// a stored mail whose bytes are kept with it. When no mail goes out nothing
// would send it: desk.ErrNoRelay, and nothing is queued.
func (q *Queue) QueueEmailAtCommit(tx *store.Tx, messageID int64, ticketID string, jobID int64) error {
	return q.mailAtCommit(tx, jobID, EmailArgs{MessageID: messageID, TicketID: ticketID})
}

// QueueReplyAtCommit has tx insert, with its commit, the job that renders
// and delivers an agent's reply; desk.ErrNoRelay as QueueEmailAtCommit.
func (q *Queue) QueueReplyAtCommit(tx *store.Tx, messageID int64, ticketID string, jobID int64) error {
	return q.mailAtCommit(tx, jobID, EmailArgs{MessageID: messageID, TicketID: ticketID, Render: true})
}

// QueueNotifyAtCommit has tx insert, with its commit, the job that
// delivers a stored mail to an agent; desk.ErrNoRelay as QueueEmailAtCommit.
func (q *Queue) QueueNotifyAtCommit(tx *store.Tx, messageID int64, ticketID string, jobID int64) error {
	return q.mailAtCommit(tx, jobID, NotifyArgs{MessageID: messageID, TicketID: ticketID})
}

func (q *Queue) mailAtCommit(tx *store.Tx, jobID int64, args river.JobArgs) error {
	if !q.config.Mail {
		return desk.ErrNoRelay
	}
	q.atCommit(tx, jobID, args, &river.InsertOpts{MaxAttempts: q.config.EmailMaxAttempts, Queue: QueueEmail})
	return nil
}

// atCommitJobs are the jobs a transaction inserts with its commit, each
// with the id taken for it.
type atCommitJobs struct {
	params []river.InsertManyParams
	ids    []int64
}

// atCommitKey names a transaction's atCommitJobs of one queue.
type atCommitKey struct{ q *Queue }

// atCommit adds a job to those tx inserts with its commit: all of them in
// one statement of River's (InsertManyTx), the transaction's last, with
// COMMIT behind it in the same trip (store.Tx.CommitWith). Rows name each
// job by the id taken for it before it exists, and the inserts cost no
// trip of their own.
func (q *Queue) atCommit(tx *store.Tx, jobID int64, args river.JobArgs, opts *river.InsertOpts) {
	jobs := tx.Value(atCommitKey{q}, func() any {
		jobs := &atCommitJobs{}
		tx.CommitWith(isRiverInsert, func(ctx context.Context, pgxTx pgx.Tx) error { return q.insertAtCommit(ctx, pgxTx, jobs) })
		return jobs
	}).(*atCommitJobs)
	jobs.params = append(jobs.params, river.InsertManyParams{Args: args, InsertOpts: opts})
	jobs.ids = append(jobs.ids, jobID)
}

func (q *Queue) insertAtCommit(ctx context.Context, pgxTx pgx.Tx, jobs *atCommitJobs) error {
	_, err := q.Client.InsertManyTx(context.WithValue(ctx, takenIDsKey{}, jobs.ids), pgxTx, jobs.params)
	if err != nil && store.Committed(pgxTx) {
		// What River does after its insert, once the jobs are committed, is
		// to wake the queues' workers, who look for jobs on their own too:
		// the jobs are there.
		q.config.Logger.WarnContext(ctx, "jobs inserted; River's notification of them failed",
			slog.Any("job_ids", jobs.ids), slog.String("error", err.Error()))
		return nil
	}
	if err != nil {
		return fmt.Errorf("enqueue %d jobs: %w", len(jobs.ids), err)
	}
	return nil
}

// takenIDsKey carries the ids taken for the jobs of an insert to
// insertWithTakenIDs.
type takenIDsKey struct{}

// insertWithTakenIDs gives each job being inserted the id taken for it
// (Queue.atCommit), which River's insert writes in place of one of its own.
func insertWithTakenIDs(ctx context.Context, params []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	if ids, ok := ctx.Value(takenIDsKey{}).([]int64); ok && len(ids) == len(params) {
		for i := range params {
			params[i].ID = &ids[i]
		}
	}
	return doInner(ctx)
}

// isRiverInsert knows River's insert of jobs (its driver names each query
// in a comment), behind which a transaction may commit.
func isRiverInsert(sql string) bool {
	return strings.Contains(sql, "-- name: JobInsertFastMany ")
}

// EnqueueSLATx queues a look at a ticket's clocks, now or at at; a look
// at a time is queued once however often it is asked for.
func (q *Queue) EnqueueSLATx(ctx context.Context, tx *store.Tx, ticketID string, at time.Time) (int64, error) {
	opts := &river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: q.config.TriageMaxAttempts}
	args := SLAArgs{TicketID: ticketID}
	if !at.IsZero() {
		args.At = at.UTC()
		opts.ScheduledAt = at
		opts.UniqueOpts = river.UniqueOpts{ByArgs: true}
	}
	return q.insert(ctx, tx, args, opts)
}

func (q *Queue) insert(ctx context.Context, tx *store.Tx, args river.JobArgs, opts *river.InsertOpts) (int64, error) {
	pgxTx, err := tx.Pgx(ctx)
	if err != nil {
		return 0, err
	}
	res, err := q.Client.InsertTx(ctx, pgxTx, args, opts)
	if err != nil {
		return 0, fmt.Errorf("enqueue %s: %w", args.Kind(), err)
	}
	return res.Job.ID, nil
}

// ProviderState returns the shared state of the queue's provider: its
// breaker and its pace.
func (q *Queue) ProviderState(ctx context.Context) (*store.Provider, error) {
	if q.config.Provider == nil {
		return nil, fmt.Errorf("provider: %w", store.ErrNotFound)
	}
	return store.New(q.pool).GetProvider(ctx, q.config.Provider.Name())
}

// retryBudget is a kind's whole attempt budget, as this process is
// configured.
func (q *Queue) retryBudget(kind string, had int) int {
	switch kind {
	case TriageArgs{}.Kind():
		return q.config.TriageMaxAttempts
	case NotifyArgs{}.Kind(), EmailArgs{}.Kind():
		return q.config.EmailMaxAttempts
	}
	return had
}

// Interface check: the use cases enqueue with a Queue.
var _ desk.Enqueuer = (*Queue)(nil)
