package jobs

import (
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
)

func TestBreakerRules(t *testing.T) {
	t.Parallel()
	c := BreakerConfig{Failures: 3, Window: 10 * time.Second, ProbeMin: 5 * time.Second, ProbeMax: 2 * time.Minute}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

	t.Run("OpensAfterTheFailuresInARowWithinTheWindow", func(t *testing.T) {
		r := &store.Provider{State: store.BreakerClosed}
		for i := range 2 {
			if c.failure(r, false, "503", t0.Add(time.Duration(i)*time.Second)) {
				t.Fatalf("opened after %d failures", i+1)
			}
		}
		if !c.failure(r, false, "503", t0.Add(2*time.Second)) || r.State != store.BreakerOpen {
			t.Fatalf("still %s after 3 failures", r.State)
		}
		if want := t0.Add(7 * time.Second); !r.NextProbeAt.Equal(want) {
			t.Errorf("next probe at %s, want %s", r.NextProbeAt, want)
		}
	})

	t.Run("FailuresSpreadPastTheWindowDoNotOpenIt", func(t *testing.T) {
		r := &store.Provider{State: store.BreakerClosed}
		for i := range 6 {
			if c.failure(r, false, "503", t0.Add(time.Duration(i)*6*time.Second)) {
				t.Fatalf("opened on failure %d, 6s apart with a 10s window", i+1)
			}
		}
	})

	t.Run("AnAnswerInBetweenStartsTheCountAgain", func(t *testing.T) {
		r := &store.Provider{State: store.BreakerClosed}
		c.failure(r, false, "503", t0)
		c.failure(r, false, "503", t0)
		c.success(r, t0)
		if c.failure(r, false, "503", t0) || c.failure(r, false, "503", t0) {
			t.Errorf("opened after two failures that followed an answer")
		}
	})

	t.Run("EachFailedProbeDoublesTheWaitUpToTheMaximum", func(t *testing.T) {
		r := &store.Provider{State: store.BreakerClosed}
		for range 3 {
			c.failure(r, false, "503", t0)
		}
		var waits []time.Duration
		now := t0
		for range 7 {
			now = *r.NextProbeAt
			c.failure(r, true, "503", now)
			waits = append(waits, r.NextProbeAt.Sub(now))
		}
		want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute}
		for i := range want {
			if waits[i] != want[i] {
				t.Fatalf("waits between probes %v, want %v", waits, want)
			}
		}
	})

	t.Run("AFailureOfACallUnderWayWhenItOpenedDoesNotDelayTheProbe", func(t *testing.T) {
		r := &store.Provider{State: store.BreakerClosed}
		for range 3 {
			c.failure(r, false, "503", t0)
		}
		next := *r.NextProbeAt
		c.failure(r, false, "503", t0.Add(time.Second))
		if !r.NextProbeAt.Equal(next) {
			t.Errorf("next probe moved from %s to %s", next, r.NextProbeAt)
		}
	})

	t.Run("ASuccessfulProbeClosesIt", func(t *testing.T) {
		r := &store.Provider{State: store.BreakerClosed}
		for range 3 {
			c.failure(r, false, "503", t0)
		}
		if !c.success(r, t0.Add(5*time.Second)) || r.State != store.BreakerClosed || r.Failures != 0 || r.NextProbeAt != nil {
			t.Errorf("after a successful probe: %+v", r)
		}
	})
}

func TestPaceFollowsTheQuota(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		q            *provider.Quota
		call         provider.Call
		wantInterval time.Duration
		wantBlocked  time.Duration
	}{
		{"NoHeadersNoPace", nil, provider.Call{}, 0, 0},
		{"TheRestOfTheBudgetSpreadUntilItsReset", &provider.Quota{LimitRequests: 50, RemainingRequests: 40, ResetRequests: 40 * time.Second, RemainingTokens: -1}, provider.Call{}, 1050 * time.Millisecond, 0},
		{"ASpentBudgetBlocksUntilItsReset", &provider.Quota{LimitRequests: 50, RemainingRequests: 0, ResetRequests: 7 * time.Second, RemainingTokens: -1}, provider.Call{}, 7350 * time.Millisecond, 7 * time.Second},
		{"TooFewTokensForAnotherCallBlockUntilTheirReset", &provider.Quota{RemainingRequests: -1, LimitTokens: 10000, RemainingTokens: 100, ResetTokens: 3 * time.Second}, provider.Call{PromptTokens: 300, CompletionTokens: 50}, 0, 3 * time.Second},
		{"EnoughTokensDoNotBlock", &provider.Quota{RemainingRequests: -1, LimitTokens: 10000, RemainingTokens: 5000, ResetTokens: 3 * time.Second}, provider.Call{PromptTokens: 300}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			interval, blocked := pace(tc.q, tc.call, now)
			var gotBlocked time.Duration
			if !blocked.IsZero() {
				gotBlocked = blocked.Sub(now)
			}
			if interval != tc.wantInterval || gotBlocked != tc.wantBlocked {
				t.Errorf("interval %s, blocked %s; want %s, %s", interval, gotBlocked, tc.wantInterval, tc.wantBlocked)
			}
		})
	}
}
