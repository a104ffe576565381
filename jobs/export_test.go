package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"helpdesk/store"
)

// Snoozes exposes how River counts a job's snoozes.
var Snoozes = snoozes

// SaveLastStepAgain saves an embedding for job's last step as a second
// delivery of it would that got the provider's answer too: one racing the
// delivery that saved it first.
func (q *Queue) SaveLastStepAgain(ctx context.Context, job *river.Job[TriageArgs], vec []float32) error {
	last := TriageTasks[len(TriageTasks)-1]
	_, err := q.triage.save(ctx, job, last, stepResult{output: "a second answer",
		apply: func(ctx context.Context, st *store.Store, id string, _ int64) error {
			return st.SetTicketEmbedding(ctx, id, vec)
		}}, true)
	return err
}
