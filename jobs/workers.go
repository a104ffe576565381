package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/helpdesk-dev/helpdesk/desk"
)

// Workers is the River client that works the jobs: triage (with the
// provider's breaker and pace), email, notifications, webhooks and the
// periodic maintenance. Each worker calls a use case of the desk it holds
// and maps its answer onto River's control flow.
type Workers struct {
	client *river.Client[pgx.Tx]
	pool   *pgxpool.Pool
	queue  *Queue
	desk   *desk.Desk
	config Config

	triage    *TriageWorker
	autoclose *AutocloseWorker

	stopEvents func()        // ends the subscription to River's job events
	eventsDone chan struct{} // closed when the events are all read

	stopDispatch func()        // ends the webhook dispatcher
	dispatchDone chan struct{} // closed when it has ended
}

// NewWorkers builds the working client over the queue's jobs, for d's use
// cases, with the queue's configuration. It works jobs only after Start.
func NewWorkers(pool *pgxpool.Pool, queue *Queue, d *desk.Desk) (*Workers, error) {
	config := queue.config
	if config.Provider == nil {
		return nil, errors.New("jobs: workers need a provider to triage with")
	}
	if config.RescueStuckJobsAfter <= config.LongestJobTimeout() {
		return nil, fmt.Errorf("jobs: RescueStuckJobsAfter (%s) must be longer than the longest job timeout (%s)",
			config.RescueStuckJobsAfter, config.LongestJobTimeout())
	}
	w := &Workers{pool: pool, queue: queue, desk: d, config: config}
	w.triage = &TriageWorker{desk: d, provider: config.Provider, backoff: config.TriageBackoff, logger: config.Logger,
		timeout: config.TriageTimeout, gate: &providerGate{pool: pool, name: config.Provider.Name(), breaker: config.Breaker,
			lease: config.Provider.Timeout() + 5*time.Second, logger: config.Logger}}
	w.autoclose = &AutocloseWorker{desk: d, after: config.AutocloseAfter, now: config.Now, logger: config.Logger}
	workers := river.NewWorkers()
	add := []func() error{
		func() error { return river.AddWorkerSafely(workers, w.triage) },
		func() error {
			return river.AddWorkerSafely(workers, &pruneWorker{desk: d})
		},
		func() error { return river.AddWorkerSafely(workers, w.autoclose) },
		func() error { return river.AddWorkerSafely(workers, &SLAWorker{desk: d}) },
		func() error {
			return river.AddWorkerSafely(workers, &WebhookWorker{pool: pool, client: config.WebhookEgress.Client(config.WebhookTimeout),
				backoff: config.WebhookBackoff, timeout: config.WebhookTimeout})
		},
	}
	if config.Mail {
		email := &EmailWorker{desk: d, backoff: config.EmailBackoff, timeout: config.EmailTimeout}
		add = append(add,
			func() error { return river.AddWorkerSafely(workers, email) },
			func() error { return river.AddWorkerSafely(workers, &NotifyWorker{email: email}) })
	}
	for _, f := range add {
		if err := f(); err != nil {
			return nil, fmt.Errorf("register workers: %w", err)
		}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger: config.Logger,
		Queues: map[string]river.QueueConfig{
			QueueTriage:      {MaxWorkers: config.TriageWorkers},
			QueueEmail:       {MaxWorkers: config.EmailWorkers},
			QueueWebhooks:    {MaxWorkers: config.WebhookWorkers},
			QueueMaintenance: {MaxWorkers: 2},
			// Jobs that a process of an older version inserts during an upgrade.
			river.QueueDefault: {MaxWorkers: 2},
		},
		Workers:              workers,
		PeriodicJobs:         []*river.PeriodicJob{pruneSchedule(d.IdempotencyRetention()), autocloseSchedule(config.AutocloseAfter)},
		RetryPolicy:          retryPolicy{config.TriageBackoff},
		MaxAttempts:          config.TriageMaxAttempts,
		FetchPollInterval:    config.FetchPollInterval,
		FetchCooldown:        config.FetchCooldown,
		RescueStuckJobsAfter: config.RescueStuckJobsAfter,
		JobTimeout:           min(maintenanceTimeout, config.LongestJobTimeout()), // the triage and email workers set their own
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	w.client = client
	return w, nil
}

// Client is the working River client, for tests and tools that watch it.
func (w *Workers) Client() *river.Client[pgx.Tx] { return w.client }

// Autoclose runs the periodic autoclose job's work now, by the workers'
// clock; for tests and tools.
func (w *Workers) Autoclose(ctx context.Context) error {
	return w.autoclose.Work(ctx, nil)
}

// Start starts fetching and working jobs.
func (w *Workers) Start(ctx context.Context) error {
	events, cancel := w.client.SubscribeConfig(&river.SubscribeConfig{ChanSize: 10_000, Kinds: []river.EventKind{
		river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled, river.EventKindJobSnoozed}})
	w.stopEvents, w.eventsDone = cancel, make(chan struct{})
	go func() {
		defer close(w.eventsDone)
		for e := range events {
			w.observe(e)
		}
	}()
	if err := w.client.Start(ctx); err != nil {
		cancel()
		return err
	}
	dispatchCtx, stopDispatch := context.WithCancel(ctx)
	w.stopDispatch, w.dispatchDone = stopDispatch, make(chan struct{})
	go func() {
		defer close(w.dispatchDone)
		w.runWebhookDispatcher(dispatchCtx)
	}()
	return nil
}

// Stop stops fetching new jobs and waits for running ones until ctx ends;
// then it cancels what still runs, and River makes those jobs available
// again without spending their attempt.
func (w *Workers) Stop(ctx context.Context) error {
	defer w.endEvents()
	if w.stopDispatch != nil {
		w.stopDispatch()
		<-w.dispatchDone
	}
	err := w.client.Stop(ctx)
	if err == nil {
		return nil
	}
	w.config.Logger.Warn("grace period over; cancelling running jobs", slog.Any("error", err))
	cancelCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.client.StopAndCancel(cancelCtx); err != nil {
		return fmt.Errorf("stop workers: %w", err)
	}
	return nil
}

// next maps a use case's answer onto River's control flow: done, snooze
// (no attempt spent), cancel (a retry would get the same), or an error
// (retry with backoff, then a dead letter).
func next(n desk.Next) error {
	switch n.Step {
	case desk.Done:
		return nil
	case desk.Snooze:
		return river.JobSnooze(n.Wait)
	case desk.Cancel:
		return river.JobCancel(n.Err)
	}
	if n.Err == nil {
		return errors.New("retry")
	}
	return n.Err
}
