package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"helpdesk/desk"
	"helpdesk/store"
	"helpdesk/vocab"
)

type createWebhookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

type webhookView struct {
	ID        int64     `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// Secret is shown once, in the answer that creates the endpoint.
	Secret string `json:"secret,omitempty"`
}

func viewWebhook(w *store.Webhook) webhookView {
	return webhookView{ID: w.ID, URL: w.URL, Events: w.Events, CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt}
}

// createWebhook answers POST /v1/webhooks (agents): an endpoint for some
// event types, with its signing secret shown once; Idempotency-Key honoured.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "register webhooks"); err != nil {
		return err
	}
	if _, err := idempotencyKey(r); err != nil {
		return err
	}
	var req createWebhookRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(req.URL) > 2000 || u.User != nil {
		return unprocessable("invalid_url", "url must be an http or https URL without credentials, such as https://example.com/hooks/helpdesk")
	}
	if len(req.Events) == 0 {
		return unprocessable("invalid_events", "events must name at least one of %s", strings.Join(desk.EventTypes, ", "))
	}
	for _, e := range req.Events {
		if !slices.Contains(desk.EventTypes, e) {
			return unprocessable("invalid_events", "unknown event %q; events are %s", e, strings.Join(desk.EventTypes, ", "))
		}
	}
	slices.Sort(req.Events)
	req.Events = slices.Compact(req.Events)
	return s.createOnce(w, r, who, req, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		key := make([]byte, 24)
		_, _ = rand.Read(key)
		hook, err := store.New(tx).InsertWebhook(ctx, &store.Webhook{URL: req.URL, Events: req.Events,
			Secret: "whsec_" + base64.StdEncoding.EncodeToString(key), CreatedBy: who.String()})
		if err != nil {
			return 0, nil, err
		}
		view := viewWebhook(hook)
		view.Secret = hook.Secret
		return http.StatusCreated, view, nil
	})
}

// listWebhooks answers GET /v1/webhooks (agents), without secrets.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "list webhooks"); err != nil {
		return err
	}
	list, err := store.New(s.pool).ListWebhooks(r.Context())
	if err != nil {
		return err
	}
	out := make([]webhookView, 0, len(list))
	for _, h := range list {
		out = append(out, viewWebhook(h))
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": out})
	return nil
}

// deleteWebhook answers DELETE /v1/webhooks/{id} (agents): deliveries
// still queued for it end without a call.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "delete webhooks"); err != nil {
		return err
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such webhook"}
	}
	if err := store.New(s.pool).DeleteWebhook(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
