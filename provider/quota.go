package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The OpenAI-style rate limit headers, which the simulator's quota mode
// sends too. Resets are durations such as "1s", "6m0s" or "20ms".
const (
	HeaderLimitRequests     = "X-Ratelimit-Limit-Requests"
	HeaderRemainingRequests = "X-Ratelimit-Remaining-Requests"
	HeaderResetRequests     = "X-Ratelimit-Reset-Requests"
	HeaderLimitTokens       = "X-Ratelimit-Limit-Tokens"
	HeaderRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	HeaderResetTokens       = "X-Ratelimit-Reset-Tokens"
)

// Quota is what an answer said of the caller's rate limits; nil when it
// said nothing. A field that was absent is -1 (counts) or 0 (durations).
type Quota struct {
	LimitRequests     int
	RemainingRequests int
	ResetRequests     time.Duration // until the request budget is whole again
	LimitTokens       int
	RemainingTokens   int
	ResetTokens       time.Duration
}

// parseQuota reads the rate limit headers; nil if there are none.
func parseQuota(h http.Header) *Quota {
	q := &Quota{
		LimitRequests:     headerInt(h, HeaderLimitRequests),
		RemainingRequests: headerInt(h, HeaderRemainingRequests),
		ResetRequests:     headerDuration(h, HeaderResetRequests),
		LimitTokens:       headerInt(h, HeaderLimitTokens),
		RemainingTokens:   headerInt(h, HeaderRemainingTokens),
		ResetTokens:       headerDuration(h, HeaderResetTokens),
	}
	if q.LimitRequests < 0 && q.RemainingRequests < 0 && q.LimitTokens < 0 && q.RemainingTokens < 0 {
		return nil
	}
	return q
}

func headerInt(h http.Header, name string) int {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get(name)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// headerDuration reads "6m0s", "1.5s", "20ms", or bare seconds ("7").
func headerDuration(h http.Header, name string) time.Duration {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	return 0
}
