package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// CrashPoint says where SimulateCrash's worker dies.
type CrashPoint struct {
	Task       string // the step at which it dies
	BeforeSave bool   // after the step's provider call but before its save; else right after the save
}

// errCrash stops the worker at the crash point.
var errCrash = errors.New("simulated crash")

// SimulateCrash plays a worker process that dies mid-job, for the demo and
// the tests. It locks the next available job exactly as River's producer
// does (state running, attempt + 1, attempted_at now), runs the triage
// worker up to the crash point and returns without telling River anything,
// so the job stays running, as after a killed process, until River's
// rescuer hands it back (after Config.RescueStuckJobsAfter).
func (q *Queue) SimulateCrash(ctx context.Context, at CrashPoint) (*river.Job[TriageArgs], error) {
	if q.triage == nil {
		return nil, errors.New("jobs: a queue without a provider cannot work jobs")
	}
	res, err := riverpgxv5.New(q.pool).GetExecutor().JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
		ClientID: "crashing-worker", Kind: []string{TriageArgs{}.Kind()}, MaxAttemptedBy: 100, MaxToLock: 1, Queue: QueueTriage,
	})
	if err != nil {
		return nil, fmt.Errorf("lock a job: %w", err)
	}
	if len(res.Jobs) != 1 {
		return nil, errors.New("no triage job is available")
	}
	job := &river.Job[TriageArgs]{JobRow: res.Jobs[0]}
	if err := json.Unmarshal(job.EncodedArgs, &job.Args); err != nil {
		return nil, fmt.Errorf("decode job %d: %w", job.ID, err)
	}
	w := *q.triage
	crashAt := func(before bool) func(string) error {
		return func(task string) error {
			if task == at.Task && at.BeforeSave == before {
				return errCrash
			}
			return nil
		}
	}
	w.afterCall, w.afterSave = crashAt(true), crashAt(false)
	if err := w.Work(ctx, job); !errors.Is(err, errCrash) {
		return job, fmt.Errorf("the worker did not reach the crash point at %s: %v", at.Task, err)
	}
	return job, nil
}
