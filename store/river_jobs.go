package store

import (
	"context"
	"fmt"
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
