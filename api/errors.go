package api

import (
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/store"
)

// Error is an error with the HTTP status and code a client sees.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, when set, is sent as Retry-After (whole seconds).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func badRequest(code, message string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: message}
}

// ErrorOf maps the errors of the layers below onto statuses; it is the
// only place that knows both, for the API and for the console's pages.
func ErrorOf(err error) *Error {
	var apiErr *Error
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.Is(err, store.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	case errors.Is(err, jobs.ErrNotRetryable):
		return &Error{Status: http.StatusConflict, Code: "not_retryable", Message: err.Error()}
	case errors.Is(err, jobs.ErrInvalidState):
		return &Error{Status: http.StatusBadRequest, Code: "invalid_state", Message: err.Error()}
	case errors.Is(err, desk.ErrInvalidTransition):
		return &Error{Status: http.StatusConflict, Code: "invalid_transition", Message: err.Error()}
	case errors.Is(err, desk.ErrTicketClosed):
		return &Error{Status: http.StatusConflict, Code: "ticket_closed", Message: err.Error() + "; the customer's next message opens a follow-up"}
	case errors.Is(err, desk.ErrNoDraft):
		return &Error{Status: http.StatusConflict, Code: "no_draft", Message: err.Error()}
	case errors.Is(err, desk.ErrDraftStale):
		return &Error{Status: http.StatusConflict, Code: "draft_stale", Message: err.Error()}
	case errors.Is(err, desk.ErrUnknownAgent):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "unknown_agent", Message: err.Error()}
	case errors.Is(err, desk.ErrUnknownTeam):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "unknown_team", Message: err.Error()}
	case errors.Is(err, desk.ErrInvalidPriority):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid_priority", Message: err.Error()}
	case errors.Is(err, desk.ErrInvalidText):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid_text", Message: err.Error()}
	case errors.Is(err, desk.ErrInvalidFilename):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid_filename", Message: err.Error()}
	case errors.Is(err, desk.ErrAttachmentUnavailable):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "attachment_unavailable", Message: err.Error() +
			"; upload the file again with POST /v1/attachments"}
	case errors.Is(err, desk.ErrAttachmentTooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "attachment_too_large", Message: err.Error()}
	case errors.Is(err, desk.ErrJobBusy):
		return &Error{Status: http.StatusConflict, Code: "job_running", Message: err.Error()}
	case errors.Is(err, desk.ErrJobFinished):
		return &Error{Status: http.StatusConflict, Code: "job_finished", Message: err.Error()}
	case errors.Is(err, desk.ErrJobActive):
		return &Error{Status: http.StatusConflict, Code: "job_active", Message: err.Error()}
	case errors.Is(err, desk.ErrJobHistory):
		return &Error{Status: http.StatusConflict, Code: "job_is_history", Message: err.Error() + "; cancel it instead, which fails its mail"}
	case errors.Is(err, desk.ErrNotEmbedded):
		return &Error{Status: http.StatusConflict, Code: "not_embedded", Message: err.Error() + "; try again once the ticket is triaged"}
	case errors.Is(err, desk.ErrMergeSelf):
		return &Error{Status: http.StatusConflict, Code: "merge_into_itself", Message: err.Error()}
	case errors.Is(err, desk.ErrMergeIntoClosed):
		return &Error{Status: http.StatusConflict, Code: "merge_into_closed", Message: err.Error()}
	case errors.Is(err, desk.ErrAlreadyMerged):
		return &Error{Status: http.StatusConflict, Code: "already_merged", Message: err.Error()}
	case errors.Is(err, desk.ErrMergeOtherCustomer):
		return &Error{Status: http.StatusConflict, Code: "other_customer", Message: err.Error()}
	case errors.Is(err, desk.ErrTicketChanged):
		return &Error{Status: http.StatusConflict, Code: "ticket_changed", Message: err.Error() + "; read the ticket again (GET /v1/tickets/{id}) before you answer"}
	case errors.Is(err, desk.ErrInvalidSLA):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid_sla", Message: err.Error()}
	case errors.Is(err, desk.ErrUnknownCalendar):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "unknown_calendar", Message: err.Error() + "; PUT /v1/calendars/{name} adds one"}
	case errors.Is(err, desk.ErrCustomerExists):
		return &Error{Status: http.StatusConflict, Code: "customer_exists", Message: err.Error()}
	case errors.Is(err, store.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	case store.Unavailable(err):
		return &Error{Status: http.StatusServiceUnavailable, Code: "database_unavailable",
			Message: "the database cannot be reached; nothing was written; try again"}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; see the server log"}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	apiErr := ErrorOf(err)
	if apiErr.Code == "not_found" && errors.Is(err, store.ErrNotFound) {
		apiErr.Message = notFound(r) // in the API's words, not the store's
	}
	if apiErr.Status >= 500 && r.Context().Err() != nil {
		// The request ran out of time (PostgreSQL did not answer, most
		// likely); its transaction was rolled back.
		apiErr = &Error{Status: http.StatusServiceUnavailable, Code: "timeout",
			Message: "the request did not finish in time and changed nothing; try again"}
		w.Header().Set("Retry-After", "1")
	}
	if apiErr.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(apiErr.RetryAfter.Seconds()))))
	}
	if apiErr.Status >= 500 {
		s.logger.ErrorContext(r.Context(), "api: request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("error", err))
	}
	writeJSON(w, apiErr.Status, map[string]string{"error": apiErr.Code, "message": apiErr.Message})
}

// notFound says what a request named that is not there, by its route.
func notFound(r *http.Request) string {
	id := r.PathValue("id")
	switch {
	case r.PathValue("attachment_id") != "":
		return "ticket " + id + " has no attachment " + r.PathValue("attachment_id")
	case r.PathValue("message_id") != "":
		return "ticket " + id + " holds no message " + r.PathValue("message_id")
	case strings.HasPrefix(r.Pattern, "/v1/tickets/"):
		return "ticket " + id + " not found"
	case strings.HasPrefix(r.Pattern, "/v1/jobs/"):
		return "job " + id + " not found"
	case strings.HasPrefix(r.Pattern, "/v1/customers/"):
		return "customer " + id + " not found"
	case strings.HasPrefix(r.Pattern, "/v1/webhooks/"):
		return "webhook " + id + " not found"
	case strings.HasPrefix(r.Pattern, "/v1/mailboxes/"):
		return "mailbox " + r.PathValue("name") + " not found"
	case strings.HasPrefix(r.Pattern, "/v1/agents/"):
		return "agent " + r.PathValue("name") + " not found"
	case strings.HasPrefix(r.Pattern, "/v1/suppressions/"):
		return r.PathValue("address") + " is not suppressed"
	}
	return "not found"
}
