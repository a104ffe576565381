package provider_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/provider"
)

// answering is a provider that always gives the same answer.
func answering(t *testing.T, status int, header map[string]string, body string) *provider.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := provider.New(provider.Config{BaseURL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEveryFailureIsClassifiedOnce(t *testing.T) {
	t.Parallel()
	ticket := provider.Ticket{ID: "T-500001", Subject: "Hello", Messages: []string{"Hi"}}
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		kind       provider.Kind
		retryAfter time.Duration
		text       string
	}{
		{"503IsUnavailable", 503, nil, `{"error":{"message":"overloaded"}}`, provider.KindUnavailable, 0, "ProviderUnavailable: the provider answered 503"},
		{"500IsUnavailable", 500, nil, ``, provider.KindUnavailable, 0, "ProviderUnavailable: the provider answered 500"},
		{"429WithSecondsIsRateLimited", 429, map[string]string{"Retry-After": "7"}, ``, provider.KindRateLimited, 7 * time.Second, "ProviderRateLimited: the provider answered 429"},
		{"429WithoutHintIsRateLimited", 429, nil, ``, provider.KindRateLimited, 0, "ProviderRateLimited: the provider answered 429"},
		{"400IsRejectedWithItsReason", 400, nil, `{"error":{"message":"model not found"}}`, provider.KindRejected, 0, "ProviderRejected: the provider answered 400 (model not found)"},
		{"401IsRejected", 401, nil, ``, provider.KindRejected, 0, "ProviderRejected: the provider answered 401"},
		{"200WithoutJSONIsInvalid", 200, nil, `<html>`, provider.KindInvalidAnswer, 0, ""},
		{"200WithoutChoicesIsInvalid", 200, nil, `{"choices":[]}`, provider.KindInvalidAnswer, 0, "ProviderInvalidAnswer: classify answered no choices"},
		{"200WithUnknownTeamIsInvalid", 200, nil, `{"choices":[{"message":{"content":"{\"team\":\"sales\",\"priority\":2}"}}]}`, provider.KindInvalidAnswer, 0, `ProviderInvalidAnswer: classify chose unknown team "sales"`},
		{"200WithPriorityOutOfRangeIsInvalid", 200, nil, `{"choices":[{"message":{"content":"{\"team\":\"billing\",\"priority\":9}"}}]}`, provider.KindInvalidAnswer, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := answering(t, tc.status, tc.header, tc.body).Classify(context.Background(), ticket)
			var perr *provider.Error
			if !errors.As(err, &perr) {
				t.Fatalf("err = %v, want *provider.Error", err)
			}
			if perr.Kind != tc.kind || perr.RetryAfter != tc.retryAfter {
				t.Errorf("kind %s retry-after %s, want %s %s", perr.Kind, perr.RetryAfter, tc.kind, tc.retryAfter)
			}
			if tc.text != "" && perr.Error() != tc.text {
				t.Errorf("text %q, want %q", perr.Error(), tc.text)
			}
		})
	}

	t.Run("NoAnswerWithinTheTimeoutIsATimeout", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(hang))
		t.Cleanup(srv.Close)
		c, _ := provider.New(provider.Config{BaseURL: srv.URL, Timeout: 100 * time.Millisecond})
		_, _, err := c.Embed(context.Background(), ticket)
		var perr *provider.Error
		if !errors.As(err, &perr) || perr.Kind != provider.KindTimeout || !perr.Temporary() {
			t.Errorf("err = %v, want a temporary ProviderTimeout", err)
		}
	})

	t.Run("NoServerIsUnavailable", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close() // nothing listens there now
		c, _ := provider.New(provider.Config{BaseURL: srv.URL})
		_, _, err := c.DraftReply(context.Background(), ticket)
		var perr *provider.Error
		if !errors.As(err, &perr) || perr.Kind != provider.KindUnavailable {
			t.Errorf("err = %v, want ProviderUnavailable", err)
		}
	})

	t.Run("TheCallersCancellationIsNotAProviderFailure", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(hang))
		t.Cleanup(srv.Close)
		c, _ := provider.New(provider.Config{BaseURL: srv.URL, Timeout: 5 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, _, err := c.Classify(ctx, ticket)
		var perr *provider.Error
		if errors.As(err, &perr) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's own error", err)
		}
	})
}

// hang never answers. It reads the body first: only then does net/http
// notice that the client went away and cancel the request's context.
func hang(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

func TestRetryAfterAsHTTPDate(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	_, _, err := answering(t, 429, map[string]string{"Retry-After": at}, ``).Classify(context.Background(), provider.Ticket{ID: "T-1"})
	var perr *provider.Error
	if !errors.As(err, &perr) || perr.RetryAfter < 80*time.Second || perr.RetryAfter > 91*time.Second {
		t.Errorf("err = %v, want a Retry-After of about 90s", err)
	}
}

// TestRealProviderAnswersAreRead feeds the client answers shaped as a real
// OpenAI-compatible provider writes them, extra fields included.
func TestRealProviderAnswersAreRead(t *testing.T) {
	t.Parallel()
	fixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "provider", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ctx := context.Background()
	ticket := provider.Ticket{ID: "T-500001", Subject: "Late parcel", Messages: []string{"My parcel is late."}}

	c, call, err := answering(t, 200, nil, fixture("chat_classify.json")).Classify(ctx, ticket)
	if err != nil || c.Team != "shipping" || c.Priority != 2 {
		t.Errorf("classify = %+v, %v; want shipping/2", c, err)
	}
	if call.Model != "gpt-4o-mini-2024-07-18" || call.PromptTokens != 87 || call.CompletionTokens != 12 {
		t.Errorf("call = %+v, want the answer's model and usage", call)
	}

	vec, call, err := answering(t, 200, nil, fixture("embeddings.json")).Embed(ctx, ticket)
	if err != nil || len(vec) != 8 || call.Model != "text-embedding-3-small" || call.PromptTokens != 9 {
		t.Errorf("embed = %d floats, %+v, %v", len(vec), call, err)
	}

	_, _, err = answering(t, 429, map[string]string{"Retry-After": "1"}, fixture("error_rate_limit.json")).DraftReply(ctx, ticket)
	var perr *provider.Error
	if !errors.As(err, &perr) || perr.Kind != provider.KindRateLimited || perr.RetryAfter != time.Second {
		t.Errorf("429: %v, want rate limited for 1s", err)
	}
}

func TestClassifyChoosesOnlyTheTeamsThereAre(t *testing.T) {
	t.Parallel()
	ticket := provider.Ticket{ID: "T-500001", Subject: "Late", Messages: []string{"Late parcel"}, Teams: []string{"money", "parcels"}}
	_, _, err := answering(t, 200, nil, `{"choices":[{"message":{"content":"{\"team\":\"shipping\",\"priority\":2}"}}]}`).Classify(context.Background(), ticket)
	var perr *provider.Error
	if !errors.As(err, &perr) || perr.Kind != provider.KindInvalidAnswer {
		t.Errorf("a team nobody has: %v, want an unusable answer", err)
	}
	c, _, err := answering(t, 200, nil, `{"choices":[{"message":{"content":"{\"team\":\"parcels\",\"priority\":2}"}}]}`).Classify(context.Background(), ticket)
	if err != nil || c.Team != "parcels" {
		t.Errorf("a team there is: %+v %v", c, err)
	}
}

func TestConnectionsAreKeptBetweenCalls(t *testing.T) {
	t.Parallel()
	answer, err := os.ReadFile(filepath.Join("..", "testdata", "provider", "chat_classify.json"))
	if err != nil {
		t.Fatal(err)
	}
	const workers, calls = 32, 5
	// Each round, the answers wait until all the workers' calls are in, so
	// that the 32 connections are all busy at once and then all idle.
	var (
		dialled atomic.Int64
		mu      sync.Mutex
		arrived int
		round   = make(chan struct{})
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		wait := round
		if arrived++; arrived == workers {
			close(round)
			round, arrived = make(chan struct{}), 0
		}
		mu.Unlock()
		<-wait
		_, _ = w.Write(answer)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := provider.New(provider.Config{BaseURL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Between rounds every connection is idle. With Go's default of 2 idle
	// connections a host, each round after the first would dial 30 anew:
	// about 150 connections in all.
	for range calls {
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := c.Classify(context.Background(), provider.Ticket{ID: "T-500001", Subject: "Late", Messages: []string{"Late parcel"}}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	if n := dialled.Load(); n > 2*workers {
		t.Errorf("%d connections for %d calls, %d at most at once: connections are not kept between calls", n, workers*calls, workers)
	}
}
