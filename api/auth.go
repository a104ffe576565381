package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"helpdesk/store"
	"helpdesk/vocab"
)

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
func (s *Server) authenticate(ctx context.Context, r *http.Request) (vocab.Actor, string, error) {
	key := bearerKey(r)
	if key == "" {
		return "", "", errUnauthorized
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
func (s *Server) actorOf(ctx context.Context, hash []byte) (vocab.Actor, error) {
	actor, err := store.New(s.pool).APIKeyActor(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return "", errUnauthorized
	}
	if err != nil {
		return "", err
	}
	return vocab.ParseActor(string(actor))
}

func requireAgent(who vocab.Actor, what string) error {
	if !who.IsAgent() {
		return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "only agents may " + what}
	}
	return nil
}
