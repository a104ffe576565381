package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"riverqueue.com/riverui"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/store"
)

// UIPrefix is where River UI is mounted.
const UIPrefix = "/riverui"

// uiCookie holds a UI session's id; the store keeps only its hash.
const uiCookie = "helpdesk_ui"

// uiMaxBody bounds what River UI's requests may send.
const uiMaxBody = 1 << 20

// MountUI serves River UI at UIPrefix to agents only. Pages take a session
// from the login page; the UI's API takes that session, Basic auth (the
// agent's name and API key) or a bearer key. Every request from another
// site that could change something is refused (CrossOriginProtection), no
// page may be framed, and bodies are bounded. What changes jobs goes
// through the service: a retry gets its kind's whole budget, a cancel
// fails a delivery's mail with a note (desk.CancelJob), a delete keeps
// unfinished jobs and deliveries; cancel, delete and the queues' pause,
// resume and settings are for admins.
func (s *Server) MountUI() error {
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(s.queue.Client, nil), Logger: s.logger, Prefix: UIPrefix})
	if err != nil {
		return fmt.Errorf("river ui: %w", err)
	}
	s.ui = ui
	cop := http.NewCrossOriginProtection()
	guarded := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
			w.Header().Set("X-Frame-Options", "DENY")
			w.Header().Set("Referrer-Policy", "same-origin")
			if err := cop.Check(r); err != nil {
				s.writeError(w, r, &Error{Status: http.StatusForbidden, Code: "cross_origin",
					Message: "a request from another site may not change anything here"})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, uiMaxBody)
			h(w, r)
		}
	}
	s.handle(UIPrefix+"/login", guarded(s.uiLogin))
	s.handle(UIPrefix+"/logout", guarded(s.uiLogout))
	s.handle(UIPrefix+"/", guarded(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		api := strings.HasPrefix(r.URL.Path, UIPrefix+"/api/")
		caller, err := s.uiCaller(r, api)
		switch {
		case errors.Is(err, errUnauthorized) && !api:
			http.Redirect(w, r, UIPrefix+"/login", http.StatusSeeOther)
			return
		case err != nil:
			s.writeError(w, r, err)
			return
		}
		info.actor, info.admin = caller.Actor.String(), caller.Admin
		// River UI hands the queue, kind or workflow the URL names to
		// PostgreSQL as it is: a NUL or bytes that are not UTF-8 came back
		// as a 500.
		if !textOnly(r.URL) {
			s.writeError(w, r, badRequest("invalid_request", "the path and the query must be UTF-8 text without NUL characters"))
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			s.serveUI(ui, w, r)
			return
		}
		path := strings.TrimPrefix(r.URL.Path, UIPrefix)
		switch {
		case r.Method == http.MethodPost && path == "/api/jobs/retry":
			s.uiJobs(w, r, func(ctx context.Context, id int64) error { _, err := s.queue.Retry(ctx, id); return err })
		case r.Method == http.MethodPost && path == "/api/jobs/cancel":
			if s.uiAdmin(w, r, "cancel jobs") {
				s.uiJobs(w, r, func(ctx context.Context, id int64) error {
					_, err := s.desk.CancelJob(ctx, caller.Actor, id)
					return err
				})
			}
		case r.Method == http.MethodPost && path == "/api/jobs/delete":
			if s.uiAdmin(w, r, "delete jobs") {
				s.uiJobs(w, r, s.queue.Delete)
			}
		default:
			// The queues' pause, resume and settings, and whatever else
			// River UI may add that changes something.
			if s.uiAdmin(w, r, "change queues") {
				s.serveUI(ui, w, r)
			}
		}
	}))
	s.handle(UIPrefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, UIPrefix+"/", http.StatusMovedPermanently)
	})
	return nil
}

// textOnly says whether u's path and query, decoded, are UTF-8 without NUL.
func textOnly(u *url.URL) bool {
	text := func(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
	if !text(u.Path) {
		return false
	}
	for k, vs := range u.Query() {
		if !text(k) {
			return false
		}
		for _, v := range vs {
			if !text(v) {
				return false
			}
		}
	}
	return true
}

// Start starts what the API runs in the background: River UI's caches.
func (s *Server) Start(ctx context.Context) error {
	if s.ui == nil {
		return nil
	}
	return s.ui.Start(ctx)
}

// uiAdmin answers 403 to a caller who is not an admin, and says whether
// the request may go on.
func (s *Server) uiAdmin(w http.ResponseWriter, r *http.Request, what string) bool {
	if err := requireAdmin(r, what); err != nil {
		s.writeError(w, r, err)
		return false
	}
	return true
}

// uiCaller is the agent a UI request comes from: its session, or for the
// UI's API also Basic auth or a bearer key (a browser sends a cached Basic
// login to any page, so pages take none); 401 without, 403 for a
// customer's key.
func (s *Server) uiCaller(r *http.Request, api bool) (*store.Caller, error) {
	ctx := r.Context()
	keyLookup := func(hash []byte) (*store.Caller, error) { return store.New(s.pool).APIKeyCaller(ctx, hash) }
	var (
		c   *store.Caller
		err error
	)
	user, key, basic := r.BasicAuth()
	switch {
	case api && basic:
		if c, err = s.callerOf(ctx, r, HashAPIKey(key), keyLookup); err == nil && c.Actor.ID() != user {
			err = errUnauthorized // the key is not this user's
		}
	case api && bearerKey(r) != "":
		c, err = s.callerOf(ctx, r, HashAPIKey(bearerKey(r)), keyLookup)
	default:
		cookie, cerr := r.Cookie(uiCookie)
		if cerr != nil || cookie.Value == "" {
			return nil, errUnauthorized
		}
		c, err = s.callerOf(ctx, r, HashAPIKey(cookie.Value), func(hash []byte) (*store.Caller, error) {
			return store.New(s.pool).UISessionCaller(ctx, hash)
		})
	}
	if err != nil {
		return nil, err
	}
	if err := requireAgent(c.Actor, "use River UI"); err != nil {
		return nil, err
	}
	return c, nil
}

// uiLogin is a small page that takes an agent's API key and opens a
// session: a random id in a cookie (HttpOnly, SameSite=Strict, Secure over
// TLS), of which the store keeps the hash, with the key and an expiry.
func (s *Server) uiLogin(w http.ResponseWriter, r *http.Request) {
	problem := ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		key := strings.TrimSpace(r.PostFormValue("key"))
		ctx := r.Context()
		c, err := s.callerOf(ctx, r, HashAPIKey(key), func(hash []byte) (*store.Caller, error) {
			return store.New(s.pool).APIKeyCaller(ctx, hash)
		})
		switch {
		case err == nil && c.Actor.IsAgent():
			id := make([]byte, 32)
			_, _ = rand.Read(id)
			session := base64.RawURLEncoding.EncodeToString(id)
			if err := store.New(s.pool).InsertUISession(ctx, HashAPIKey(session), c.KeyID, s.sessionTTL); err != nil {
				s.writeError(w, r, err)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: session, Path: UIPrefix, MaxAge: int(s.sessionTTL.Seconds()),
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(r)})
			http.Redirect(w, r, UIPrefix+"/", http.StatusSeeOther)
			return
		case err == nil, errors.Is(err, errUnauthorized):
			problem = "That is not an agent's API key."
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
		default:
			s.writeError(w, r, err)
			return
		}
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: r.Method + " is not allowed on " + r.URL.Path})
		return
	}
	s.uiPage(w, "River UI", "The jobs of helpdesk, for agents. Sign in with your API key (<code>helpdesk apikey create -actor agent:NAME</code>).",
		problem, `<form method="post" action="`+UIPrefix+`/login"><label>API key <input type="password" name="key" autocomplete="off" autofocus></label>
<input type="submit" value="Sign in"></form>`)
}

// uiLogout ends the session: GET shows the button, POST deletes it.
func (s *Server) uiLogout(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.uiPage(w, "Sign out", "End this browser's River UI session.", "",
			`<form method="post" action="`+UIPrefix+`/logout"><input type="submit" value="Sign out"></form>`)
	case http.MethodPost:
		if c, err := r.Cookie(uiCookie); err == nil && c.Value != "" {
			if err := store.New(s.pool).DeleteUISession(r.Context(), HashAPIKey(c.Value)); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: "", Path: UIPrefix, MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: s.secure(r)})
		http.Redirect(w, r, UIPrefix+"/login", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: r.Method + " is not allowed on " + r.URL.Path})
	}
}

// uiPage writes one of the small pages around River UI; body is trusted
// markup, problem is text.
func (s *Server) uiPage(w http.ResponseWriter, title, intro, problem, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	fmt.Fprintf(w, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>helpdesk · %s</title>
<style>body{font-family:sans-serif;max-width:28em;margin:4em auto}input{width:100%%;padding:.4em;margin:.4em 0}</style></head>
<body><h1>%s</h1><p>%s</p>
<p style="color:#b00">%s</p>
%s</body></html>
`, html.EscapeString(title), html.EscapeString(title), intro, html.EscapeString(problem), body)
}

// uiJobs does River UI's job actions the service's way, one job at a
// time, with River UI's error shape ({"message"}) and ours.
func (s *Server) uiJobs(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, id int64) error) {
	var req struct {
		IDs []json.Number `json:"ids"`
	}
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil || len(req.IDs) == 0 || len(req.IDs) > 1000 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_body", "message": "send {\"ids\": [job ids]}, 1 to 1000 of them"})
		return
	}
	for _, n := range req.IDs {
		id, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || id <= 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_body", "message": "job ids are positive integers, got " + n.String()})
			return
		}
		if err := do(r.Context(), id); err != nil {
			apiErr := ErrorOf(err)
			if errors.Is(err, jobs.ErrNotRetryable) {
				apiErr.Message = err.Error() + "; only failed and dead-letter jobs are retried, with a whole attempt budget"
			}
			if apiErr.Status >= 500 {
				s.logger.ErrorContext(r.Context(), "river ui: job action", slog.String("path", r.URL.Path), slog.Int64("job_id", id), slog.Any("error", err))
			}
			writeJSON(w, apiErr.Status, map[string]string{"error": apiErr.Code, "message": apiErr.Message})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// serveUI serves a River UI request, its refusals in the API's shape:
// River UI's API answers {"message"}, and every refusal of ours is
// {"error", "message"}, so a client (or a probe) reads one shape anywhere.
// The UI's own page reads the message as before.
//
// A path under its API that it has no endpoint for gets the UI's page
// (its router sends every unknown path there); that is a 404 here.
func (s *Server) serveUI(ui http.Handler, w http.ResponseWriter, r *http.Request) {
	ew := &uiErrorWriter{ResponseWriter: w, api: strings.HasPrefix(r.URL.Path, UIPrefix+"/api/")}
	ui.ServeHTTP(ew, r)
	if refusal := ew.refusal(r); refusal != nil {
		ew.Header().Del("Content-Length")
		ew.Header().Del("Content-Encoding")
		s.writeError(ew.ResponseWriter, r, refusal)
	}
}

// uiErrorWriter holds back an answer of 400 or more, to give it an error code.
type uiErrorWriter struct {
	http.ResponseWriter
	api       bool // the request is for River UI's API
	status    int
	noneThere bool // the UI's page for an API path
	body      []byte
}

func (e *uiErrorWriter) WriteHeader(status int) {
	if e.status != 0 {
		return
	}
	e.status = status
	if e.api && status < 300 && strings.HasPrefix(e.Header().Get("Content-Type"), "text/html") {
		e.status, e.noneThere = http.StatusNotFound, true
	}
	if e.status < 400 {
		e.ResponseWriter.WriteHeader(status)
	}
}

func (e *uiErrorWriter) Write(b []byte) (int, error) {
	if e.status == 0 {
		e.WriteHeader(http.StatusOK)
	}
	if e.status < 400 {
		return e.ResponseWriter.Write(b)
	}
	if len(e.body)+len(b) <= uiMaxBody {
		e.body = append(e.body, b...)
	}
	return len(b), nil
}

// refusal is River UI's answer of 400 or more as the API's error, its
// message kept; nil for any other answer, which has gone out as it was.
func (e *uiErrorWriter) refusal(r *http.Request) *Error {
	if e.status < 400 {
		return nil
	}
	var answer struct {
		Message string `json:"message"`
	}
	if e.noneThere {
		answer.Message = "no such endpoint: " + r.URL.Path
	} else {
		_ = json.Unmarshal(e.body, &answer)
	}
	code := map[int]string{http.StatusBadRequest: "invalid_request", http.StatusNotFound: "not_found",
		http.StatusForbidden: "forbidden", http.StatusConflict: "conflict", http.StatusMethodNotAllowed: "method_not_allowed"}[e.status]
	if code == "" {
		code = strings.ReplaceAll(strings.ToLower(http.StatusText(e.status)), " ", "_")
	}
	return &Error{Status: e.status, Code: code, Message: cmp.Or(answer.Message, http.StatusText(e.status))}
}
