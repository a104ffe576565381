package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// agentOf is the calling agent's record.
func (s *Server) agentOf(ctx context.Context, who vocab.Actor, what string) (*store.Agent, error) {
	if err := requireAgent(who, what); err != nil {
		return nil, err
	}
	return store.New(s.pool).GetAgent(ctx, who.ID())
}

// listSavedReplies answers GET /v1/saved-replies (agents): the agent's own
// and its teams'.
func (s *Server) listSavedReplies(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	a, err := s.agentOf(r.Context(), who, "use saved replies")
	if err != nil {
		return err
	}
	list, err := s.desk.SavedReplies(r.Context(), a)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*store.SavedReply{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"saved_replies": list})
	return nil
}

type savedReplyRequest struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	Team  string `json:"team"` // absent: the agent's own
}

// createSavedReply answers POST /v1/saved-replies (agents); Idempotency-Key
// honoured.
func (s *Server) createSavedReply(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	a, err := s.agentOf(r.Context(), who, "add saved replies")
	if err != nil {
		return err
	}
	var req savedReplyRequest
	if err := decodeKeyed(w, r, &req); err != nil {
		return err
	}
	return s.createOnce(w, r, who, req, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		saved, err := s.desk.AddSavedReplyTx(ctx, tx, a, &desk.SavedReplyParams{Title: req.Title, Body: req.Body, Team: req.Team})
		if errors.Is(err, desk.ErrInvalidSavedReply) {
			return 0, nil, unprocessable("invalid_saved_reply", "%s", err.Error())
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, saved, nil
	})
}

// deleteSavedReply answers DELETE /v1/saved-replies/{id} (agents: their
// own, or their teams').
func (s *Server) deleteSavedReply(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	a, err := s.agentOf(r.Context(), who, "delete saved replies")
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such saved reply"}
	}
	if err := s.desk.DeleteSavedReply(r.Context(), a, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
