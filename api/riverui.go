package api

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"riverqueue.com/riverui"

	"helpdesk/jobs"
	"helpdesk/vocab"
)

// UIPrefix is where River UI is mounted.
const UIPrefix = "/riverui"

// uiCookie holds an agent's UI session: the hash of the key the agent
// logged in with, so that revoking the key ends the session too.
const (
	uiCookie     = "helpdesk_ui"
	uiSessionAge = 12 * time.Hour
)

// MountUI serves River UI at UIPrefix to agents only: by a session cookie
// from the login page, by Basic auth (the agent's name and API key) or by
// a bearer key. A retry from the UI goes through the queue's own retry,
// which gives the job its whole attempt budget; River UI's would add one
// attempt.
func (s *Server) MountUI() error {
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(s.queue.Client, nil), Logger: s.logger, Prefix: UIPrefix})
	if err != nil {
		return fmt.Errorf("river ui: %w", err)
	}
	s.ui = ui
	s.handle(UIPrefix+"/login", s.uiLogin)
	s.handle(UIPrefix+"/", func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		api := strings.HasPrefix(r.URL.Path, UIPrefix+"/api/")
		who, err := s.uiAgent(r)
		switch {
		case errors.Is(err, errUnauthorized) && !api:
			http.Redirect(w, r, UIPrefix+"/login", http.StatusSeeOther)
			return
		case err != nil:
			s.writeError(w, r, err)
			return
		}
		info.actor = who.String()
		if r.Method == http.MethodPost && r.URL.Path == UIPrefix+"/api/jobs/retry" {
			s.uiRetry(w, r)
			return
		}
		ui.ServeHTTP(w, r)
	})
	s.handle(UIPrefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, UIPrefix+"/", http.StatusMovedPermanently)
	})
	return nil
}

// Start starts what the API runs in the background: River UI's caches.
func (s *Server) Start(ctx context.Context) error {
	if s.ui == nil {
		return nil
	}
	return s.ui.Start(ctx)
}

// uiAgent is the agent a UI request comes from: 401 without credentials
// or with a key that is not valid, 403 for a customer's key.
func (s *Server) uiAgent(r *http.Request) (vocab.Actor, error) {
	var hash []byte
	user, key, basic := r.BasicAuth()
	if basic {
		hash = HashAPIKey(key)
	} else if c, err := r.Cookie(uiCookie); err == nil {
		if hash, err = hex.DecodeString(c.Value); err != nil || len(hash) != 32 {
			return "", errUnauthorized
		}
	} else if key := bearerKey(r); key != "" {
		hash = HashAPIKey(key)
	} else {
		return "", errUnauthorized
	}
	who, err := s.actorOf(r.Context(), hash)
	if err != nil {
		return "", err
	}
	if basic && who.ID() != user {
		return "", errUnauthorized // the key is not this user's
	}
	if err := requireAgent(who, "use River UI"); err != nil {
		return "", err
	}
	return who, nil
}

// uiLogin is a small page that takes an agent's API key and sets the
// session cookie: HttpOnly, SameSite=Strict, Secure over TLS.
func (s *Server) uiLogin(w http.ResponseWriter, r *http.Request) {
	problem := ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		key := strings.TrimSpace(r.PostFormValue("key"))
		hash := HashAPIKey(key)
		who, err := s.actorOf(r.Context(), hash)
		switch {
		case err == nil && who.IsAgent():
			http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: hex.EncodeToString(hash), Path: UIPrefix,
				MaxAge: int(uiSessionAge.Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode,
				Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
			http.Redirect(w, r, UIPrefix+"/", http.StatusSeeOther)
			return
		case err == nil, errors.Is(err, errUnauthorized):
			problem = "That is not an agent's API key."
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
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	fmt.Fprintf(w, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>helpdesk · River UI</title>
<style>body{font-family:sans-serif;max-width:28em;margin:4em auto}input{width:100%%;padding:.4em;margin:.4em 0}</style></head>
<body><h1>River UI</h1><p>The jobs of helpdesk, for agents. Sign in with your API key (<code>helpdesk apikey create -actor agent:NAME</code>).</p>
<p style="color:#b00">%s</p>
<form method="post" action="%s/login"><label>API key <input type="password" name="key" autocomplete="off" autofocus></label>
<input type="submit" value="Sign in"></form></body></html>
`, html.EscapeString(problem), UIPrefix)
}

// uiRetry is River UI's "retry" done as POST /v1/jobs/{id}/retry does it:
// a failed or dead-letter job gets its kind's whole budget. Other jobs are
// refused, with River UI's error shape.
func (s *Server) uiRetry(w http.ResponseWriter, r *http.Request) {
	var req struct {
		IDs []json.Number `json:"ids"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil || len(req.IDs) == 0 || len(req.IDs) > 1000 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "send {\"ids\": [job ids]}, 1 to 1000 of them"})
		return
	}
	for _, n := range req.IDs {
		id, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || id <= 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "job ids are positive integers, got " + n.String()})
			return
		}
		if _, err := s.queue.Retry(r.Context(), id); err != nil {
			apiErr := toAPIError(err)
			if errors.Is(err, jobs.ErrNotRetryable) {
				apiErr.Message = err.Error() + "; only failed and dead-letter jobs are retried, with a whole attempt budget"
			}
			if apiErr.Status >= 500 {
				s.logger.ErrorContext(r.Context(), "river ui: retry", slog.Int64("job_id", id), slog.Any("error", err))
			}
			writeJSON(w, apiErr.Status, map[string]string{"message": apiErr.Message})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
