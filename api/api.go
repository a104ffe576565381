// Package api serves helpdesk's HTTP API; errors become HTTP statuses here and nowhere else.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"riverqueue.com/riverui"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/egress"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/settings"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Config is what the API needs.
type Config struct {
	Logger *slog.Logger
	Pool   *pgxpool.Pool
	Queue  *jobs.Queue
	Desk   *desk.Desk
	// RequestTimeout bounds a request, its transaction included: past it
	// the request's context ends, the transaction rolls back and the
	// caller gets 503. Default 15s.
	RequestTimeout time.Duration
	// RatePerKey and BurstPerKey bound each API key's requests in this
	// process; past them 429 with Retry-After. Defaults 20/s, burst 40.
	RatePerKey  float64
	BurstPerKey int
	// Metrics serves /metrics (Prometheus) on this listener; off when a
	// listener of its own serves them.
	Metrics bool
	// ProbesOnly serves only /healthz, /readyz and, with Metrics, /metrics:
	// a worker process's listener.
	ProbesOnly bool
	// WebhookEgress is where webhooks may be delivered (jobs.Config's):
	// a URL it would refuse is not registered. Nil: public addresses only.
	WebhookEgress *egress.Policy
	// Resolver looks up a webhook's host at registration; nil: the system's.
	Resolver egress.Resolver
	// UISessionTTL is how long a River UI session lasts. Default 12h.
	UISessionTTL time.Duration
	// AuthFailRate is how many failed authentications a minute one client
	// address may make before it waits. Default 30.
	AuthFailRate float64
	// TrustedProxies are the proxies whose X-Forwarded-For and
	// X-Forwarded-Proto are believed.
	TrustedProxies []netip.Prefix
}

// readyTimeout is how long /readyz waits for PostgreSQL to answer.
const readyTimeout = time.Second

// Server is the HTTP API.
type Server struct {
	logger  *slog.Logger
	pool    *pgxpool.Pool
	queue   *jobs.Queue
	desk    *desk.Desk
	timeout time.Duration
	limiter *keyLimiter
	mux     *http.ServeMux
	ui      *riverui.Handler // nil when the UI is not mounted
	routes  []string         // "METHOD /pattern" of every operation

	egress         *egress.Policy
	resolver       egress.Resolver
	sessionTTL     time.Duration
	guard          *authGuard
	keys           keyCache
	trustedProxies []netip.Prefix
}

// New returns the API; MountUI adds River UI.
func New(config Config) *Server {
	settings.Defaults(config.Settings())
	s := &Server{logger: config.Logger, pool: config.Pool, queue: config.Queue, desk: config.Desk,
		timeout: config.RequestTimeout, mux: http.NewServeMux()}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.limiter = newKeyLimiter(config.RatePerKey, config.BurstPerKey)
	s.egress, s.resolver, s.sessionTTL, s.trustedProxies = config.WebhookEgress, config.Resolver, config.UISessionTTL, config.TrustedProxies
	if s.egress == nil {
		s.egress = &egress.Policy{}
	}
	s.guard = newAuthGuard(config.AuthFailRate)
	// healthz says the process runs; readyz that it can serve, PostgreSQL included.
	s.probe("/healthz", func(context.Context) error { return nil })
	s.probe("/readyz", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, readyTimeout)
		defer cancel()
		return s.pool.Ping(ctx)
	})
	if config.Metrics {
		s.routes = append(s.routes, "GET /metrics")
		metricsHandler := metrics.Handler()
		s.handle("/metrics", func(w http.ResponseWriter, r *http.Request) {
			metricsHandler.ServeHTTP(w, r)
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		msg := "no such endpoint: " + r.URL.Path
		if config.ProbesOnly {
			msg += "; this process is a worker (HELPDESK_ROLE=worker), which serves only /healthz, /readyz and /metrics"
		}
		s.writeError(w, r, &Error{Status: http.StatusNotFound, Code: "not_found", Message: msg})
	})
	if config.ProbesOnly {
		return s
	}
	s.serveOpenAPI()
	s.route("/v1/tickets", map[string]handlerFunc{http.MethodGet: s.listTickets, http.MethodPost: s.createTicket})
	s.route("/v1/tickets/{id}", map[string]handlerFunc{http.MethodGet: s.getTicket, http.MethodPatch: s.patchTicket})
	s.route("/v1/tickets/{id}/replies", map[string]handlerFunc{http.MethodPost: s.createReply})
	s.route("/v1/tickets/{id}/notes", map[string]handlerFunc{http.MethodPost: s.createNote})
	s.route("/v1/tickets/{id}/similar", map[string]handlerFunc{http.MethodGet: s.getSimilar})
	s.route("/v1/tickets/{id}/merge", map[string]handlerFunc{http.MethodPost: s.mergeTicket})
	s.route("/v1/tickets/{id}/messages", map[string]handlerFunc{http.MethodGet: s.listMessages, http.MethodPost: s.createCustomerMessage})
	s.route("/v1/tickets/{id}/held/{message_id}/accept", map[string]handlerFunc{http.MethodPost: s.acceptHeld})
	s.route("/v1/tickets/{id}/held/{message_id}/split", map[string]handlerFunc{http.MethodPost: s.splitHeld})
	s.route("/v1/tickets/{id}/attachments/{attachment_id}", map[string]handlerFunc{http.MethodGet: s.getAttachment, http.MethodHead: s.getAttachment})
	s.route("/v1/attachments", map[string]handlerFunc{http.MethodPost: s.uploadAttachment})
	s.route("/v1/agents", map[string]handlerFunc{http.MethodGet: s.listAgents})
	s.route("/v1/agents/{name}", map[string]handlerFunc{http.MethodPatch: s.patchAgent})
	s.route("/v1/customers", map[string]handlerFunc{http.MethodGet: s.listCustomers, http.MethodPost: s.createCustomer})
	s.route("/v1/customers/{id}", map[string]handlerFunc{http.MethodGet: s.getCustomer})
	s.route("/v1/jobs", map[string]handlerFunc{http.MethodGet: s.listJobs})
	s.route("/v1/jobs/{id}", map[string]handlerFunc{http.MethodGet: s.getJob})
	s.route("/v1/jobs/{id}/retry", map[string]handlerFunc{http.MethodPost: s.retryJob})
	s.route("/v1/provider", map[string]handlerFunc{http.MethodGet: s.getProvider})
	s.route("/v1/suppressions", map[string]handlerFunc{http.MethodGet: s.listSuppressions})
	s.route("/v1/suppressions/{address}", map[string]handlerFunc{http.MethodDelete: s.clearSuppression})
	s.route("/v1/mailboxes", map[string]handlerFunc{http.MethodGet: s.listMailboxes, http.MethodPost: s.createMailbox})
	s.route("/v1/mailboxes/{name}", map[string]handlerFunc{http.MethodGet: s.getMailbox, http.MethodPatch: s.patchMailbox})
	s.route("/v1/sla/policies", map[string]handlerFunc{http.MethodGet: s.listSLAPolicies, http.MethodPut: s.putSLAPolicy})
	s.route("/v1/sla/policies/{priority}", map[string]handlerFunc{http.MethodDelete: s.deleteSLAPolicy})
	s.route("/v1/sla/due", map[string]handlerFunc{http.MethodGet: s.getSLADue})
	s.route("/v1/saved-replies", map[string]handlerFunc{http.MethodGet: s.listSavedReplies, http.MethodPost: s.createSavedReply})
	s.route("/v1/saved-replies/{id}", map[string]handlerFunc{http.MethodDelete: s.deleteSavedReply})
	s.route("/v1/calendars", map[string]handlerFunc{http.MethodGet: s.listCalendars})
	s.route("/v1/calendars/{name}", map[string]handlerFunc{http.MethodPut: s.putCalendar})
	s.route("/v1/webhooks", map[string]handlerFunc{http.MethodGet: s.listWebhooks, http.MethodPost: s.createWebhook})
	s.route("/v1/webhooks/{id}", map[string]handlerFunc{http.MethodDelete: s.deleteWebhook})
	return s
}

// ServeHTTP serves the API with a log line and metrics per request; a
// panic in a handler becomes a 500, not a dropped connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	s.observe(w, r.WithContext(ctx), func(w http.ResponseWriter, r *http.Request) {
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
	})
}

// probe serves a health check: GET and HEAD only, 200 when check passes
// and 503 when it does not, without authentication.
func (s *Server) probe(pattern string, check func(context.Context) error) {
	s.routes = append(s.routes, "GET "+pattern)
	s.handle(pattern, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
				Message: r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		status, body := http.StatusOK, map[string]string{"status": "ok"}
		if err := check(r.Context()); err != nil {
			s.logger.WarnContext(r.Context(), "not ready", slog.String("path", r.URL.Path), slog.Any("error", err))
			status, body = http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "unavailable",
				"message": "PostgreSQL did not answer within " + readyTimeout.String()}
		}
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, body)
	})
}

// handle registers h on the mux under pattern, which the request's log
// line and metrics then name as its route.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		infoOf(r.Context()).route = pattern
		h(w, r)
	})
}

// handlerFunc serves an authenticated request and returns its error
// instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request, who vocab.Actor) error

// route registers handlers by method behind authentication, so that every
// other method, and every caller without a valid key, gets the same JSON
// errors as everything else instead of net/http's plain text.
func (s *Server) route(pattern string, byMethod map[string]handlerFunc) {
	for m := range byMethod {
		s.routes = append(s.routes, m+" "+pattern)
	}
	s.handle(pattern, func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		h, ok := byMethod[r.Method]
		if !ok {
			for m := range byMethod {
				w.Header().Add("Allow", m)
			}
			s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
				Message: r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		caller, keyHash, err := s.authenticate(r.Context(), r)
		var who vocab.Actor
		if err == nil {
			who = caller.Actor
			info.actor, info.admin = who.String(), caller.Admin
			// Every request counts toward its key's rate, a replayed
			// Idempotency-Key too: a replay still costs a read.
			if wait := s.limiter.wait(keyHash, time.Now()); wait > 0 {
				err = tooManyRequests(w, wait)
			}
		}
		if err == nil {
			err = h(w, r, who)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	// The answer may quote what the caller sent (encodeJSON leaves < and >
	// as they are): no browser may read it as anything but JSON.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(encodeJSON(v))
}

// encodeJSON writes Message-IDs as <id@host>, not as \u003cid@host\u003e:
// these answers are read by people and scripts, not pasted into HTML.
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return buf.Bytes()
}
