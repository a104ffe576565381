package api

import (
	"net/http"
	"strconv"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// maxListLimit bounds one page of GET /v1/jobs.
const maxListLimit = 1000

func jobID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("invalid_job_id", "job id must be a positive integer, got "+strconv.Quote(r.PathValue("id")))
	}
	return id, nil
}

// getJob answers GET /v1/jobs/{id}.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "read jobs"); err != nil {
		return err
	}
	id, err := jobID(r)
	if err != nil {
		return err
	}
	status, err := s.queue.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, status)
	return nil
}

// listJobs answers GET /v1/jobs?state=dead_letter[&after=ID][&limit=N].
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "list jobs"); err != nil {
		return err
	}
	q := r.URL.Query()
	params := jobs.ListParams{State: q.Get("state"), Limit: 100}
	if params.State == "" {
		return badRequest("invalid_state", "the state parameter is required, e.g. ?state=dead_letter")
	}
	if v := q.Get("after"); v != "" {
		after, err := strconv.ParseInt(v, 10, 64)
		if err != nil || after < 0 {
			return badRequest("invalid_after", "after must be a job id, got "+strconv.Quote(v))
		}
		params.AfterID = after
	}
	if v := q.Get("limit"); v != "" {
		limit, err := strconv.Atoi(v)
		if err != nil || limit < 1 || limit > maxListLimit {
			return badRequest("invalid_limit", "limit must be 1 to "+strconv.Itoa(maxListLimit)+", got "+strconv.Quote(v))
		}
		params.Limit = limit
	}
	list, next, err := s.queue.List(r.Context(), params)
	if err != nil {
		return err
	}
	if list == nil {
		list = []jobs.Status{}
	}
	body := map[string]any{"jobs": list}
	if next > 0 {
		body["next_after"] = next
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// retryJob answers POST /v1/jobs/{id}/retry.
func (s *Server) retryJob(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "retry jobs"); err != nil {
		return err
	}
	id, err := jobID(r)
	if err != nil {
		return err
	}
	status, err := s.queue.Retry(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, status)
	return nil
}
