package jobs

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/jobs/provider"
)

// NewTriageWorkerWithHooks exposes the triage worker's crash seams to the
// external tests of this package.
func NewTriageWorkerWithHooks(pool *pgxpool.Pool, p *provider.Client, config Config, afterCall, afterSave func(task string) error) *TriageWorker {
	config.setDefaults()
	return &TriageWorker{pool: pool, provider: p, backoff: config.TriageBackoff, logger: config.Logger,
		afterCall: afterCall, afterSave: afterSave}
}

// Snoozes exposes how River counts a job's snoozes.
var Snoozes = snoozes
