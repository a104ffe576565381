package jobs

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/egress"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
)

// QueueWebhooks is the queue of webhook deliveries: a slow receiver never
// holds up replies or triage.
const QueueWebhooks = "webhooks"

// WebhookArgs is the job that delivers one event to one endpoint.
type WebhookArgs struct {
	EventID   int64 `json:"event_id"`
	WebhookID int64 `json:"webhook_id"`
}

// Kind is River's name for the job.
func (WebhookArgs) Kind() string { return "webhook" }

// WebhookWorker delivers events the Standard Webhooks way: the same body
// on every attempt, signed with the endpoint's secret (webhook-id,
// webhook-timestamp, webhook-signature: v1,base64 HMAC-SHA256 of
// "id.timestamp.body").
type WebhookWorker struct {
	river.WorkerDefaults[WebhookArgs]
	pool    *pgxpool.Pool
	client  *http.Client
	backoff backoff.Backoff
	timeout time.Duration
}

// NextRetry spaces the attempts of a delivery that failed.
func (w *WebhookWorker) NextRetry(job *river.Job[WebhookArgs]) time.Time {
	return w.backoff.After(job.Attempt)
}

// Timeout bounds one attempt.
func (w *WebhookWorker) Timeout(*river.Job[WebhookArgs]) time.Duration {
	return w.timeout + 5*time.Second
}

// WebhookBody is what an endpoint receives.
type WebhookBody struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// Work makes one delivery attempt. A 2xx is done; 429 and 503 with
// Retry-After wait without spending an attempt; other 5xx, 408 and network
// faults retry with backoff; any other 4xx will repeat and fails at once.
func (w *WebhookWorker) Work(ctx context.Context, job *river.Job[WebhookArgs]) error {
	st := store.New(w.pool)
	hook, err := st.GetWebhook(ctx, job.Args.WebhookID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the endpoint was deleted: nobody to tell
	}
	if err != nil {
		return err
	}
	event, err := st.GetWebhookEvent(ctx, job.Args.EventID)
	if errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("WebhookEventGone: event %d was pruned", job.Args.EventID))
	}
	if err != nil {
		return err
	}
	body, err := json.Marshal(WebhookBody{Type: event.Type, Timestamp: event.CreatedAt.UTC(), Data: event.Payload})
	if err != nil {
		return river.JobCancel(err)
	}
	id := WebhookEventID(event.ID)
	timestamp := time.Now().Unix()
	signature, err := SignWebhook(hook.Secret, id, timestamp, body)
	if err != nil {
		return river.JobCancel(fmt.Errorf("WebhookSecret: %w", err))
	}
	callCtx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return river.JobCancel(fmt.Errorf("WebhookURL: webhook %d: its URL does not parse", hook.ID))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "helpdesk-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(timestamp, 10))
	req.Header.Set("webhook-signature", signature)
	// Job errors are read by every agent: they say what happened, never
	// the transport's words, which would map the network behind the URL.
	resp, err := w.client.Do(req)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, egress.ErrRefused):
		return river.JobCancel(fmt.Errorf("WebhookRefused: webhook %d: refused by policy (HELPDESK_WEBHOOK_ALLOW_NETS)", hook.ID))
	case callCtx.Err() != nil:
		return fmt.Errorf("WebhookUnreachable: webhook %d: no answer within %s", hook.ID, w.timeout)
	default:
		return fmt.Errorf("WebhookUnreachable: webhook %d: unreachable", hook.ID)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code >= 300 && code < 400:
		// A redirect is not followed: it would take the body and its
		// signature elsewhere, or turn into a GET of another host.
		return river.JobCancel(fmt.Errorf("WebhookRedirected: webhook %d answered %d; redirects are not followed", hook.ID, code))
	case code == http.StatusTooManyRequests || (code == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != ""):
		wait := w.backoff.Base
		if d := provider.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
			wait = min(d, w.backoff.Cap)
		}
		return river.JobSnooze(wait)
	case code >= 500 || code == http.StatusRequestTimeout:
		return fmt.Errorf("WebhookServerError: webhook %d answered %d", hook.ID, code)
	default:
		return river.JobCancel(fmt.Errorf("WebhookRefused: webhook %d answered %d; a retry would get the same", hook.ID, code))
	}
}

// WebhookEventID is an event's webhook-id, the same on every attempt.
func WebhookEventID(id int64) string { return "evt_" + strconv.FormatInt(id, 10) }

// SignWebhook is the Standard Webhooks signature of a delivery with a
// whsec_ secret.
func SignWebhook(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, timestamp)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// dispatchWebhooks turns recorded events into delivery jobs, one per
// subscribed endpoint, in the transaction that marks them dispatched, so
// that an event is queued once however many processes dispatch.
func (w *Workers) dispatchWebhooks(ctx context.Context) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		st := store.New(tx)
		events, err := st.ClaimWebhookEvents(ctx, 100)
		if err != nil || len(events) == 0 {
			return err
		}
		hooks, err := st.ListWebhooks(ctx)
		if err != nil {
			return err
		}
		var params []river.InsertManyParams
		for _, e := range events {
			for _, h := range hooks {
				if slices.Contains(h.Events, e.Type) {
					params = append(params, river.InsertManyParams{Args: WebhookArgs{EventID: e.ID, WebhookID: h.ID},
						InsertOpts: &river.InsertOpts{Queue: QueueWebhooks, MaxAttempts: w.config.WebhookMaxAttempts}})
				}
			}
		}
		n = len(events)
		if len(params) == 0 {
			return nil
		}
		_, err = w.queue.Client.InsertManyTx(ctx, tx, params)
		return err
	})
	return n, err
}

// runWebhookDispatcher dispatches events every poll interval until ctx
// ends, at once again while a batch was full.
func (w *Workers) runWebhookDispatcher(ctx context.Context) {
	t := time.NewTicker(w.config.WebhookPoll)
	defer t.Stop()
	for {
		n, err := w.dispatchWebhooks(ctx)
		if err != nil && ctx.Err() == nil {
			w.config.Logger.WarnContext(ctx, "webhooks: could not dispatch events", slog.Any("error", err))
		}
		if n == 100 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
