// Package jobs runs helpdesk's background work on River: triage of tickets, retries and dead letters.
package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"helpdesk/desk"
	"helpdesk/jobs/provider"
	"helpdesk/mail"
)

// Config is what the queue needs; zero durations and counts take the defaults.
type Config struct {
	Logger   *slog.Logger
	Provider *provider.Client // nil: the queue inserts and administers jobs but works none
	// InsertOnly is an API process's queue: it inserts every kind of job,
	// email included, for worker processes to work, and works none.
	InsertOnly bool

	TriageBackoff     Backoff // default base 2s, cap 60s
	TriageMaxAttempts int     // default 5; then the job is a dead letter
	Breaker           BreakerConfig
	// AutoAssign gives a ticket, once triage chose its team, to the team's
	// least busy agent, in the transaction of the classify result.
	AutoAssign bool
	// AutocloseAfter is how long a solved ticket stays solved before a
	// periodic job closes it; default 168h. Now is that job's clock; nil
	// is time.Now.
	AutocloseAfter time.Duration
	Now            func() time.Time

	// Jobs worked at once by this process, per queue: replies never wait
	// behind triage.
	TriageWorkers int // default 50: they mostly wait on the provider
	EmailWorkers  int // default 20

	// IdempotencyRetention is how long an Idempotency-Key is kept; a
	// periodic job prunes older ones. Default 24h.
	IdempotencyRetention time.Duration

	// Outbound email. Without a Relay, replies are refused (ErrNoRelay).
	Relay        *mail.Relay
	EmailBackoff Backoff // default base 5s, cap 15m
	// EmailMaxAttempts bounds the attempts spent on errors that concern the
	// message (4xx at RCPT or after the body, an unknown outcome); default
	// 8, then the email is a dead letter. A relay that is down or slow
	// spends none: an email is given up by its age instead.
	EmailMaxAttempts int
	EmailGiveUpAfter time.Duration // default 72h
	EmailDelayNotice time.Duration // default 30m

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
	WebhookMaxAttempts int           // default 10
	WebhookBackoff     Backoff       // default base 5s, cap 1h
	WebhookTimeout     time.Duration // default 10s
	WebhookWorkers     int           // default 10
	WebhookPoll        time.Duration // default 500ms

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
	if c.TriageBackoff.Base <= 0 {
		c.TriageBackoff.Base = 2 * time.Second
	}
	if c.TriageBackoff.Cap <= 0 {
		c.TriageBackoff.Cap = 60 * time.Second
	}
	if c.TriageMaxAttempts <= 0 {
		c.TriageMaxAttempts = 5
	}
	c.Breaker.setDefaults()
	if c.TriageWorkers <= 0 {
		c.TriageWorkers = DefaultTriageWorkers
	}
	if c.EmailWorkers <= 0 {
		c.EmailWorkers = DefaultEmailWorkers
	}
	if c.AutocloseAfter <= 0 {
		c.AutocloseAfter = 168 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.IdempotencyRetention <= 0 {
		c.IdempotencyRetention = 24 * time.Hour
	}
	if c.EmailBackoff.Base <= 0 {
		c.EmailBackoff.Base = 5 * time.Second
	}
	if c.EmailBackoff.Cap <= 0 {
		c.EmailBackoff.Cap = 15 * time.Minute
	}
	if c.EmailMaxAttempts <= 0 {
		c.EmailMaxAttempts = 8
	}
	if c.WebhookMaxAttempts <= 0 {
		c.WebhookMaxAttempts = 10
	}
	if c.WebhookBackoff.Base <= 0 {
		c.WebhookBackoff.Base = 5 * time.Second
	}
	if c.WebhookBackoff.Cap <= 0 {
		c.WebhookBackoff.Cap = time.Hour
	}
	if c.WebhookTimeout <= 0 {
		c.WebhookTimeout = 10 * time.Second
	}
	if c.WebhookWorkers <= 0 {
		c.WebhookWorkers = 10
	}
	if c.WebhookPoll <= 0 {
		c.WebhookPoll = 500 * time.Millisecond
	}
	if c.EmailGiveUpAfter <= 0 {
		c.EmailGiveUpAfter = 72 * time.Hour
	}
	if c.EmailDelayNotice <= 0 {
		c.EmailDelayNotice = 30 * time.Minute
	}
	if c.TriageTimeout <= 0 {
		c.TriageTimeout = 45 * time.Second
	}
	if c.EmailTimeout <= 0 {
		c.EmailTimeout = 90 * time.Second
	}
	if c.RescueStuckJobsAfter <= 0 {
		c.RescueStuckJobsAfter = c.LongestJobTimeout() + 30*time.Second
	}
}

// LongestJobTimeout is the longest a triage or email job may run.
func (c *Config) LongestJobTimeout() time.Duration {
	return max(c.TriageTimeout, c.EmailTimeout)
}

// DefaultFetchCooldown is 10 ms, not River's 100 ms: with River's, a
// busy queue fetched at most ten times a second and triage ended near 100
// tickets/s whatever the workers; an idle queue is not fetched more often
// for it, as fetches then come from notifications and the poll interval.
const DefaultFetchCooldown = 10 * time.Millisecond

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

// Queue is helpdesk's River client with its workers.
type Queue struct {
	Client *river.Client[pgx.Tx]

	pool      *pgxpool.Pool
	config    Config
	triage    *TriageWorker
	email     *EmailWorker
	autoclose *AutocloseWorker

	stopEvents func()        // ends the subscription to River's job events
	eventsDone chan struct{} // closed when the events are all read

	stopDispatch func()        // ends the webhook dispatcher
	dispatchDone chan struct{} // closed when it has ended
}

// Autoclose runs the periodic autoclose job's work now, by the queue's
// clock; for tests and tools.
func (q *Queue) Autoclose(ctx context.Context) error {
	if q.autoclose == nil {
		return errors.New("jobs: a queue without a provider runs no periodic jobs")
	}
	return q.autoclose.Work(ctx, nil)
}

// New builds the queue. It works jobs only after Start.
func New(pool *pgxpool.Pool, config Config) (*Queue, error) {
	config.setDefaults()
	if config.RescueStuckJobsAfter <= config.LongestJobTimeout() {
		return nil, fmt.Errorf("jobs: RescueStuckJobsAfter (%s) must be longer than the longest job timeout (%s)",
			config.RescueStuckJobsAfter, config.LongestJobTimeout())
	}
	q := &Queue{pool: pool, config: config}

	// Without a provider the queue only inserts and administers jobs, as the
	// CLI does; River then needs neither workers nor queues.
	var (
		workers  *river.Workers
		queues   map[string]river.QueueConfig
		periodic []*river.PeriodicJob
	)
	if config.Provider != nil && !config.InsertOnly {
		q.triage = &TriageWorker{pool: pool, provider: config.Provider, backoff: config.TriageBackoff, logger: config.Logger,
			timeout: config.TriageTimeout, autoAssign: config.AutoAssign, gate: &providerGate{pool: pool, name: config.Provider.Name(), breaker: config.Breaker,
				lease: config.Provider.Timeout() + 5*time.Second, logger: config.Logger}}
		workers = river.NewWorkers()
		if err := river.AddWorkerSafely(workers, q.triage); err != nil {
			return nil, fmt.Errorf("register triage worker: %w", err)
		}
		if err := river.AddWorkerSafely(workers, &pruneWorker{pool: pool, retention: config.IdempotencyRetention, logger: config.Logger}); err != nil {
			return nil, fmt.Errorf("register prune worker: %w", err)
		}
		q.autoclose = &AutocloseWorker{pool: pool, after: config.AutocloseAfter, now: config.Now, logger: config.Logger}
		if err := river.AddWorkerSafely(workers, q.autoclose); err != nil {
			return nil, fmt.Errorf("register autoclose worker: %w", err)
		}
		if config.Relay != nil {
			email := &EmailWorker{pool: pool, relay: config.Relay,
				backoff: config.EmailBackoff, logger: config.Logger, timeout: config.EmailTimeout,
				giveUpAfter: config.EmailGiveUpAfter, delayNotice: config.EmailDelayNotice}
			q.email = email
			if err := river.AddWorkerSafely(workers, email); err != nil {
				return nil, fmt.Errorf("register email worker: %w", err)
			}
			if err := river.AddWorkerSafely(workers, &NotifyWorker{email: email}); err != nil {
				return nil, fmt.Errorf("register notify worker: %w", err)
			}
		}
		if err := river.AddWorkerSafely(workers, &WebhookWorker{pool: pool, client: &http.Client{}, backoff: config.WebhookBackoff,
			timeout: config.WebhookTimeout}); err != nil {
			return nil, fmt.Errorf("register webhook worker: %w", err)
		}
		queues = map[string]river.QueueConfig{
			QueueTriage:      {MaxWorkers: config.TriageWorkers},
			QueueEmail:       {MaxWorkers: config.EmailWorkers},
			QueueWebhooks:    {MaxWorkers: config.WebhookWorkers},
			QueueMaintenance: {MaxWorkers: 2},
			// Jobs that a process of an older version inserts during an upgrade.
			river.QueueDefault: {MaxWorkers: 2},
		}
		periodic = []*river.PeriodicJob{pruneSchedule(config.IdempotencyRetention), autocloseSchedule(config.AutocloseAfter)}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:               config.Logger,
		Queues:               queues,
		Workers:              workers,
		PeriodicJobs:         periodic,
		RetryPolicy:          config.TriageBackoff,
		MaxAttempts:          config.TriageMaxAttempts,
		FetchPollInterval:    config.FetchPollInterval,
		FetchCooldown:        cmp.Or(config.FetchCooldown, DefaultFetchCooldown),
		RescueStuckJobsAfter: config.RescueStuckJobsAfter,
		JobTimeout:           min(maintenanceTimeout, config.LongestJobTimeout()), // the triage and email workers set their own
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	q.Client = client
	return q, nil
}

// Start starts fetching and working jobs.
func (q *Queue) Start(ctx context.Context) error {
	if q.triage == nil {
		return errors.New("jobs: a queue without a provider cannot work jobs")
	}
	events, cancel := q.Client.SubscribeConfig(&river.SubscribeConfig{ChanSize: 10_000, Kinds: []river.EventKind{
		river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled, river.EventKindJobSnoozed}})
	q.stopEvents, q.eventsDone = cancel, make(chan struct{})
	go func() {
		defer close(q.eventsDone)
		for e := range events {
			q.observe(e)
		}
	}()
	if err := q.Client.Start(ctx); err != nil {
		cancel()
		return err
	}
	dispatchCtx, stopDispatch := context.WithCancel(ctx)
	q.stopDispatch, q.dispatchDone = stopDispatch, make(chan struct{})
	go func() {
		defer close(q.dispatchDone)
		q.runWebhookDispatcher(dispatchCtx)
	}()
	return nil
}

// Stop stops fetching new jobs and waits for running ones until ctx ends;
// then it cancels what still runs, and River makes those jobs available
// again without spending their attempt.
func (q *Queue) Stop(ctx context.Context) error {
	defer q.endEvents()
	if q.stopDispatch != nil {
		q.stopDispatch()
		<-q.dispatchDone
	}
	err := q.Client.Stop(ctx)
	if err == nil {
		return nil
	}
	q.config.Logger.Warn("grace period over; cancelling running jobs", slog.Any("error", err))
	cancelCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Client.StopAndCancel(cancelCtx); err != nil {
		return fmt.Errorf("stop queue: %w", err)
	}
	return nil
}

// EnqueueTriageTx inserts a triage job for the ticket in the caller's
// transaction; desk calls it.
func (q *Queue) EnqueueTriageTx(ctx context.Context, tx pgx.Tx, ticketID string) (int64, error) {
	res, err := q.Client.InsertTx(ctx, tx, TriageArgs{TicketID: ticketID}, &river.InsertOpts{MaxAttempts: q.config.TriageMaxAttempts, Queue: QueueTriage})
	if err != nil {
		return 0, fmt.Errorf("enqueue triage of %s: %w", ticketID, err)
	}
	return res.Job.ID, nil
}

// EnqueueEmailTx inserts the job that delivers an outbound message, in the
// caller's transaction; desk calls it. Without a relay nothing would send
// it: desk.ErrNoRelay.
func (q *Queue) EnqueueEmailTx(ctx context.Context, tx pgx.Tx, messageID int64, ticketID string) (int64, error) {
	if q.config.Relay == nil && !q.config.InsertOnly {
		return 0, desk.ErrNoRelay
	}
	res, err := q.Client.InsertTx(ctx, tx, EmailArgs{MessageID: messageID, TicketID: ticketID}, &river.InsertOpts{MaxAttempts: q.config.EmailMaxAttempts, Queue: QueueEmail})
	if err != nil {
		return 0, fmt.Errorf("enqueue email %d: %w", messageID, err)
	}
	return res.Job.ID, nil
}
