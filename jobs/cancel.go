package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river/rivertype"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
)

// CancelTx cancels a job that has not started, in the caller's
// transaction (desk.CancelJob): its row is locked first, so that no
// worker fetches it meanwhile (River fetches with SKIP LOCKED); a running
// job is desk.ErrJobBusy, a finished one desk.ErrJobFinished.
func (q *Queue) CancelTx(ctx context.Context, tx *store.Tx, id int64) (desk.Cancelled, error) {
	out := desk.Cancelled{JobID: id}
	ptx, err := tx.Pgx(ctx)
	if err != nil {
		return out, err
	}
	if err := store.New(ptx).LockJob(ctx, id); err != nil {
		return out, fmt.Errorf("job %d: %w", id, err)
	}
	row, err := q.Client.JobGetTx(ctx, ptx, id)
	if errors.Is(err, rivertype.ErrNotFound) {
		return out, fmt.Errorf("job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return out, err
	}
	switch row.State {
	case rivertype.JobStateRunning:
		return out, fmt.Errorf("job %d: %w", id, desk.ErrJobBusy)
	case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
		return out, fmt.Errorf("job %d is %s: %w", id, stateOf(row), desk.ErrJobFinished)
	}
	if _, err := q.Client.JobCancelTx(ctx, ptx, id); err != nil {
		return out, fmt.Errorf("cancel job %d: %w", id, err)
	}
	var args struct {
		MessageID int64  `json:"message_id"`
		TicketID  string `json:"ticket_id"`
	}
	_ = json.Unmarshal(row.EncodedArgs, &args)
	out.TicketID = args.TicketID
	if delivers(row.Kind) {
		out.MessageID = args.MessageID
	}
	return out, nil
}

// delivers reports whether jobs of the kind deliver a stored mail.
func delivers(kind string) bool {
	return kind == (EmailArgs{}).Kind() || kind == (NotifyArgs{}).Kind()
}

// Delete deletes a finished job for a person: one that has not finished
// is desk.ErrJobActive (cancel it first), and a delivery's job, which is
// the history of its mail's attempts, desk.ErrJobHistory.
func (q *Queue) Delete(ctx context.Context, id int64) error {
	row, err := q.Client.JobGet(ctx, id)
	if errors.Is(err, rivertype.ErrNotFound) {
		return fmt.Errorf("job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	switch {
	case delivers(row.Kind):
		return fmt.Errorf("job %d delivers mail: %w", id, desk.ErrJobHistory)
	case row.State != rivertype.JobStateCompleted && row.State != rivertype.JobStateCancelled && row.State != rivertype.JobStateDiscarded:
		return fmt.Errorf("job %d is %s: %w", id, stateOf(row), desk.ErrJobActive)
	}
	if _, err := q.Client.JobDelete(ctx, id); err != nil {
		if errors.Is(err, rivertype.ErrJobRunning) {
			return fmt.Errorf("job %d: %w", id, desk.ErrJobActive)
		}
		return fmt.Errorf("delete job %d: %w", id, err)
	}
	return nil
}
