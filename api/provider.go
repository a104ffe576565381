package api

import (
	"net/http"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

type providerView struct {
	Provider       string     `json:"provider"`
	State          string     `json:"state"` // closed or open
	Failures       int        `json:"failures"`
	OpenedAt       *time.Time `json:"opened_at"`
	NextProbeAt    *time.Time `json:"next_probe_at"`
	LastError      *string    `json:"last_error"`
	ChangedAt      *time.Time `json:"changed_at"`
	CallIntervalMS int64      `json:"call_interval_ms"` // the pace the quota allows; 0: unpaced
	BlockedUntil   *time.Time `json:"blocked_until"`
	QuotaLimit     *int       `json:"quota_limit"`
	QuotaRemaining *int       `json:"quota_remaining"`
	QuotaResetAt   *time.Time `json:"quota_reset_at"`
}

func viewProvider(p *store.Provider) providerView {
	v := providerView{Provider: p.Provider, State: p.State, Failures: p.Failures, OpenedAt: p.OpenedAt, NextProbeAt: p.NextProbeAt,
		LastError: p.LastError, CallIntervalMS: p.CallInterval.Milliseconds(), QuotaLimit: p.QuotaLimit,
		QuotaRemaining: p.QuotaRemaining, QuotaResetAt: p.QuotaResetAt}
	if !p.ChangedAt.IsZero() {
		v.ChangedAt = &p.ChangedAt
	}
	if p.BlockedUntil.After(time.Now()) {
		v.BlockedUntil = &p.BlockedUntil
	}
	return v
}

// getProvider answers GET /v1/provider: the AI provider's circuit breaker
// and pace, as every process shares them.
func (s *Server) getProvider(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "read the provider's state"); err != nil {
		return err
	}
	p, err := s.queue.ProviderState(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewProvider(p))
	return nil
}
