package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/egress"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
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

// createWebhook answers POST /v1/webhooks (admins): an endpoint for some
// event types, with its signing secret shown once; Idempotency-Key
// honoured. A URL the deliveries could not reach under the egress policy
// (an address inside, or a name that resolves to one) is refused.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "register webhooks"); err != nil {
		return err
	}
	var req createWebhookRequest
	if err := decodeKeyed(w, r, &req); err != nil {
		return err
	}
	if len(req.URL) > 2000 {
		return unprocessable("invalid_url", "url must be at most 2000 characters")
	}
	if err := s.egress.CheckURL(r.Context(), req.URL, s.resolver); errors.Is(err, egress.ErrRefused) {
		return unprocessable("url_refused", "%s; webhooks reach only public addresses unless HELPDESK_WEBHOOK_ALLOW_NETS allows a network", err.Error())
	} else if err != nil {
		return unprocessable("invalid_url", "url: %s", err.Error())
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

// listWebhooks answers GET /v1/webhooks (agents), without secrets: an
// admin sees every endpoint, another agent those it registered.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "list webhooks"); err != nil {
		return err
	}
	list, err := store.New(s.pool).ListWebhooks(r.Context())
	if err != nil {
		return err
	}
	admin := infoOf(r.Context()).admin
	out := make([]webhookView, 0, len(list))
	for _, h := range list {
		if admin || h.CreatedBy == who.String() {
			out = append(out, viewWebhook(h))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": out})
	return nil
}

// deleteWebhook answers DELETE /v1/webhooks/{id} (admins, or the agent
// that registered it): deliveries still queued for it end without a call.
// Another's endpoint is not found, as if it did not exist.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "delete webhooks"); err != nil {
		return err
	}
	notFound := &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such webhook"}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return notFound
	}
	st := store.New(s.pool)
	hook, err := st.GetWebhook(r.Context(), id)
	if err != nil {
		return err
	}
	if !infoOf(r.Context()).admin && hook.CreatedBy != who.String() {
		return notFound
	}
	if err := st.DeleteWebhook(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
