package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/helpdesk-dev/helpdesk/store"
)

// The states a person sees. River's states map onto them as follows:
//
//	River        attempt  helpdesk
//	available    0        queued       waiting for a worker, never tried
//	pending      any      queued
//	available    > 0      retrying     failed before, due again now
//	retryable    any      retrying     failed before, waiting for its backoff
//	scheduled    any      waiting      snoozed after a "slow down", or scheduled for later
//	running      any      running
//	completed    any      succeeded
//	cancelled    any      failed       an error a retry cannot fix
//	discarded    any      dead_letter  errors that might pass, but did not within the attempts
const (
	StateQueued     = "queued"
	StateRunning    = "running"
	StateWaiting    = "waiting"
	StateRetrying   = "retrying"
	StateSucceeded  = "succeeded"
	StateFailed     = "failed"
	StateDeadLetter = "dead_letter"
)

// States lists every helpdesk job state.
var States = []string{StateQueued, StateRunning, StateWaiting, StateRetrying, StateSucceeded, StateFailed, StateDeadLetter}

// ErrNotRetryable is returned when a job asked to be retried is neither
// failed nor a dead letter.
var ErrNotRetryable = errors.New("only failed and dead-letter jobs can be retried")

// ErrInvalidState is returned for a state name that is not in States.
var ErrInvalidState = errors.New("unknown job state")

// Status is a job as a person sees it.
type Status struct {
	JobID       int64  `json:"job_id"`
	Kind        string `json:"kind"`
	TicketID    string `json:"ticket_id"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	// Snoozes counts the waits that spent no attempt: the provider or the
	// relay asked to slow down, or the relay was down.
	Snoozes int `json:"snoozes"`
	// LastError is the error of the last attempt of a job that has not
	// succeeded; a succeeded job's earlier errors are only history.
	LastError *string `json:"last_error"`
	// Errors are every failed attempt's error, oldest first.
	Errors []AttemptError `json:"errors"`
}

// AttemptError is the error of one failed attempt.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

// StatusOf describes a River job row.
func StatusOf(row *rivertype.JobRow) Status {
	s := Status{JobID: row.ID, Kind: row.Kind, State: stateOf(row), Attempt: row.Attempt, MaxAttempts: row.MaxAttempts,
		Snoozes: snoozes(row.Metadata)}
	var args struct {
		TicketID string `json:"ticket_id"`
	}
	_ = json.Unmarshal(row.EncodedArgs, &args)
	s.TicketID = args.TicketID
	s.Errors = make([]AttemptError, 0, len(row.Errors))
	for _, e := range row.Errors {
		s.Errors = append(s.Errors, AttemptError{Attempt: e.Attempt, At: e.At, Error: lastErrorText(e.Error)})
	}
	if n := len(s.Errors); n > 0 && s.State != StateSucceeded {
		s.LastError = &s.Errors[n-1].Error
	}
	return s
}

// lastErrorText drops the prefix River adds to the text of a cancelled job.
func lastErrorText(s string) string {
	return strings.TrimPrefix(s, "JobCancelError: ")
}

func stateOf(row *rivertype.JobRow) string {
	switch row.State {
	case rivertype.JobStateAvailable:
		// River makes a job snoozed for less than its scheduler interval
		// available at once, with scheduled_at in the future.
		if row.ScheduledAt.After(time.Now()) && snoozes(row.Metadata) > 0 {
			return StateWaiting
		}
		if row.Attempt > 0 {
			return StateRetrying
		}
		return StateQueued
	case rivertype.JobStatePending:
		return StateQueued
	case rivertype.JobStateRetryable:
		return StateRetrying
	case rivertype.JobStateScheduled:
		return StateWaiting
	case rivertype.JobStateRunning:
		return StateRunning
	case rivertype.JobStateCompleted:
		return StateSucceeded
	case rivertype.JobStateCancelled:
		return StateFailed
	case rivertype.JobStateDiscarded:
		return StateDeadLetter
	}
	return string(row.State)
}

// riverStates are the River states that can show as a helpdesk state.
func riverStates(state string) ([]rivertype.JobState, error) {
	switch state {
	case StateQueued:
		return []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending}, nil
	case StateRetrying:
		return []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateRetryable}, nil
	case StateWaiting:
		return []rivertype.JobState{rivertype.JobStateScheduled}, nil
	case StateRunning:
		return []rivertype.JobState{rivertype.JobStateRunning}, nil
	case StateSucceeded:
		return []rivertype.JobState{rivertype.JobStateCompleted}, nil
	case StateFailed:
		return []rivertype.JobState{rivertype.JobStateCancelled}, nil
	case StateDeadLetter:
		return []rivertype.JobState{rivertype.JobStateDiscarded}, nil
	}
	return nil, fmt.Errorf("%w %q: want one of %s", ErrInvalidState, state, strings.Join(States, ", "))
}

// Get returns the job's status; an unknown id is store.ErrNotFound.
func (q *Queue) Get(ctx context.Context, id int64) (Status, error) {
	row, err := q.Client.JobGet(ctx, id)
	if errors.Is(err, rivertype.ErrNotFound) {
		return Status{}, fmt.Errorf("job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return Status{}, fmt.Errorf("get job %d: %w", id, err)
	}
	return StatusOf(row), nil
}

// Await polls the job until it is in state, and returns its status then.
// It gives up when ctx ends, or when the job reaches another final state
// (succeeded, failed, dead_letter), which it cannot leave on its own.
func (q *Queue) Await(ctx context.Context, id int64, state string) (Status, error) {
	for {
		s, err := q.Get(ctx, id)
		if err != nil || s.State == state {
			return s, err
		}
		if s.State == StateSucceeded || s.State == StateFailed || s.State == StateDeadLetter {
			return s, fmt.Errorf("job %d is %s, not %s (last error: %s)", id, s.State, state, lastErrorOrNone(s))
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("job %d is still %s, not %s (last error: %s): %w", id, s.State, state, lastErrorOrNone(s), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func lastErrorOrNone(s Status) string {
	if s.LastError == nil {
		return "none"
	}
	return *s.LastError
}

// ListParams select jobs by state, in id order, a page at a time.
type ListParams struct {
	State   string // one of States
	AfterID int64  // only jobs with a larger id
	Limit   int    // default 100
}

// List returns up to Limit jobs in the state, and the id to pass as AfterID
// for the next page (0 when there is none).
func (q *Queue) List(ctx context.Context, p ListParams) ([]Status, int64, error) {
	states, err := riverStates(p.State)
	if err != nil {
		return nil, 0, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []Status
	after := p.AfterID
	for len(out) < limit {
		params := river.NewJobListParams().States(states...).OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(limit)
		if after > 0 {
			params = params.Where("id > @after", river.NamedArgs{"after": after})
		}
		res, err := q.Client.JobList(ctx, params)
		if err != nil {
			return nil, 0, fmt.Errorf("list %s jobs: %w", p.State, err)
		}
		for _, row := range res.Jobs {
			after = row.ID
			// available holds both queued and retrying jobs; keep the asked one.
			if s := StatusOf(row); s.State == p.State {
				out = append(out, s)
				if len(out) == limit {
					return out, after, nil
				}
			}
		}
		if len(res.Jobs) < limit {
			return out, 0, nil
		}
	}
	return out, after, nil
}

// DeadLetterGroup is the dead letters that share a last error.
type DeadLetterGroup struct {
	LastError string  `json:"last_error"`
	Count     int     `json:"count"`
	JobIDs    []int64 `json:"job_ids"`
}

// DeadLetters groups every dead letter by its last error, largest group first.
func (q *Queue) DeadLetters(ctx context.Context) ([]DeadLetterGroup, error) {
	byError := map[string]*DeadLetterGroup{}
	var after int64
	for {
		page, next, err := q.List(ctx, ListParams{State: StateDeadLetter, AfterID: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, s := range page {
			key := ""
			if s.LastError != nil {
				key = *s.LastError
			}
			g := byError[key]
			if g == nil {
				g = &DeadLetterGroup{LastError: key}
				byError[key] = g
			}
			g.Count++
			g.JobIDs = append(g.JobIDs, s.JobID)
		}
		if next == 0 {
			break
		}
		after = next
	}
	groups := make([]DeadLetterGroup, 0, len(byError))
	for _, g := range byError {
		groups = append(groups, *g)
	}
	slices.SortFunc(groups, func(a, b DeadLetterGroup) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.LastError, b.LastError)
	})
	return groups, nil
}

// Retry sends a failed or dead-letter job back to the queue with a whole
// attempt budget, keeping its results so that finished steps are skipped.
//
// River's JobRetry makes the job available but leaves its attempt count, so
// a dead letter would get exactly one more try. In the same transaction we
// set attempt back to 0 and max_attempts to the kind's budget, as if the job
// were new; its error history stays.
func (q *Queue) Retry(ctx context.Context, id int64) (Status, error) {
	var status Status
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		// Two retries of one job must not interleave.
		if err := store.New(tx).LockJob(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		row, err := q.Client.JobGetTx(ctx, tx, id)
		if errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("job %d: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if row.State != rivertype.JobStateCancelled && row.State != rivertype.JobStateDiscarded {
			return fmt.Errorf("job %d is %s: %w", id, stateOf(row), ErrNotRetryable)
		}
		if _, err := q.Client.JobRetryTx(ctx, tx, id); err != nil {
			return fmt.Errorf("retry job %d: %w", id, err)
		}
		budget := q.retryBudget(row.Kind, row.MaxAttempts)
		if row.Kind == (EmailArgs{}).Kind() || row.Kind == (NotifyArgs{}).Kind() {
			// A person asks to try again everyone not yet served; those
			// already served keep their single copy. A mail to an agent is
			// delivered as a reply is: without this its retry found no
			// recipient pending and succeeded having sent nothing.
			msgID, err := store.New(tx).OutboundMessageOfJob(ctx, id)
			if err != nil {
				return err
			}
			if err := store.New(tx).ResetFailedRecipients(ctx, msgID); err != nil {
				return err
			}
		}
		if err := store.New(tx).RestoreJobAttempts(ctx, id, budget); err != nil {
			return err
		}
		row, err = q.Client.JobGetTx(ctx, tx, id)
		if err != nil {
			return err
		}
		status = StatusOf(row)
		return nil
	})
	if err != nil {
		return Status{}, err
	}
	return status, nil
}
