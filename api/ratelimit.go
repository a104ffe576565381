package api

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// keyLimiter gives each API key a token bucket: Rate requests a second,
// Burst at once. Buckets of keys unused for a while are dropped, so the
// map does not grow with every key ever seen.
type keyLimiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	limiter  *rate.Limiter
	lastSeen time.Time
}

func newKeyLimiter(perSecond float64, burst int) *keyLimiter {
	return &keyLimiter{rate: rate.Limit(perSecond), burst: burst, buckets: map[string]*bucket{}}
}

// wait returns 0 if the key may make a request now (and takes its token),
// else how long until it may.
func (l *keyLimiter) wait(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > time.Minute {
		for k, b := range l.buckets {
			if now.Sub(b.lastSeen) > time.Minute {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{limiter: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.lastSeen = now
	res := b.limiter.ReserveN(now, 1)
	if delay := res.DelayFrom(now); delay > 0 {
		res.CancelAt(now)
		return delay
	}
	return 0
}

// tooManyRequests is the answer past the key's rate: nothing is done, and
// Retry-After says when to come back (whole seconds, rounded up).
func tooManyRequests(w http.ResponseWriter, wait time.Duration) *Error {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "this API key is over its request rate; retry after " + wait.Round(time.Millisecond).String()}
}
