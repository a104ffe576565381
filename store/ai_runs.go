package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AIRun is the saved result of one triage step of one job.
type AIRun struct {
	ID               int64
	JobID            int64
	TicketID         string
	Task             string // classify, draft_reply or embed
	Output           string
	Model            string
	LatencyMS        int
	PromptTokens     int
	CompletionTokens int
	CreatedAt        time.Time
}

// InsertAIRunParams are the fields of a step's result.
type InsertAIRunParams struct {
	JobID            int64
	TicketID         string
	Task             string
	Output           string
	Model            string
	LatencyMS        int
	PromptTokens     int
	CompletionTokens int
}

const aiRunColumns = `id, job_id, ticket_id, task, output, model, latency_ms, prompt_tokens, completion_tokens, created_at`

// InsertAIRun saves a step's result unless the job has one for that step
// already; inserted is false then, and the caller must not apply it again.
func (s *Store) InsertAIRun(ctx context.Context, p *InsertAIRunParams) (inserted bool, err error) {
	if err := exec(ctx, s, func(b *Batch) { b.InsertAIRun(p, &inserted) }); err != nil {
		return false, fmt.Errorf("insert %s result of job %d: %w", p.Task, p.JobID, err)
	}
	return inserted, nil
}

// InsertAIRun queues InsertAIRun; inserted gets its answer.
func (b *Batch) InsertAIRun(p *InsertAIRunParams, inserted *bool) {
	b.b.Queue(insertAIRunSQL, insertAIRunArgs(p)...).Exec(func(tag pgconn.CommandTag) error {
		*inserted = tag.RowsAffected() == 1
		return nil
	})
}

const insertAIRunSQL = `INSERT INTO ai_runs (job_id, ticket_id, task, output, model, latency_ms, prompt_tokens, completion_tokens)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
	ON CONFLICT (job_id, task) DO NOTHING`

func insertAIRunArgs(p *InsertAIRunParams) []any {
	return []any{p.JobID, p.TicketID, p.Task, p.Output, p.Model, p.LatencyMS, p.PromptTokens, p.CompletionTokens}
}

// AIRunTasks returns the steps that a job has results for.
func (s *Store) AIRunTasks(ctx context.Context, jobID int64) ([]string, error) {
	tasks, err := one(ctx, s, func(b *Batch, into *[]string) { b.AIRunTasks(jobID, into) })
	if err != nil {
		return nil, err
	}
	return *tasks, nil
}

// AIRunTasks queues AIRunTasks; into gets the steps.
func (b *Batch) AIRunTasks(jobID int64, into *[]string) {
	b.texts(fmt.Sprintf("list results of job %d", jobID), aiRunTasksSQL, into, jobID)
}

const aiRunTasksSQL = `SELECT task FROM ai_runs WHERE job_id = $1`

// ListAIRuns returns every step result saved for a ticket, oldest first.
func (s *Store) ListAIRuns(ctx context.Context, ticketID string) ([]*AIRun, error) {
	rows, err := s.db.Query(ctx, `SELECT `+aiRunColumns+` FROM ai_runs WHERE ticket_id = $1 ORDER BY id`, ticketID)
	if err != nil {
		return nil, fmt.Errorf("list results of %s: %w", ticketID, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*AIRun, error) {
		var r AIRun
		err := row.Scan(&r.ID, &r.JobID, &r.TicketID, &r.Task, &r.Output, &r.Model, &r.LatencyMS,
			&r.PromptTokens, &r.CompletionTokens, &r.CreatedAt)
		return &r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list results of %s: %w", ticketID, err)
	}
	return runs, nil
}
