package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// NewAPIKey makes a key and the SHA-256 that is stored in its place.
func NewAPIKey() (key string, sha []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key = "hd_" + base64.RawURLEncoding.EncodeToString(b)
	return key, HashAPIKey(key)
}

// HashAPIKey is what api_keys stores of a key, and ui_sessions of a session id.
func HashAPIKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

var errUnauthorized = &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
	Message: "send an API key as Authorization: Bearer KEY (helpdesk apikey create makes one)"}

// authenticate finds the caller of the request's bearer key, and the
// key's hash, which names it without holding it.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*store.Caller, string, error) {
	key := bearerKey(r)
	if key == "" {
		return nil, "", errUnauthorized
	}
	hash := HashAPIKey(key)
	c, err := s.callerOf(ctx, r, hash, func(hash []byte) (*store.Caller, error) {
		return s.keys.lookup(hash, time.Now(), func(hash []byte) (*store.Caller, error) { return store.New(s.pool).APIKeyCaller(ctx, hash) })
	})
	return c, string(hash), err
}

// bearerKey is the key of an "Authorization: Bearer KEY" header, "" without one.
func bearerKey(r *http.Request) string {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}

// callerOf looks a credential's hash up, behind the guard: a client past
// its rate of failures gets 429 without a query, unless the credential
// is one that worked lately. An unknown, revoked or disabled one is
// errUnauthorized and counts as a failure.
func (s *Server) callerOf(ctx context.Context, r *http.Request, hash []byte, lookup func([]byte) (*store.Caller, error)) (*store.Caller, error) {
	client, now := s.clientIP(r), time.Now()
	if wait := s.guard.wait(client, hash, now); wait > 0 {
		return nil, &Error{Status: http.StatusTooManyRequests, Code: "too_many_failures", RetryAfter: wait,
			Message: "too many failed sign-ins from this address; retry after " + wait.Round(time.Second).String()}
	}
	c, err := lookup(hash)
	if errors.Is(err, store.ErrNotFound) {
		s.guard.failed(client, now)
		return nil, errUnauthorized
	}
	if err != nil {
		return nil, err
	}
	if c.Actor, err = vocab.ParseActor(string(c.Actor)); err != nil {
		return nil, err
	}
	s.guard.succeeded(hash, now)
	return c, nil
}

func requireAgent(who vocab.Actor, what string) error {
	if !who.IsAgent() {
		return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "only agents may " + what}
	}
	return nil
}

// requireAdmin refuses a request of a caller who is not an admin agent.
func requireAdmin(r *http.Request, what string) error {
	if !infoOf(r.Context()).admin {
		return &Error{Status: http.StatusForbidden, Code: "forbidden",
			Message: "only admins may " + what + " (helpdesk agent add NAME -admin makes one)"}
	}
	return nil
}

// authGuard limits failed authentications per client address (an IPv6
// client by its /64): past the rate, a credential that did not work
// lately is answered 429 before any query. Credentials that worked lately
// pass, so that a key in use keeps working from an address an attacker
// shares. Both maps are bounded: idle entries are swept, and past the
// bound new addresses share one bucket.
type authGuard struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	clients map[netip.Prefix]*bucket
	good    map[string]time.Time // credential hash → when it last worked
	swept   time.Time
}

const (
	guardMaxClients = 100_000
	guardMaxGood    = 100_000
	guardGoodFor    = time.Hour
)

// overflow is the bucket every new address shares once the map is full.
var overflow = netip.PrefixFrom(netip.IPv6Unspecified(), 0)

func newAuthGuard(perMinute float64) *authGuard {
	burst := max(int(perMinute), 1)
	return &authGuard{rate: rate.Limit(perMinute / 60), burst: burst, clients: map[netip.Prefix]*bucket{}, good: map[string]time.Time{}}
}

func clientKey(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.PrefixFrom(ip, 32)
}

func (g *authGuard) sweep(now time.Time) {
	if now.Sub(g.swept) < time.Minute {
		return
	}
	g.swept = now
	for k, b := range g.clients {
		// A bucket refills within burst/rate; after that it is as new.
		if now.Sub(b.lastSeen) > time.Duration(float64(g.burst)/float64(g.rate))*time.Second+time.Minute {
			delete(g.clients, k)
		}
	}
	for k, t := range g.good {
		if now.Sub(t) > guardGoodFor {
			delete(g.good, k)
		}
	}
}

// wait is how long the client must wait before its credential is looked
// up; 0 when it may be now.
func (g *authGuard) wait(ip netip.Addr, hash []byte, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweep(now)
	if t, ok := g.good[string(hash)]; ok && now.Sub(t) < guardGoodFor {
		return 0
	}
	b := g.clients[clientKey(ip)]
	if b == nil {
		return 0
	}
	if b.limiter.TokensAt(now) >= 1 {
		return 0
	}
	res := b.limiter.ReserveN(now, 1)
	defer res.CancelAt(now)
	return max(res.DelayFrom(now), time.Second)
}

// failed counts a failed authentication against the client.
func (g *authGuard) failed(ip netip.Addr, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := clientKey(ip)
	b := g.clients[k]
	if b == nil {
		if len(g.clients) >= guardMaxClients {
			k = overflow
			b = g.clients[k]
		}
		if b == nil {
			b = &bucket{limiter: rate.NewLimiter(g.rate, g.burst)}
			g.clients[k] = b
		}
	}
	b.lastSeen = now
	b.limiter.AllowN(now, 1)
}

// succeeded remembers a credential that worked.
func (g *authGuard) succeeded(hash []byte, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.good[string(hash)]; ok || len(g.good) < guardMaxGood {
		g.good[string(hash)] = now
	}
}

// clientIP is the address a request comes from: the peer's, or, when the
// peer is a trusted proxy, the nearest address in X-Forwarded-For that is
// not one.
func (s *Server) clientIP(r *http.Request) netip.Addr {
	peer := peerIP(r)
	if !s.trusted(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		ip, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !s.trusted(ip) {
			return ip.Unmap()
		}
		peer = ip.Unmap()
	}
	return peer
}

func peerIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.IPv6Unspecified()
	}
	return ip.Unmap()
}

func (s *Server) trusted(ip netip.Addr) bool {
	for _, p := range s.trustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// secure reports whether the client reached us over TLS: its own
// connection, or a trusted proxy's X-Forwarded-Proto.
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || (s.trusted(peerIP(r)) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}
