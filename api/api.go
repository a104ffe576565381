// Package api serves helpdesk's HTTP API; errors become HTTP statuses here and nowhere else.
package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"

	"helpdesk/jobs"
)

// Server is the HTTP API.
type Server struct {
	logger *slog.Logger
	queue  *jobs.Queue
	mux    *http.ServeMux
}

// New returns the API over the queue.
func New(logger *slog.Logger, queue *jobs.Queue) *Server {
	s := &Server{logger: logger, queue: queue, mux: http.NewServeMux()}
	s.route("/healthz", map[string]handlerFunc{http.MethodGet: s.health})
	s.route("/v1/jobs", map[string]handlerFunc{http.MethodGet: s.listJobs})
	s.route("/v1/jobs/{id}", map[string]handlerFunc{http.MethodGet: s.getJob})
	s.route("/v1/jobs/{id}/retry", map[string]handlerFunc{http.MethodPost: s.retryJob})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint: " + r.URL.Path})
	})
	return s
}

// ServeHTTP serves the API; a panic in a handler becomes a 500, not a dropped connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.logger.ErrorContext(r.Context(), "api: panic", slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			s.writeError(w, r, errors.New("panic in handler"))
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route registers handlers by method, so that any other method gets the
// same JSON error as everything else instead of net/http's plain text.
func (s *Server) route(pattern string, byMethod map[string]handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		h, ok := byMethod[r.Method]
		if !ok {
			for m := range byMethod {
				w.Header().Add("Allow", m)
			}
			s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
				Message: r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
