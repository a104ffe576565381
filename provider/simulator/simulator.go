// Package simulator serves the provider's OpenAI-compatible API deterministically, with faults switchable at run time.
package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/helpdesk-dev/helpdesk/provider"
)

// Mode is how the simulator answers.
type Mode string

// The modes of the simulator.
const (
	ModeNormal  Mode = "normal"  // deterministic, useful answers
	ModeOutage  Mode = "outage"  // 503 to everything
	ModeQuota   Mode = "quota"   // QuotaCalls per QuotaWindow, then 429 with Retry-After
	ModeSlow    Mode = "slow"    // answers after SlowDelay, past a client's timeout, or when the settings change
	ModeInvalid Mode = "invalid" // 200 with answers that cannot be used
)

// Settings are the simulator's switches.
type Settings struct {
	Mode        Mode     `json:"mode"`
	QuotaCalls  int      `json:"quota_calls"`
	QuotaWindow Duration `json:"quota_window"`
	SlowDelay   Duration `json:"slow_delay"`
}

// DefaultSettings answer normally; quota and slow values apply once their
// mode is chosen.
func DefaultSettings() Settings {
	return Settings{Mode: ModeNormal, QuotaCalls: 50, QuotaWindow: Duration(time.Minute), SlowDelay: Duration(30 * time.Second)}
}

func (s Settings) validate() error {
	switch s.Mode {
	case ModeNormal, ModeOutage, ModeQuota, ModeSlow, ModeInvalid:
	default:
		return fmt.Errorf("unknown mode %q: want normal, outage, quota, slow or invalid", s.Mode)
	}
	if s.QuotaCalls < 0 {
		return fmt.Errorf("quota_calls %d: must be 0 or more", s.QuotaCalls)
	}
	if s.QuotaWindow <= 0 {
		return fmt.Errorf("quota_window %s: must be positive", time.Duration(s.QuotaWindow))
	}
	if s.SlowDelay < 0 {
		return fmt.Errorf("slow_delay %s: must not be negative", time.Duration(s.SlowDelay))
	}
	return nil
}

// Server is the simulated provider. Its zero value is not usable; call New.
type Server struct {
	mu          sync.Mutex
	settings    Settings
	windowStart time.Time
	windowCalls int
	refused     int                       // calls answered 429
	calls       map[string]map[string]int // ticket → task → calls received
	prompts     map[string][]string       // ticket → the chat requests' texts, bounded
	promptOrder []string                  // tickets of prompts, oldest first
	changed     chan struct{}             // closed, and made anew, by each Set: a slow call held then answers
	mux         *http.ServeMux
}

// keptPrompts is how many tickets' requests Prompts remembers: the
// simulator also stands in for a provider in a running service, where
// tickets come without end.
const keptPrompts = 1024

// New returns a simulator with the given settings.
func New(settings Settings) (*Server, error) {
	if err := settings.validate(); err != nil {
		return nil, err
	}
	s := &Server{settings: settings, calls: map[string]map[string]int{}, prompts: map[string][]string{},
		changed: make(chan struct{}), mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	s.mux.HandleFunc("GET /admin/mode", s.handleGetMode)
	s.mux.HandleFunc("PUT /admin/mode", s.handleSetMode)
	s.mux.HandleFunc("GET /admin/calls", s.handleCalls)
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Set switches the simulator's settings; a new quota window starts, and
// the calls slow mode holds answer now, as a provider that recovered would.
func (s *Server) Set(settings Settings) error {
	if err := settings.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings = settings
	close(s.changed)
	s.changed = make(chan struct{})
	s.windowStart, s.windowCalls, s.refused = time.Time{}, 0, 0
	return nil
}

// SetMode switches only the mode.
func (s *Server) SetMode(mode Mode) error {
	settings := s.Settings()
	settings.Mode = mode
	return s.Set(settings)
}

// Settings returns the current settings.
func (s *Server) Settings() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings
}

// Calls returns how many calls the simulator received for a ticket, by task,
// whatever it answered.
func (s *Server) Calls(ticketID string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for task, n := range s.calls[ticketID] {
		out[task] = n
	}
	return out
}

// Prompts returns the texts of the chat requests made for a ticket, oldest
// first, each its messages joined by blank lines: what a test reads to see
// what the provider was told. Only the newest tickets' are kept.
func (s *Server) Prompts(ticketID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.prompts[ticketID]...)
}

func (s *Server) recordPrompt(ticketID string, msgs []provider.ChatMessage) {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = m.Content
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.prompts[ticketID]; !ok {
		if len(s.promptOrder) >= keptPrompts {
			delete(s.prompts, s.promptOrder[0])
			s.promptOrder = s.promptOrder[1:]
		}
		s.promptOrder = append(s.promptOrder, ticketID)
	}
	s.prompts[ticketID] = append(s.prompts[ticketID], strings.Join(parts, "\n\n"))
}

// TotalCalls returns how many calls the simulator received in all.
func (s *Server) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for _, byTask := range s.calls {
		for _, n := range byTask {
			total += n
		}
	}
	return total
}

// quotaState is where the quota window stands after a call, for the
// rate limit headers.
type quotaState struct {
	limit, remaining int
	reset            time.Duration
}

// Refused returns how many calls the simulator answered 429.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// admit counts the call and says how to answer it: the mode, for a
// refused quota call the wait until the window reopens, and in quota mode
// where the window stands.
//
// changed is closed when the settings change after the call came.
func (s *Server) admit(r *http.Request) (settings Settings, wait time.Duration, q *quotaState, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed = s.changed
	ticket, task := r.Header.Get(provider.HeaderTicket), r.Header.Get(provider.HeaderTask)
	if s.calls[ticket] == nil {
		s.calls[ticket] = map[string]int{}
	}
	s.calls[ticket][task]++

	if s.settings.Mode != ModeQuota {
		return s.settings, 0, nil, changed
	}
	now := time.Now()
	window := time.Duration(s.settings.QuotaWindow)
	if s.windowStart.IsZero() || now.Sub(s.windowStart) >= window {
		s.windowStart, s.windowCalls = now, 0
	}
	q = &quotaState{limit: s.settings.QuotaCalls, reset: s.windowStart.Add(window).Sub(now)}
	if s.windowCalls >= s.settings.QuotaCalls {
		s.refused++
		return s.settings, q.reset, q, changed
	}
	s.windowCalls++
	q.remaining = s.settings.QuotaCalls - s.windowCalls
	return s.settings, 0, q, changed
}

// fault answers the call if the mode says it must fail, and reports whether it did.
func (s *Server) fault(w http.ResponseWriter, r *http.Request) (settings Settings, answered bool) {
	// Drain the body: net/http notices a client that gave up, and cancels
	// r.Context(), only once the body has been read to its end.
	_, _ = io.Copy(io.Discard, r.Body)
	settings, wait, quota, changed := s.admit(r)
	if quota != nil {
		// As OpenAI sends them: the budget of the window, what is left of
		// it, and when it is whole again.
		w.Header().Set(provider.HeaderLimitRequests, strconv.Itoa(quota.limit))
		w.Header().Set(provider.HeaderRemainingRequests, strconv.Itoa(quota.remaining))
		w.Header().Set(provider.HeaderResetRequests, quota.reset.Round(time.Millisecond).String())
	}
	switch settings.Mode {
	case ModeOutage:
		writeError(w, http.StatusServiceUnavailable, "the simulated provider is in outage mode", "server_error")
		return settings, true
	case ModeQuota:
		if wait > 0 {
			// RFC 9110 §10.2.3: delay-seconds, rounded up so a client that obeys it lands in the new window.
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeError(w, http.StatusTooManyRequests, "rate limit reached for requests", "rate_limit_exceeded")
			return settings, true
		}
	case ModeSlow:
		select {
		case <-time.After(time.Duration(settings.SlowDelay)):
		case <-changed:
		case <-r.Context().Done():
			return settings, true
		}
	}
	return settings, false
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req provider.ChatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error(), "invalid_request_error")
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages must not be empty", "invalid_request_error")
		return
	}
	s.recordPrompt(r.Header.Get(provider.HeaderTicket), req.Messages)
	settings, answered := s.fault(w, r)
	if answered {
		return
	}
	p := parsePrompt(lastUserMessage(req.Messages))
	p.examples = parseExamples(req.Messages)
	var content string
	switch {
	case settings.Mode == ModeInvalid && req.ResponseFormat != nil:
		content = "I think this is probably about billing."
	case settings.Mode == ModeInvalid:
		content = ""
	case req.ResponseFormat != nil && req.ResponseFormat.Type == "json_object":
		c := Classify(p.subject+"\n"+p.body(), p.teams)
		b, _ := json.Marshal(c)
		content = string(b)
	default:
		content = Draft(p)
	}
	writeJSON(w, http.StatusOK, provider.ChatResponse{
		ID:      "chatcmpl-sim",
		Object:  "chat.completion",
		Model:   req.Model,
		Choices: []provider.ChatChoice{{Message: provider.ChatMessage{Role: "assistant", Content: content}, FinishReason: "stop"}},
		Usage:   usage(p.subject+" "+p.body(), content),
	})
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req provider.EmbeddingRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error(), "invalid_request_error")
		return
	}
	settings, answered := s.fault(w, r)
	if answered {
		return
	}
	resp := provider.EmbeddingResponse{Object: "list", Model: req.Model, Usage: usage(req.Input, "")}
	if settings.Mode != ModeInvalid {
		resp.Data = []provider.EmbeddingData{{Object: "embedding", Embedding: Embed(req.Input)}}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleGetMode(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Settings())
}

// handleSetMode takes a partial Settings: fields left out keep their value.
func (s *Server) handleSetMode(w http.ResponseWriter, r *http.Request) {
	settings := s.Settings()
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&settings); err != nil {
		writeError(w, http.StatusBadRequest, "invalid settings: "+err.Error(), "invalid_request_error")
		return
	}
	if err := s.Set(settings); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error(), "invalid_request_error")
		return
	}
	writeJSON(w, http.StatusOK, settings)
}

func (s *Server) handleCalls(w http.ResponseWriter, r *http.Request) {
	if ticket := r.URL.Query().Get("ticket"); ticket != "" {
		writeJSON(w, http.StatusOK, map[string]any{"ticket": ticket, "calls": s.Calls(ticket)})
		return
	}
	s.mu.Lock()
	all := make(map[string]map[string]int, len(s.calls))
	for ticket, byTask := range s.calls {
		all[ticket] = map[string]int{}
		for task, n := range byTask {
			all[ticket][task] = n
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"total": s.TotalCalls(), "calls": all})
}

// Running is a simulator listening on a loopback port.
type Running struct {
	*Server
	URL    string
	server *http.Server
}

// Listen starts a simulator on addr (":0" style addresses pick a free port).
func Listen(addr string, settings Settings) (*Running, error) {
	sim, err := New(settings)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("simulator listen on %s: %w", addr, err)
	}
	server := &http.Server{Handler: sim, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(ln) }()
	return &Running{Server: sim, URL: "http://" + ln.Addr().String(), server: server}, nil
}

// Close stops listening and ends calls in progress.
func (r *Running) Close() error {
	if err := r.server.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, message, typ string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(provider.ErrorBody(message, typ))
}
