// Package oauth signs in to mail providers with OAuth 2.0: the device-code flow once, tokens refreshed and kept after, and XOAUTH2 for IMAP and SMTP.
//
// It is a package of its own because both the mailbox fetcher (IMAP) and
// the relay (SMTP) sign in this way with the same tokens, and because the
// flow and the SASL mechanism have their own standards (RFC 6749, RFC
// 8628, Google's and Microsoft's XOAUTH2) apart from either protocol.
package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/endpoints"
)

// Provider is where a provider's OAuth endpoints are and what mail needs
// of it.
type Provider struct {
	Endpoint oauth2.Endpoint
	Scopes   []string
}

// Providers are the ones known by name; "custom" names its token URL.
var Providers = map[string]Provider{
	// Microsoft 365 (the "common" tenant; a tenant of one's own works too).
	"microsoft": {Endpoint: endpoints.AzureAD("common"), Scopes: []string{
		"https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send", "offline_access"}},
	"google": {Endpoint: endpoints.Google, Scopes: []string{"https://mail.google.com/"}},
}

// Client is an application registered with a provider.
type Client struct {
	Provider     string // microsoft, google or custom
	ClientID     string
	ClientSecret string
	TokenURL     string // for custom, or a tenant's own
	DeviceURL    string // for custom
	Scopes       []string
}

// Config is the client as x/oauth2 takes it.
func (c *Client) Config() (*oauth2.Config, error) {
	p, ok := Providers[c.Provider]
	if !ok && c.Provider != "custom" {
		return nil, fmt.Errorf("unknown OAuth provider %q: microsoft, google or custom", c.Provider)
	}
	cfg := &oauth2.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, Endpoint: p.Endpoint, Scopes: p.Scopes}
	if c.TokenURL != "" {
		cfg.Endpoint.TokenURL = c.TokenURL
	}
	if c.DeviceURL != "" {
		cfg.Endpoint.DeviceAuthURL = c.DeviceURL
	}
	if len(c.Scopes) > 0 {
		cfg.Scopes = c.Scopes
	}
	if cfg.Endpoint.TokenURL == "" {
		return nil, errors.New("the OAuth client has no token URL")
	}
	return cfg, nil
}

// Connect runs the device-code flow (RFC 8628): show says where the
// person signs in and with which code; the token comes once they did.
func Connect(ctx context.Context, c *Client, show func(verificationURI, userCode string)) (*oauth2.Token, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	if cfg.Endpoint.DeviceAuthURL == "" {
		return nil, errors.New("the OAuth provider has no device authorization endpoint")
	}
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		return nil, fmt.Errorf("device authorization: %w", err)
	}
	show(da.VerificationURI, da.UserCode)
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		return nil, fmt.Errorf("device token: %w", err)
	}
	if tok.RefreshToken == "" {
		return nil, errors.New("the provider gave no refresh token: ask for offline access (Microsoft: the offline_access scope)")
	}
	return tok, nil
}

// Tokens gives a valid access token, refreshed when it expires or when
// the server refused it, and keeps each new one with save (the refresh
// token may change with it).
type Tokens struct {
	mu    sync.Mutex
	cfg   *oauth2.Config
	tok   *oauth2.Token
	save  func(ctx context.Context, tok *oauth2.Token) error
	stale bool
}

// NewTokens starts from a kept token.
func NewTokens(c *Client, kept *oauth2.Token, save func(ctx context.Context, tok *oauth2.Token) error) (*Tokens, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	if kept == nil || kept.RefreshToken == "" {
		return nil, errors.New("the mailbox is not connected: run helpdesk mailbox connect NAME")
	}
	return &Tokens{cfg: cfg, tok: kept, save: save}, nil
}

// Token returns an access token that is valid now.
func (t *Tokens) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stale && t.tok.AccessToken != "" && t.tok.Expiry.After(time.Now().Add(time.Minute)) {
		return t.tok.AccessToken, nil
	}
	refresh := &oauth2.Token{RefreshToken: t.tok.RefreshToken} // no access token: the source must refresh
	tok, err := t.cfg.TokenSource(ctx, refresh).Token()
	if err != nil {
		return "", fmt.Errorf("refresh the OAuth token: %w", err)
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = t.tok.RefreshToken
	}
	if err := t.save(ctx, tok); err != nil {
		return "", err
	}
	t.tok, t.stale = tok, false
	return tok.AccessToken, nil
}

// Refused says the server refused the last token: the next is new.
func (t *Tokens) Refused() {
	t.mu.Lock()
	t.stale = true
	t.mu.Unlock()
}

// XOAUTH2 is the SASL mechanism of Google and Microsoft for IMAP and SMTP.
const XOAUTH2 = "XOAUTH2"

// NewXOAUTH2 is a SASL client that signs in as user with an access token.
func NewXOAUTH2(user, token string) sasl.Client { return &xoauth2{user: user, token: token} }

type xoauth2 struct {
	user, token string
	failed      *Failure
}

func (x *xoauth2) Start() (string, []byte, error) {
	return XOAUTH2, []byte("user=" + x.user + "\x01auth=Bearer " + x.token + "\x01\x01"), nil
}

// Next answers the server's challenge, which is only ever the JSON of a
// failure: the answer is empty, and the server ends the exchange with
// its error.
func (x *xoauth2) Next(challenge []byte) ([]byte, error) {
	var f Failure
	if err := json.Unmarshal(challenge, &f); err == nil {
		x.failed = &f
	}
	return []byte{}, nil
}

// Failure is what a server says of a refused token.
type Failure struct {
	Status  string `json:"status"`
	Schemes string `json:"schemes"`
	Scope   string `json:"scope"`
}

// ParseXOAUTH2 reads a client's XOAUTH2 response, for servers (and tests).
func ParseXOAUTH2(response []byte) (user, token string, err error) {
	fields := strings.Split(string(response), "\x01")
	for _, f := range fields {
		switch {
		case strings.HasPrefix(f, "user="):
			user = strings.TrimPrefix(f, "user=")
		case strings.HasPrefix(f, "auth=Bearer "):
			token = strings.TrimPrefix(f, "auth=Bearer ")
		}
	}
	if user == "" || token == "" || len(fields) < 3 || fields[len(fields)-1] != "" || fields[len(fields)-2] != "" {
		return "", "", errors.New("not an XOAUTH2 response")
	}
	return user, token, nil
}

// FailureChallenge is the challenge a server sends for a refused token.
func FailureChallenge() []byte {
	b, _ := json.Marshal(Failure{Status: "401", Schemes: "bearer"})
	return b
}
