package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/helpdesk-dev/helpdesk/metrics"
)

// HeaderRequestID names a request in the logs: taken from the caller when
// it is sensible, else made, and echoed in the answer.
const HeaderRequestID = "X-Request-Id"

// requestInfo is what the handlers learn of a request that its log line
// and metrics need: the route pattern that matched and who asked.
type requestInfo struct {
	route string
	actor string
	admin bool // the caller is an admin agent
}

type requestInfoKey struct{}

func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	if info == nil {
		return &requestInfo{}
	}
	return info
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush passes a flush on, for answers that stream.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// requestID is the caller's X-Request-Id when it is 1 to 128 printable
// ASCII characters, else a new random one.
func requestID(r *http.Request) string {
	if id := r.Header.Get(HeaderRequestID); id != "" && len(id) <= 128 {
		ok := true
		for i := 0; i < len(id) && ok; i++ {
			ok = id[i] > 0x20 && id[i] < 0x7f
		}
		if ok {
			return id
		}
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// observe logs one line per request and records its metrics: method,
// route pattern, status, duration, actor and request id.
func (s *Server) observe(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	start := time.Now()
	id := requestID(r)
	w.Header().Set(HeaderRequestID, id)
	info := &requestInfo{}
	rec := &statusRecorder{ResponseWriter: w}
	serve(rec, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info)))
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	elapsed := time.Since(start)
	route := info.route
	if route == "" {
		route = "unmatched" // a 404 for no endpoint: the path itself would make a label per URL
	}
	method := methodLabel(r.Method)
	metrics.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(rec.status)).Inc()
	metrics.HTTPDuration.WithLabelValues(route, method).Observe(elapsed.Seconds())
	level := slog.LevelInfo
	if rec.status >= 500 {
		level = slog.LevelError
	}
	s.logger.LogAttrs(r.Context(), level, "request", slog.String("method", r.Method), slog.String("route", route),
		slog.String("path", r.URL.Path), slog.Int("status", rec.status), slog.Duration("duration", elapsed),
		slog.String("actor", info.actor), slog.String("request_id", id), slog.Int64("bytes", rec.bytes))
}

// methodLabel is a request's method as a metric's label: one of HTTP's own
// (RFC 9110 §9), else "other". A method is any token the client likes, and
// each label value is a series kept for the process's life: a stranger
// sending methods of its own would otherwise grow the metrics without end.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}
