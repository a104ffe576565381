package jobs

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/sla"
	"github.com/helpdesk-dev/helpdesk/store"
)

// Kinds are the kinds of job helpdesk queues.
var Kinds = []string{TriageArgs{}.Kind(), EmailArgs{}.Kind(), NotifyArgs{}.Kind(), WebhookArgs{}.Kind(), AutocloseArgs{}.Kind(), PruneArgs{}.Kind(), SLAArgs{}.Kind()}

// RefreshGauges sets the metrics that come from the database, shared by
// every process: jobs by kind and state, the relay's pause and the
// provider's breaker. Every known kind and state is set, zero included, so
// that an alert on "dead_letter > 0" has a series to look at.
func (q *Queue) RefreshGauges(ctx context.Context) error {
	st := store.New(q.pool)
	start := time.Now()
	counts, err := st.CountJobs(ctx)
	if err != nil {
		return err
	}
	metrics.JobsCountDuration.Set(time.Since(start).Seconds())
	byKindState := map[[2]string]float64{}
	for _, k := range Kinds {
		for _, s := range States {
			byKindState[[2]string{k, s}] = 0
		}
	}
	for _, c := range counts {
		row := &rivertype.JobRow{State: rivertype.JobState(c.State)}
		if c.Retried {
			row.Attempt = 1
		}
		byKindState[[2]string{c.Kind, stateOf(row)}] += float64(c.N)
	}
	metrics.Jobs.Reset()
	for ks, n := range byKindState {
		metrics.Jobs.WithLabelValues(ks[0], ks[1]).Set(n)
	}
	paused, err := st.RelaysPaused(ctx)
	if err != nil {
		return err
	}
	metrics.SMTPRelayPaused.Set(boolGauge(paused > 0))
	providers, err := st.ListProviders(ctx)
	if err != nil {
		return err
	}
	open := false
	for _, p := range providers {
		open = open || p.State == store.BreakerOpen
	}
	metrics.ProviderBreakerOpen.Set(boolGauge(open))
	due, err := st.SLADueSeconds(ctx)
	if err != nil {
		return err
	}
	for _, target := range sla.Targets {
		secs := due[string(target)]
		for _, bound := range metrics.SLADueBounds {
			n := 0
			for _, s := range secs {
				if s <= bound {
					n++
				}
			}
			metrics.SLADueWithin.WithLabelValues(string(target), strconv.FormatFloat(bound, 'f', -1, 64)).Set(float64(n))
		}
		metrics.SLADueWithin.WithLabelValues(string(target), "+Inf").Set(float64(len(secs)))
	}
	return nil
}

// RunGauges refreshes the gauges every interval until ctx ends.
func (q *Queue) RunGauges(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := q.RefreshGauges(ctx); err != nil && ctx.Err() == nil {
			q.config.Logger.WarnContext(ctx, "metrics: could not count jobs", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
