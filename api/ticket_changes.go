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

type patchTicketRequest struct {
	Status   *vocab.Status `json:"status"`
	Assignee *string       `json:"assignee" null:"empty"` // an agent's name; "" or null for nobody
	Team     *string       `json:"team"`
	Priority *int          `json:"priority"`
}

// patchTicket answers PATCH /v1/tickets/{id} (agents): status, assignee,
// team, priority, each change an event, all or nothing.
func (s *Server) patchTicket(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "change tickets"); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := checkTicketID(id); err != nil {
		return err
	}
	var req patchTicketRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.Status == nil && req.Assignee == nil && req.Team == nil && req.Priority == nil:
		return unprocessable("empty_change", "send at least one of status, assignee, team, priority")
	case req.Status != nil && !req.Status.Valid():
		return unprocessable("invalid_status", "status must be one of %s", vocab.StatusNames())
	case req.Assignee != nil && *req.Assignee != "" && !vocab.AgentNamePattern.MatchString(*req.Assignee):
		return unprocessable("unknown_agent", "assignee %q is not an agent's name", *req.Assignee)
	case req.Team != nil && !desk.TeamName.MatchString(*req.Team):
		return unprocessable("unknown_team", "team %q is not a team's name", *req.Team)
	case req.Priority != nil && (*req.Priority < 1 || *req.Priority > 4):
		return unprocessable("invalid_priority", "priority must be 1 (urgent) to 4 (low), got %d", *req.Priority)
	}
	if _, err := s.desk.ChangeTicket(r.Context(), who, id, &desk.Change{Status: req.Status, Assignee: req.Assignee,
		Team: req.Team, Priority: req.Priority}); err != nil {
		return err
	}
	return s.getTicket(w, r, who)
}

type noteRequest struct {
	Body        string `json:"body"`
	SeenMessage int64  `json:"seen_message"` // as a reply's
}

// createNote answers POST /v1/tickets/{id}/notes (agents): an internal
// note, never emailed, never shown to the customer.
func (s *Server) createNote(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "write notes"); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := checkTicketID(id); err != nil {
		return err
	}
	var req noteRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := validateText("body", req.Body); err != nil {
		return err
	}
	msg, err := s.desk.AddNoteSeen(r.Context(), who, id, req.Body, req.SeenMessage)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewMessage(msg, nil))
	return nil
}

type followUpRequest struct {
	Body string `json:"body"`
}

type followUpResponse struct {
	MessageID int64  `json:"message_id"`
	TicketID  string `json:"ticket_id"`        // a follow-up ticket when the one named was closed
	FollowUp  bool   `json:"follow_up"`        // the named ticket was closed
	JobID     int64  `json:"job_id,omitempty"` // the triage job it queued
}

// createCustomerMessage answers POST /v1/tickets/{id}/messages: the
// ticket's own customer writes again. It reopens a pending or solved
// ticket and triages it again, in one transaction; on a closed ticket it
// opens a follow-up. Once per Idempotency-Key.
func (s *Server) createCustomerMessage(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if who.IsAgent() {
		return &Error{Status: http.StatusForbidden, Code: "forbidden",
			Message: "agents answer with POST /v1/tickets/{id}/replies or write notes"}
	}
	ticket, err := s.visibleTicket(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return err
	}
	var req followUpRequest
	if err := decodeKeyed(w, r, &req); err != nil {
		return err
	}
	if err := validateText("body", req.Body); err != nil {
		return err
	}
	return s.createOnce(w, r, who, struct {
		Ticket string `json:"ticket"`
		followUpRequest
	}{ticket.ID, req}, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		m, err := s.desk.AddCustomerMessageTx(ctx, tx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: who, Body: req.Body})
		if err != nil {
			return 0, nil, err
		}
		status := http.StatusAccepted
		if m.FollowUp {
			status = http.StatusCreated
		}
		return status, followUpResponse{MessageID: m.Message.ID, TicketID: m.TicketID, FollowUp: m.FollowUp, JobID: m.JobID}, nil
	})
}

// statusOf checks an optional status a reply leaves the ticket in.
func statusOf(v vocab.Status) error {
	if v != "" && !v.Valid() {
		return unprocessable("invalid_status", "status must be one of %s", vocab.StatusNames())
	}
	return nil
}

type acceptHeldRequest struct {
	// As is whose message it becomes: "customer" (the ticket's customer
	// wrote it) or "participant" (its sender did, and may write again).
	As desk.AcceptAs `json:"as"`
}

// heldMessage reads the {id} and {message_id} of a held-message route.
func heldMessage(r *http.Request) (string, int64, error) {
	id := r.PathValue("id")
	if err := checkTicketID(id); err != nil {
		return "", 0, err
	}
	msgID, err := strconv.ParseInt(r.PathValue("message_id"), 10, 64)
	if err != nil || msgID <= 0 {
		return "", 0, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such message: " + r.PathValue("message_id")}
	}
	return id, msgID, nil
}

// acceptHeld answers POST /v1/tickets/{id}/held/{message_id}/accept
// (agents): a held mail becomes the customer's message, or its sender's,
// who may then write into the ticket.
func (s *Server) acceptHeld(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "accept held mail"); err != nil {
		return err
	}
	id, msgID, err := heldMessage(r)
	if err != nil {
		return err
	}
	var req acceptHeldRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if !req.As.Valid() {
		return unprocessable("invalid_as", `as must be "customer" or "participant"`)
	}
	msg, err := s.desk.AcceptHeld(r.Context(), who, id, msgID, req.As)
	if errors.Is(err, desk.ErrNoHeldSender) {
		return unprocessable("no_sender", "%s; accept it as the customer's instead", err.Error())
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewMessage(msg, nil))
	return nil
}

// splitHeld answers POST /v1/tickets/{id}/held/{message_id}/split
// (agents): a held mail becomes the first message of a new ticket of its
// sender's.
func (s *Server) splitHeld(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "split held mail"); err != nil {
		return err
	}
	id, msgID, err := heldMessage(r)
	if err != nil {
		return err
	}
	ticket, err := s.desk.SplitHeld(r.Context(), who, id, msgID)
	if errors.Is(err, desk.ErrNoHeldSender) {
		return unprocessable("no_sender", "%s, so no ticket of its own can be its sender's", err.Error())
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"ticket_id": ticket.ID})
	return nil
}
