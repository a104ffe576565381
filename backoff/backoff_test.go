package backoff

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: 2 * time.Second, Cap: 60 * time.Second}

	t.Run("BoundDoublesUpToTheCap", func(t *testing.T) {
		t.Parallel()
		want := []time.Duration{2, 4, 8, 16, 32, 60, 60, 60}
		for i, w := range want {
			if got := b.Bound(i + 1); got != w*time.Second {
				t.Errorf("Bound(%d) = %s, want %s", i+1, got, w*time.Second)
			}
		}
		if got := b.Bound(1000); got != 60*time.Second {
			t.Errorf("Bound(1000) = %s, want the cap", got)
		}
	})

	t.Run("EveryWaitLiesInItsBound", func(t *testing.T) {
		t.Parallel()
		for n := 1; n <= 10; n++ {
			var lo, hi time.Duration = time.Hour, 0
			for range 2000 {
				w := b.Wait(n)
				if w < 0 || w > b.Bound(n) {
					t.Fatalf("Wait(%d) = %s, outside [0, %s]", n, w, b.Bound(n))
				}
				lo, hi = min(lo, w), max(hi, w)
			}
			// Full jitter: the draws spread over the whole range, not near its top.
			if lo > b.Bound(n)/10 || hi < b.Bound(n)*9/10 {
				t.Errorf("Wait(%d) drew only [%s, %s] of [0, %s]", n, lo, hi, b.Bound(n))
			}
		}
	})

	t.Run("TheExtremesOfTheDrawAreZeroAndTheBound", func(t *testing.T) {
		t.Parallel()
		lowest := Backoff{Base: b.Base, Cap: b.Cap, randN: func(int64) int64 { return 0 }}
		highest := Backoff{Base: b.Base, Cap: b.Cap, randN: func(n int64) int64 { return n - 1 }}
		for n := 1; n <= 8; n++ {
			if got := lowest.Wait(n); got != 0 {
				t.Errorf("lowest Wait(%d) = %s, want 0", n, got)
			}
			if got := highest.Wait(n); got != b.Bound(n) {
				t.Errorf("highest Wait(%d) = %s, want %s", n, got, b.Bound(n))
			}
		}
	})

	t.Run("SnoozeHonoursTheHintAndGrowsWithEachRefusal", func(t *testing.T) {
		t.Parallel()
		lowest := Backoff{Base: b.Base, Cap: b.Cap, randN: func(int64) int64 { return 0 }}
		if got := lowest.SnoozeWait(1, 30*time.Second); got != 30*time.Second {
			t.Errorf("SnoozeWait(1, 30s) = %s, want the 30s hint", got)
		}
		prev := time.Duration(0)
		for n := 1; n <= 6; n++ {
			got := lowest.SnoozeWait(n, 0)
			if got < prev || got < b.Bound(n)/2 {
				t.Errorf("SnoozeWait(%d, 0) = %s, want ≥ %s and ≥ the previous %s", n, got, b.Bound(n)/2, prev)
			}
			prev = got
		}
	})
}
