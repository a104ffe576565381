package jobs

import (
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/helpdesk-dev/helpdesk/backoff"
)

// retryPolicy is River's ClientRetryPolicy from a Backoff. job.Attempt is
// the attempt that just failed; snoozes do not raise it, so they do not
// grow the wait.
type retryPolicy struct{ backoff.Backoff }

// NextRetry spaces the attempts of a job that failed.
func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time { return p.After(job.Attempt) }
