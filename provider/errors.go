package provider

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/metrics"
)

// Kind says what a provider failure means for the job that met it.
type Kind int

const (
	// KindUnavailable: a 5xx answer or no connection. It may pass; retry.
	KindUnavailable Kind = iota + 1
	// KindTimeout: no answer within the client's timeout. It may pass; retry.
	KindTimeout
	// KindRateLimited: 429, the provider asks us to slow down. Not the
	// job's fault: wait, and spend no attempt.
	KindRateLimited
	// KindRejected: a 4xx other than 429. The same request will be refused
	// again; fail at once.
	KindRejected
	// KindInvalidAnswer: a well-formed HTTP answer that cannot be used. The
	// provider is deterministic enough that asking again will not help.
	KindInvalidAnswer
)

func (k Kind) String() string {
	switch k {
	case KindUnavailable:
		return "ProviderUnavailable"
	case KindTimeout:
		return "ProviderTimeout"
	case KindRateLimited:
		return "ProviderRateLimited"
	case KindRejected:
		return "ProviderRejected"
	case KindInvalidAnswer:
		return "ProviderInvalidAnswer"
	}
	return "ProviderError"
}

// Error is every failure of a provider call, classified once here so that
// the worker decides by Kind and never by parsing messages.
type Error struct {
	Kind       Kind
	Status     int           // the HTTP status, when there was an answer
	RetryAfter time.Duration // the provider's Retry-After hint on a 429, 0 if none
	Quota      *Quota        // the rate limits the answer reported, if any
	Msg        string
}

// Error reads like "ProviderUnavailable: the provider answered 503", which is
// what a person sees as the job's last error.
func (e *Error) Error() string { return e.Kind.String() + ": " + e.Msg }

// ProviderDown reports a failure that says the provider itself is not
// well (5xx, no connection, no answer in time), as opposed to one about
// this request: only these count toward opening the circuit breaker.
func (e *Error) ProviderDown() bool {
	return e.Kind == KindUnavailable || e.Kind == KindTimeout
}

// Temporary reports whether a later attempt may succeed.
func (e *Error) Temporary() bool {
	return e.Kind == KindUnavailable || e.Kind == KindTimeout || e.Kind == KindRateLimited
}

func invalidAnswer(format string, args ...any) *Error {
	return &Error{Kind: KindInvalidAnswer, Status: http.StatusOK, Msg: fmt.Sprintf(format, args...)}
}

// statusError classifies a non-2xx answer.
func statusError(resp *http.Response, body []byte, now time.Time) *Error {
	msg := fmt.Sprintf("the provider answered %d", resp.StatusCode)
	// The reason a request was refused helps whoever fixes it; an outage's
	// text would only split the dead letters of one outage into groups.
	if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
		if detail := errorDetail(body); detail != "" {
			msg += " (" + detail + ")"
		}
	}
	e := &Error{Status: resp.StatusCode, Msg: msg}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		e.Kind = KindRateLimited
		e.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout:
		e.Kind = KindUnavailable
	default:
		e.Kind = KindRejected
	}
	return e
}

// ParseRetryAfter reads a Retry-After header (RFC 9110 §10.2.3):
// delay-seconds or an HTTP-date; 0 for none, a date past, or nonsense.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// errorDetail pulls a short message out of an OpenAI-style error body.
func errorDetail(body []byte) string {
	var e errorResponse
	if err := decodeJSON(body, &e); err == nil && e.Error.Message != "" {
		return truncate(e.Error.Message, 200)
	}
	return ""
}

// truncate cuts s to about n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// countCall counts a call in metrics.ProviderCalls by what came of it.
func countCall(task string, err error) {
	outcome := "ok"
	var e *Error
	switch {
	case err == nil:
	case errors.As(err, &e):
		switch {
		case e.Kind == KindRateLimited:
			outcome = "rate_limited"
		case e.Kind == KindUnavailable && e.Status >= 500:
			outcome = "server_error"
		case e.Kind == KindUnavailable:
			outcome = "unreachable"
		case e.Kind == KindTimeout:
			outcome = "timeout"
		case e.Kind == KindRejected:
			outcome = "rejected"
		default:
			outcome = "invalid"
		}
	default:
		outcome = "cancelled" // the caller's own context ended
	}
	metrics.ProviderCalls.WithLabelValues(task, outcome).Inc()
}
