package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// similarFilters are the query parameters of GET /v1/tickets/{id}/similar.
var similarFilters = []string{"status", "limit"}

// getSimilar answers GET /v1/tickets/{id}/similar[?status=solved|closed|any]
// [&limit=N] (agents): the tickets most like this one by their
// embeddings, best first.
func (s *Server) getSimilar(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "look up similar tickets"); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := checkTicketID(id); err != nil {
		return err
	}
	q := r.URL.Query()
	if err := onlyParams(q, similarFilters); err != nil {
		return err
	}
	status := q.Get("status")
	switch status {
	case "":
		status = "solved"
	case "solved", "closed", "any":
	default:
		return badRequest("invalid_status", "status must be solved, closed or any")
	}
	limit := 5
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 50 {
			return badRequest("invalid_limit", "limit must be a whole number from 1 to 50")
		}
		limit = n
	}
	similar, err := s.desk.SimilarTickets(r.Context(), id, status, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"similar": similar})
	return nil
}

type mergeRequest struct {
	Into               string `json:"into"`
	Notify             *bool  `json:"notify"` // default true
	AllowOtherCustomer bool   `json:"allow_other_customer"`
}

type mergeResponse struct {
	TicketID       string `json:"ticket_id"`        // the target, which holds both now
	MergedTicketID string `json:"merged_ticket_id"` // the duplicate, closed with merged_into
	TriageJobID    int64  `json:"triage_job_id"`
	// NoticeMessageID is the reply that tells the customer; absent with
	// "notify": false or without outbound mail.
	NoticeMessageID int64 `json:"notice_message_id,omitempty"`
}

// mergeTicket answers POST /v1/tickets/{id}/merge (agents): the ticket, a
// duplicate, goes into "into". Once per Idempotency-Key.
func (s *Server) mergeTicket(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "merge tickets"); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := checkTicketID(id); err != nil {
		return err
	}
	var req mergeRequest
	if err := decodeKeyed(w, r, &req); err != nil {
		return err
	}
	if req.Into == "" {
		return unprocessable("missing_into", "into must name the ticket to merge %s into, such as T-500001", id)
	}
	if err := checkTicketID(req.Into); err != nil {
		return err
	}
	notify := req.Notify == nil || *req.Notify
	return s.createOnce(w, r, who, struct {
		Ticket string `json:"ticket"`
		mergeRequest
	}{id, req}, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		m, err := s.desk.MergeTicketTx(ctx, tx, who, &desk.MergeParams{TicketID: id, Into: req.Into, Notify: notify,
			AllowOtherCustomer: req.AllowOtherCustomer})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, mergeResponse{TicketID: m.TicketID, MergedTicketID: m.Merged, TriageJobID: m.TriageJobID,
			NoticeMessageID: m.NoticeID}, nil
	})
}
