package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
)

// BreakerConfig is when the provider's circuit breaker opens and how it
// probes; zero values take the defaults.
type BreakerConfig struct {
	Failures int           // failures in a row that open it; default 10
	Window   time.Duration // ...within this long; default 30s
	ProbeMin time.Duration // the first probe comes this long after it opens; default 5s
	ProbeMax time.Duration // each failed probe doubles the wait, up to this; default 2m
}

// paceMaxWait is how long a worker waits for its turn to call the
// provider before it gives the job back to the queue (without spending an
// attempt) to come back at its turn.
const paceMaxWait = 2 * time.Second

// providerGate is the way every triage call goes to the provider: through
// its circuit breaker and at the pace its quota allows, both kept in
// PostgreSQL so that every process sees the same.
type providerGate struct {
	pool    *pgxpool.Pool
	name    string
	breaker BreakerConfig
	lease   time.Duration // how long a probe may take: one call
	logger  *slog.Logger
}

// pass is a call allowed through the gate.
type pass struct {
	gate  *store.ProviderGate
	probe bool
}

// enter returns a pass for one call, after waiting for its turn; or,
// when the breaker is open or the turn is far off, how long the job should
// wait without calling.
//
// free says the caller read the provider's row free (closed breaker, no
// pace) just before, in a transaction of its own work (ProviderFree):
// then the call goes without another read.
func (g *providerGate) enter(ctx context.Context, free bool) (*pass, time.Duration, error) {
	if free {
		return &pass{gate: &store.ProviderGate{State: store.BreakerClosed, Slot: time.Now(), Reserved: true}}, 0, nil
	}
	gate, err := store.New(g.pool).EnterProvider(ctx, g.name, g.lease, paceMaxWait)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case gate.State == store.BreakerOpen && !gate.Probe:
		wait := time.Until(gate.NextProbe)
		if wait <= 0 {
			// Another job is probing: back soon after it may have closed the breaker.
			wait = min(max(time.Until(gate.ProbeUntil), time.Second), g.breaker.ProbeMin)
		}
		return nil, wait, nil
	case !gate.Reserved:
		return nil, time.Until(gate.Slot), nil
	}
	if wait := time.Until(gate.Slot); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-t.C:
		}
	}
	return &pass{gate: gate, probe: gate.Probe}, 0, nil
}

// after records what the call said: the quota it reported, and whether
// the provider is up. It returns the breaker's state afterwards.
func (g *providerGate) after(ctx context.Context, p *pass, call provider.Call, callErr error) (string, error) {
	var perr *provider.Error
	if callErr != nil && !errors.As(callErr, &perr) {
		return p.gate.State, nil // our own cancellation says nothing of the provider
	}
	quota := call.Quota
	if perr != nil && perr.Quota != nil {
		quota = perr.Quota
	}
	down := perr != nil && perr.ProviderDown()
	limited := perr != nil && perr.Kind == provider.KindRateLimited
	now := time.Now()
	interval, block := pace(quota, call, now)
	if limited {
		block = later(block, now.Add(max(perr.RetryAfter, time.Second)))
	}
	changesPace := !block.IsZero() || (quota != nil && !near(interval, p.gate.CallInterval))
	changesBreaker := down || p.gate.State == store.BreakerOpen || p.gate.Failures > 0
	if !changesPace && !changesBreaker {
		return p.gate.State, nil // the common case writes nothing
	}
	var opened, closed bool
	row, err := store.New(g.pool).UpdateProvider(ctx, g.name, func(r *store.Provider) {
		if quota != nil {
			r.CallInterval = interval
			if quota.LimitRequests >= 0 {
				r.QuotaLimit = &quota.LimitRequests
			}
			if quota.RemainingRequests >= 0 {
				r.QuotaRemaining = &quota.RemainingRequests
			}
			if quota.ResetRequests > 0 {
				at := now.Add(quota.ResetRequests)
				r.QuotaResetAt = &at
			}
		}
		r.BlockedUntil = later(r.BlockedUntil, block)
		switch {
		case down:
			opened = g.breaker.failure(r, p.probe, perr.Error(), now)
		default:
			closed = g.breaker.success(r, now)
		}
	})
	if err != nil {
		return p.gate.State, err
	}
	switch {
	case opened:
		g.logger.WarnContext(ctx, "provider circuit breaker opened: triage waits without calling it",
			slog.String("provider", g.name), slog.Int("failures", row.Failures), slog.Time("next_probe", *row.NextProbeAt),
			slog.String("error", perr.Error()))
	case closed:
		g.logger.InfoContext(ctx, "provider circuit breaker closed: the provider answers again", slog.String("provider", g.name))
	}
	return row.State, nil
}

// failure counts a failure that says the provider is down, and reports
// whether it opened the breaker. A failed probe doubles the wait for the
// next one; a failure of a call that was under way when the breaker
// opened changes nothing.
func (c BreakerConfig) failure(r *store.Provider, probe bool, msg string, now time.Time) (opened bool) {
	r.LastError = &msg
	if r.State == store.BreakerOpen {
		if probe {
			r.ProbeInterval = min(2*r.ProbeInterval, c.ProbeMax)
			next := now.Add(r.ProbeInterval)
			r.NextProbeAt, r.ProbeUntil = &next, nil
		}
		return false
	}
	if r.WindowStart == nil || now.Sub(*r.WindowStart) > c.Window {
		r.Failures, r.WindowStart = 1, &now
	} else {
		r.Failures++
	}
	if r.Failures < c.Failures {
		return false
	}
	next := now.Add(c.ProbeMin)
	r.State, r.OpenedAt, r.ChangedAt = store.BreakerOpen, &now, now
	r.ProbeInterval, r.NextProbeAt, r.ProbeUntil = c.ProbeMin, &next, nil
	return true
}

// success records an answer (any answer but a 5xx is one): the provider
// is up. It reports whether that closed the breaker.
func (c BreakerConfig) success(r *store.Provider, now time.Time) (closed bool) {
	closed = r.State == store.BreakerOpen
	if closed {
		r.ChangedAt = now
	}
	r.State, r.Failures, r.WindowStart, r.OpenedAt = store.BreakerClosed, 0, nil, nil
	r.ProbeInterval, r.NextProbeAt, r.ProbeUntil = 0, nil, nil
	return closed
}

// paceMargin keeps calls a little under the quota, so that the edges of
// the provider's window and our clocks never add up to a 429.
const paceMargin = 1.05

// pace turns what an answer said of the quota into the interval between
// calls (the rest of the budget spread evenly until it is whole again)
// and, when the budget is spent, until when nobody may call.
func pace(q *provider.Quota, call provider.Call, now time.Time) (interval time.Duration, blockedUntil time.Time) {
	if q == nil {
		return 0, time.Time{}
	}
	if q.RemainingRequests >= 0 && q.ResetRequests > 0 {
		if q.RemainingRequests == 0 {
			blockedUntil = now.Add(q.ResetRequests)
		}
		interval = time.Duration(float64(q.ResetRequests) / float64(max(q.RemainingRequests, 1)) * paceMargin)
	}
	// Tokens: when what is left would not cover another call like this
	// one, wait for the token budget to come back.
	if q.RemainingTokens >= 0 && q.ResetTokens > 0 && q.RemainingTokens < max(call.PromptTokens+call.CompletionTokens, 1) {
		blockedUntil = later(blockedUntil, now.Add(q.ResetTokens))
	}
	return interval, blockedUntil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// near reports whether two intervals differ by less than a tenth: not
// worth a write.
func near(a, b time.Duration) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= max(a, b)/10
}
