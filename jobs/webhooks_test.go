package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
)

// scriptedEndpoint answers its calls with the given statuses in turn, then 204.
type scriptedEndpoint struct {
	mu       sync.Mutex
	statuses []int
	calls    int
}

func (e *scriptedEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	status := http.StatusNoContent
	if len(e.statuses) > 0 {
		status, e.statuses = e.statuses[0], e.statuses[1:]
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
}

func (e *scriptedEndpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

func TestWebhookDeliveries(t *testing.T) {
	t.Parallel()

	// deliver registers an endpoint answering statuses, records one event
	// and returns the status of the delivery job once it is in state want.
	// deliverTo registers url, records one event and returns the status
	// of the delivery job once it is in state want.
	deliverTo := func(t *testing.T, b *jobstest.Bundle, url, want string) jobs.Status {
		b.Config.WebhookPoll = 20 * time.Millisecond
		b.Config.WebhookBackoff = backoff.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}
		if _, err := b.Store.InsertWebhook(b.Ctx, &store.Webhook{URL: url, Events: []string{"ticket.created"},
			Secret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=", CreatedBy: "agent:alice"}); err != nil {
			t.Fatal(err)
		}
		q := b.StartQueue(t)
		if err := store.Run(b.Ctx, b.Pool, func(tx *store.Tx) error {
			return store.New(tx).InsertWebhookEvent(b.Ctx, "ticket.created", map[string]string{"ticket_id": "T-500001"})
		}); err != nil {
			t.Fatal(err)
		}
		var jobID int64
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for jobID == 0 { // the dispatcher queues the delivery
			if err := b.Pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM river_job WHERE kind = 'webhook'`).Scan(&jobID); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return jobstest.WaitFor(t, q, jobID, want, 30*time.Second)
	}
	// deliver is deliverTo an endpoint on loopback, allowed, that answers
	// statuses in turn.
	deliver := func(t *testing.T, want string, statuses ...int) (jobs.Status, int) {
		b := jobstest.Setup(t)
		b.AllowLoopbackWebhooks() // the endpoint below listens on loopback
		endpoint := &scriptedEndpoint{statuses: statuses}
		srv := httptest.NewServer(endpoint)
		t.Cleanup(srv.Close)
		s := deliverTo(t, b, srv.URL, want)
		endpoint.mu.Lock()
		defer endpoint.mu.Unlock()
		return s, endpoint.calls
	}

	t.Run("NoDeliveryReachesInsideUnlessAllowed", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		endpoint := &scriptedEndpoint{}
		srv := httptest.NewServer(endpoint)
		t.Cleanup(srv.Close)
		s := deliverTo(t, b, srv.URL, jobs.StateFailed)
		if endpoint.count() != 0 || !strings.Contains(jobstest.Deref(s.LastError), "refused by policy") || strings.Contains(jobstest.Deref(s.LastError), "127.0.0.1") {
			t.Errorf("%d calls, last error %q: want none, refused by policy, no address", endpoint.count(), jobstest.Deref(s.LastError))
		}
	})

	t.Run("ARedirectIsAFailedDeliveryAndIsNotFollowed", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		b.AllowLoopbackWebhooks()
		target := &scriptedEndpoint{}
		elsewhere := httptest.NewServer(target)
		t.Cleanup(elsewhere.Close)
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(redirect.Close)
		s := deliverTo(t, b, redirect.URL, jobs.StateFailed)
		if target.count() != 0 || !strings.Contains(jobstest.Deref(s.LastError), "answered 307; redirects are not followed") {
			t.Errorf("%d calls at the redirect's target, last error %q", target.count(), jobstest.Deref(s.LastError))
		}
	})

	t.Run("AnUnreachableReceiverIsNamedNotDescribed", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		b.AllowLoopbackWebhooks()
		b.Config.WebhookMaxAttempts = 1
		closed := httptest.NewServer(http.NotFoundHandler())
		url := closed.URL
		closed.Close() // nothing listens there now: connection refused
		s := deliverTo(t, b, url, jobs.StateDeadLetter)
		last := jobstest.Deref(s.LastError)
		if !strings.Contains(last, "unreachable") || strings.Contains(last, "refused") || strings.Contains(last, "127.0.0.1") || strings.Contains(last, "dial") {
			t.Errorf("last error %q: want unreachable, without the transport's words", last)
		}
	})

	t.Run("A4xxOtherThan408And429FailsAtOnce", func(t *testing.T) {
		t.Parallel()
		s, calls := deliver(t, jobs.StateFailed, http.StatusBadRequest)
		if calls != 1 || s.Attempt != 1 {
			t.Errorf("%d calls, attempt %d; want one call, failed at once", calls, s.Attempt)
		}
	})

	t.Run("A5xxIsRetriedWithBackoff", func(t *testing.T) {
		t.Parallel()
		s, calls := deliver(t, jobs.StateSucceeded, http.StatusBadGateway, http.StatusServiceUnavailable)
		if calls != 3 || len(s.Errors) != 2 {
			t.Errorf("%d calls, errors %v; want two failures, then the delivery", calls, s.Errors)
		}
	})

	t.Run("A429WaitsWithoutSpendingAnAttempt", func(t *testing.T) {
		t.Parallel()
		s, calls := deliver(t, jobs.StateSucceeded, http.StatusTooManyRequests)
		if calls != 2 || len(s.Errors) != 0 || s.Snoozes != 1 {
			t.Errorf("%d calls, errors %v, snoozes %d; want a wait, no error, then the delivery", calls, s.Errors, s.Snoozes)
		}
	})
}

func TestSignWebhookIsTheStandardsSignature(t *testing.T) {
	t.Parallel()
	// The example of the Standard Webhooks specification, which its
	// reference library (npm standardwebhooks 1.x) signs alike.
	got, err := jobs.SignWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; err != nil || got != want {
		t.Errorf("signature %q (%v), want %q", got, err, want)
	}
}
