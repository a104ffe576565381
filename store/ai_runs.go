package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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

// ErrStepSaved is a step's result that the job has already: another
// delivery of the job saved it.
var ErrStepSaved = errors.New("the job has a result for this step already")

// InsertAIRun saves a step's result; ErrStepSaved, and nothing saved, when
// the job has one for that step already.
func (s *Store) InsertAIRun(ctx context.Context, p *InsertAIRunParams) error {
	if err := exec(ctx, s, func(b *Batch) { b.InsertAIRun(p) }); err != nil {
		return fmt.Errorf("insert %s result of job %d: %w", p.Task, p.JobID, err)
	}
	return nil
}

// InsertAIRun queues InsertAIRun. A result the job has already is an
// error (the unique key on job and step), not an insert of nothing, so
// that it aborts its transaction: what the result changes can be queued
// behind it, unchecked, and still never be applied twice.
func (b *Batch) InsertAIRun(p *InsertAIRunParams) {
	b.b.Queue(insertAIRunSQL, insertAIRunArgs(p)...)
}

const insertAIRunSQL = `INSERT INTO ai_runs (job_id, ticket_id, task, output, model, latency_ms, prompt_tokens, completion_tokens)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

func insertAIRunArgs(p *InsertAIRunParams) []any {
	return []any{p.JobID, p.TicketID, p.Task, p.Output, p.Model, p.LatencyMS, p.PromptTokens, p.CompletionTokens}
}

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
