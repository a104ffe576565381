package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"

	"github.com/helpdesk-dev/helpdesk/store"
)

// ErrNotAnAgent is a sign-in with a key that is valid but not an agent's,
// or none at all.
var ErrNotAnAgent = errors.New("that is not an agent's API key")

// ConsolePrefix is where the agent console is mounted.
const ConsolePrefix = "/ui"

// MountConsole serves the agent console (package console) under
// ConsolePrefix on the API's listener. It answers for itself; the API
// gives it its sessions (SignIn, SessionCaller, SignOut), the same
// sessions as River UI's.
func (s *Server) MountConsole(h http.Handler) {
	s.handle(ConsolePrefix+"/", func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
	})
	s.handle(ConsolePrefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ConsolePrefix+"/", http.StatusMovedPermanently)
	})
}

// SignIn checks an agent's API key as the API does (failed sign-ins are
// throttled per client address) and opens a session: its id, for a
// cookie, of which the store keeps only the hash. ErrNotAnAgent for a key
// that is no agent's; an *Error (429) while the address waits.
func (s *Server) SignIn(r *http.Request, key string) (session string, c *store.Caller, err error) {
	ctx := r.Context()
	c, err = s.callerOf(ctx, r, HashAPIKey(key), func(hash []byte) (*store.Caller, error) {
		return store.New(s.pool).APIKeyCaller(ctx, hash)
	})
	switch {
	case errors.Is(err, errUnauthorized), err == nil && !c.Actor.IsAgent():
		return "", nil, ErrNotAnAgent
	case err != nil:
		return "", nil, err
	}
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	session = base64.RawURLEncoding.EncodeToString(id)
	if err := store.New(s.pool).InsertUISession(ctx, HashAPIKey(session), c.KeyID, s.sessionTTL); err != nil {
		return "", nil, err
	}
	return session, c, nil
}

// SessionCaller is the agent a session belongs to; ErrNotAnAgent for a
// session that is over, revoked, or never was.
func (s *Server) SessionCaller(r *http.Request, session string) (*store.Caller, error) {
	ctx := r.Context()
	c, err := s.callerOf(ctx, r, HashAPIKey(session), func(hash []byte) (*store.Caller, error) {
		return store.New(s.pool).UISessionCaller(ctx, hash)
	})
	switch {
	case errors.Is(err, errUnauthorized), err == nil && !c.Actor.IsAgent():
		return nil, ErrNotAnAgent
	}
	return c, err
}

// SignOut ends a session.
func (s *Server) SignOut(ctx context.Context, session string) error {
	return store.New(s.pool).DeleteUISession(ctx, HashAPIKey(session))
}

// SessionTTL is how long a session lasts.
func (s *Server) SessionTTL() int { return int(s.sessionTTL.Seconds()) }

// Secure says whether the request came over TLS (directly or through a
// trusted proxy): the session cookie is Secure then.
func (s *Server) Secure(r *http.Request) bool { return s.secure(r) }
