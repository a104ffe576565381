package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// RestoreJobAttempts gives a job that River has just made available again a
// whole attempt budget: attempt back to 0 and max_attempts to maxAttempts.
//
// River's JobRetry only makes a job available, and raises max_attempts by one
// when the budget is spent, so a dead letter sent back after an outage would
// get a single try. This is the one place where helpdesk writes to River's
// table; the job's errors are kept, so its history stays readable.
func (s *Store) RestoreJobAttempts(ctx context.Context, jobID int64, maxAttempts int) error {
	tag, err := s.db.Exec(ctx,
		`UPDATE river_job SET attempt = 0, max_attempts = $2 WHERE id = $1 AND state = 'available'`,
		jobID, maxAttempts)
	if err != nil {
		return fmt.Errorf("restore attempts of job %d: %w", jobID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("restore attempts of job %d: %w", jobID, ErrNotFound)
	}
	return nil
}

// LockJob locks River's row of the job until the transaction ends.
func (s *Store) LockJob(ctx context.Context, jobID int64) error {
	var id int64
	if err := s.db.QueryRow(ctx, `SELECT id FROM river_job WHERE id = $1 FOR UPDATE`, jobID).Scan(&id); err != nil {
		return fmt.Errorf("lock job %d: %w", jobID, interpretError(err))
	}
	return nil
}

// JobCount is how many of River's jobs of a kind are in a state; Retried
// tells available jobs that failed before from new ones.
type JobCount struct {
	Kind    string
	State   string // River's state
	Retried bool
	N       int64
}

// CountJobs counts River's jobs by kind and state in one pass over the
// table (about 20 ms a 100,000 rows here).
func (s *Store) CountJobs(ctx context.Context) ([]JobCount, error) {
	rows, err := s.db.Query(ctx, `SELECT kind, state::text, state = 'available' AND attempt > 0, count(*)
		FROM river_job GROUP BY 1, 2, 3`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (JobCount, error) {
		var c JobCount
		err := row.Scan(&c.Kind, &c.State, &c.Retried, &c.N)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return counts, nil
}

// nextJobID draws from the sequence that numbers River's jobs, by the
// name PostgreSQL gives a serial column's sequence
// (TestSequencesAreTheColumns holds it to the column). A name in a
// statement is resolved once, when the statement is parsed; the
// pg_get_serial_sequence it replaced searched the catalogue on every run,
// 9.7 µs of PostgreSQL's CPU in each intake's 685 (perf, stop 63).
const nextJobID = `nextval('river_job_id_seq')`

// NextJobID queues the numbering of a River job not yet inserted, from the
// sequence River's insert numbers jobs by: a job inserted with this id
// (jobs.Queue hands it to River) can be named by rows queued before it.
func (b *Batch) NextJobID(id *int64) {
	b.b.Queue(`SELECT ` + nextJobID).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(id); err != nil {
			return fmt.Errorf("number a job: %w", err)
		}
		return nil
	})
}
