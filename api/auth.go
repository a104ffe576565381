package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"helpdesk/store"
)

// Actor is who calls the API: a customer (customer:C-0022) or an agent
// (agent:alice). API keys, idempotency keys and permissions belong to it.
type Actor struct {
	Kind string // "customer" or "agent"
	ID   string // C-0022 or alice
}

func (a Actor) String() string { return a.Kind + ":" + a.ID }

// IsAgent reports whether the actor is a support agent.
func (a Actor) IsAgent() bool { return a.Kind == "agent" }

var (
	customerIDRE = regexp.MustCompile(`^C-[0-9]{4,}$`)
	agentNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
)

// ParseActor reads customer:C-0022 or agent:NAME.
func ParseActor(s string) (Actor, error) {
	kind, id, _ := strings.Cut(s, ":")
	switch {
	case kind == "customer" && customerIDRE.MatchString(id), kind == "agent" && agentNameRE.MatchString(id):
		return Actor{Kind: kind, ID: id}, nil
	}
	return Actor{}, fmt.Errorf("actor %q: want customer:C-0022 or agent:NAME (lower case letters, digits, . _ -)", s)
}

// NewAPIKey makes a key and the SHA-256 that is stored in its place.
func NewAPIKey() (key string, sha []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key = "hd_" + base64.RawURLEncoding.EncodeToString(b)
	return key, HashAPIKey(key)
}

// HashAPIKey is what api_keys stores of a key.
func HashAPIKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

var errUnauthorized = &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
	Message: "send an API key as Authorization: Bearer KEY (helpdesk apikey create makes one)"}

// authenticate finds the actor of the request's bearer key, and the key's
// hash, which names it without holding it.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (Actor, string, error) {
	key := bearerKey(r)
	if key == "" {
		return Actor{}, "", errUnauthorized
	}
	hash := HashAPIKey(key)
	a, err := s.actorOf(ctx, hash)
	return a, string(hash), err
}

// bearerKey is the key of an "Authorization: Bearer KEY" header, "" without one.
func bearerKey(r *http.Request) string {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}

// actorOf is the actor of an API key's hash: errUnauthorized for a key
// that is unknown, revoked or a disabled agent's.
func (s *Server) actorOf(ctx context.Context, hash []byte) (Actor, error) {
	actor, err := store.New(s.pool).APIKeyActor(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return Actor{}, errUnauthorized
	}
	if err != nil {
		return Actor{}, err
	}
	return ParseActor(actor)
}

func requireAgent(who Actor, what string) error {
	if !who.IsAgent() {
		return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "only agents may " + what}
	}
	return nil
}
