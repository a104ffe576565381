//go:build demo

package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/helpdesk-dev/helpdesk/desk"
)

// CrashPoint says where SimulateCrash's worker dies.
type CrashPoint struct {
	Task       string // the step at which it dies
	BeforeSave bool   // after the step's provider call but before its save; else right after the save
}

// errCrash stops the worker at the crash point.
var errCrash = errors.New("simulated crash")

// crashingDesk is the desk of a worker that dies at a step: before the
// step's save (its provider call made) or right after it.
type crashingDesk struct {
	triageDesk
	at CrashPoint
}

func (c crashingDesk) SaveTriageStep(ctx context.Context, r *desk.TriageResult) (bool, error) {
	if r.Task == c.at.Task && c.at.BeforeSave {
		return false, errCrash
	}
	free, err := c.triageDesk.SaveTriageStep(ctx, r)
	if err == nil && r.Task == c.at.Task {
		return false, errCrash
	}
	return free, err
}

// SimulateCrash plays a worker process that dies mid-job, for the demo and
// the tests (built with -tags demo only). It locks the next available job
// exactly as River's producer does (state running, attempt + 1,
// attempted_at now), runs the triage worker up to the crash point and
// returns without telling River anything, so the job stays running, as
// after a killed process, until River's rescuer hands it back (after
// Config.RescueStuckJobsAfter).
func (w *Workers) SimulateCrash(ctx context.Context, at CrashPoint) (*river.Job[TriageArgs], error) {
	res, err := riverpgxv5.New(w.pool).GetExecutor().JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
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
	crashing := *w.triage
	crashing.desk = crashingDesk{triageDesk: w.triage.desk, at: at}
	if err := crashing.Work(ctx, job); !errors.Is(err, errCrash) {
		return job, fmt.Errorf("the worker did not reach the crash point at %s: %v", at.Task, err)
	}
	return job, nil
}
