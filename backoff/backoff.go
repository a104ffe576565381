// Package backoff is exponential backoff with full jitter, shared by the queue's retry policies and the domain's waits.
//
// It is a folder of its own because both desk/ (how long a delivery waits
// for a relay that is down) and jobs/ (River's retry policy) draw from it,
// and neither may import the other's internals for it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with full jitter: after failure n the wait
// is drawn uniformly from [0, min(Cap, Base·2^(n-1))]. The bound doubles so
// that an outage is not hammered; the draw is random so that jobs which
// failed together do not come back together.
type Backoff struct {
	Base time.Duration
	Cap  time.Duration

	// randN returns a uniform value in [0, n); nil means math/rand/v2.
	// Tests set it to check the bounds.
	randN func(n int64) int64
}

// Bound is the longest wait after failure n (n ≥ 1).
func (b Backoff) Bound(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	bound := b.Base
	for i := 1; i < n && bound < b.Cap; i++ {
		bound *= 2
	}
	return min(bound, b.Cap)
}

// Wait draws the wait after failure n from [0, Bound(n)].
func (b Backoff) Wait(n int) time.Duration {
	return time.Duration(b.rand(int64(b.Bound(n)) + 1))
}

// SnoozeWait is the wait after the n-th "slow down" of a job: at least the
// provider's hint, and at least half of Bound(n) so the pause grows with each
// refusal, with the other half random so waiting jobs come back spread out.
func (b Backoff) SnoozeWait(n int, hint time.Duration) time.Duration {
	half := b.Bound(n) / 2
	return max(hint, half+time.Duration(b.rand(int64(half)+1)))
}

// Jitter adds up to a tenth of wait at random (and makes it at least a
// millisecond), so that jobs told to wait the same time do not all come
// back at once.
func (b Backoff) Jitter(wait time.Duration) time.Duration {
	wait = max(wait, time.Millisecond)
	return wait + time.Duration(b.rand(int64(wait/10)+1))
}

// After is when to try again after failure n, from now.
func (b Backoff) After(n int) time.Time {
	return time.Now().Add(b.Wait(n))
}

func (b Backoff) rand(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if b.randN != nil {
		return b.randN(n)
	}
	return rand.Int64N(n)
}
