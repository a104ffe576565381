package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Webhook is an endpoint that receives events.
type Webhook struct {
	ID        int64     `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Secret    string    `json:"-"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

const webhookColumns = `id, url, events, secret, created_by, created_at`

func scanWebhook(row pgx.Row) (*Webhook, error) {
	var w Webhook
	if err := row.Scan(&w.ID, &w.URL, &w.Events, &w.Secret, &w.CreatedBy, &w.CreatedAt); err != nil {
		return nil, interpretError(err)
	}
	return &w, nil
}

// InsertWebhook registers an endpoint.
func (s *Store) InsertWebhook(ctx context.Context, w *Webhook) (*Webhook, error) {
	out, err := scanWebhook(s.db.QueryRow(ctx, `INSERT INTO webhooks (url, events, secret, created_by) VALUES ($1, $2, $3, $4)
		RETURNING `+webhookColumns, w.URL, w.Events, w.Secret, w.CreatedBy))
	if err != nil {
		return nil, fmt.Errorf("insert webhook: %w", err)
	}
	return out, nil
}

// ListWebhooks returns every endpoint, by id.
func (s *Store) ListWebhooks(ctx context.Context) ([]*Webhook, error) {
	rows, err := s.db.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Webhook, error) { return scanWebhook(row) })
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return list, nil
}

// GetWebhook returns an endpoint, or ErrNotFound.
func (s *Store) GetWebhook(ctx context.Context, id int64) (*Webhook, error) {
	w, err := scanWebhook(s.db.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("webhook %d: %w", id, err)
	}
	return w, nil
}

// DeleteWebhook removes an endpoint; deliveries still queued for it end
// without a call. ErrNotFound for an unknown id.
func (s *Store) DeleteWebhook(ctx context.Context, id int64) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM webhooks WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete webhook %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("webhook %d: %w", id, ErrNotFound)
	}
	return nil
}

// WebhookEvent is an event to deliver.
type WebhookEvent struct {
	ID        int64
	Type      string
	Payload   json.RawMessage
	CreatedAt time.Time
}

// InsertWebhookEvent records an event in the caller's transaction, when an
// endpoint subscribes to its type (else nothing is written).
func (s *Store) InsertWebhookEvent(ctx context.Context, eventType string, data any) error {
	return s.InsertWebhookEvents(ctx, []NewWebhookEvent{{Type: eventType, Data: data}})
}

// NewWebhookEvent is an event to record.
type NewWebhookEvent struct {
	Type string
	Data any // JSON-encodable
}

// InsertWebhookEvents records events, in order, in one statement: those
// of a type some endpoint subscribes to.
func (s *Store) InsertWebhookEvents(ctx context.Context, events []NewWebhookEvent) error {
	if err := exec(ctx, s, func(b *Batch) { b.InsertWebhookEvents(events) }); err != nil {
		return fmt.Errorf("webhook events: %w", err)
	}
	return nil
}

// InsertWebhookEvents queues InsertWebhookEvents; none queues nothing.
func (b *Batch) InsertWebhookEvents(events []NewWebhookEvent) {
	if len(events) == 0 {
		return
	}
	types, payloads, err := webhookEventArgs(events)
	if err != nil {
		b.fail(err)
		return
	}
	b.b.Queue(insertWebhookEventsSQL, types, payloads)
}

const insertWebhookEventsSQL = `INSERT INTO webhook_events (type, payload)
	SELECT e.type, e.payload::jsonb FROM unnest($1::text[], $2::text[]) WITH ORDINALITY e(type, payload, n)
	WHERE EXISTS (SELECT 1 FROM webhooks WHERE e.type = ANY(events)) ORDER BY e.n`

func webhookEventArgs(events []NewWebhookEvent) (types, payloads []string, err error) {
	types = make([]string, len(events))
	payloads = make([]string, len(events))
	for i, e := range events {
		payload, err := json.Marshal(e.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("webhook event %s: %w", e.Type, err)
		}
		types[i], payloads[i] = e.Type, string(payload)
	}
	return types, payloads, nil
}

// ClaimWebhookEvents locks up to limit events not yet dispatched, oldest
// first, skipping those another dispatcher holds, and marks them
// dispatched; the caller queues their deliveries in the same transaction.
func (s *Store) ClaimWebhookEvents(ctx context.Context, limit int) ([]*WebhookEvent, error) {
	rows, err := s.db.Query(ctx, `UPDATE webhook_events e SET dispatched_at = now()
		FROM (SELECT id FROM webhook_events WHERE dispatched_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) c
		WHERE e.id = c.id RETURNING e.id, e.type, e.payload, e.created_at`, limit)
	if err != nil {
		return nil, fmt.Errorf("claim webhook events: %w", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*WebhookEvent, error) {
		var e WebhookEvent
		err := row.Scan(&e.ID, &e.Type, &e.Payload, &e.CreatedAt)
		return &e, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim webhook events: %w", err)
	}
	return events, nil
}

// GetWebhookEvent returns an event, or ErrNotFound.
func (s *Store) GetWebhookEvent(ctx context.Context, id int64) (*WebhookEvent, error) {
	var e WebhookEvent
	err := s.db.QueryRow(ctx, `SELECT id, type, payload, created_at FROM webhook_events WHERE id = $1`, id).
		Scan(&e.ID, &e.Type, &e.Payload, &e.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("webhook event %d: %w", id, interpretError(err))
	}
	return &e, nil
}

// PruneWebhookEvents deletes dispatched events older than maxAge.
func (s *Store) PruneWebhookEvents(ctx context.Context, maxAge time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM webhook_events WHERE dispatched_at IS NOT NULL AND created_at < now() - $1::interval`, maxAge)
	if err != nil {
		return 0, fmt.Errorf("prune webhook events: %w", err)
	}
	return tag.RowsAffected(), nil
}
