package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/helpdesk-dev/helpdesk/oauth"
)

// provider is an OAuth server: a device flow that is approved at once,
// and refreshes that hand out access-1, access-2, …
type provider struct {
	mu      sync.Mutex
	issued  int
	refresh string
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/device":
		_ = json.NewEncoder(w).Encode(map[string]any{"device_code": "dev-1", "user_code": "ABCD-EFGH",
			"verification_uri": "https://login.example/device", "expires_in": 600, "interval": 1})
	case "/token":
		switch r.FormValue("grant_type") {
		case "urn:ietf:params:oauth:grant-type:device_code":
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "access-0", "refresh_token": "refresh-1", "token_type": "Bearer", "expires_in": 3600})
		case "refresh_token":
			if r.FormValue("refresh_token") != p.refresh {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
				return
			}
			p.issued++
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "access-" + string(rune('0'+p.issued)), "token_type": "Bearer", "expires_in": 3600})
		}
	}
}

func TestOAuth(t *testing.T) {
	t.Parallel()
	p := &provider{refresh: "refresh-1"}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	client := &oauth.Client{Provider: "custom", ClientID: "helpdesk", TokenURL: srv.URL + "/token", DeviceURL: srv.URL + "/device", Scopes: []string{"mail"}}

	t.Run("TheDeviceFlowShowsTheCodeAndGivesARefreshToken", func(t *testing.T) {
		t.Parallel()
		var code string
		tok, err := oauth.Connect(context.Background(), client, func(_, c string) { code = c })
		if err != nil || tok.RefreshToken != "refresh-1" || code != "ABCD-EFGH" {
			t.Errorf("token %+v, code %q (%v)", tok, code, err)
		}
	})

	t.Run("ATokenIsRefreshedWhenRefusedAndKept", func(t *testing.T) {
		t.Parallel()
		var kept []string
		tokens, err := oauth.NewTokens(client, &oauth2.Token{AccessToken: "stale", RefreshToken: "refresh-1", Expiry: time.Now().Add(time.Hour)},
			func(_ context.Context, tok *oauth2.Token) error {
				kept = append(kept, tok.AccessToken+"/"+tok.RefreshToken)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if got, _ := tokens.Token(ctx); got != "stale" {
			t.Errorf("a token still valid: %q, want it used as it is", got)
		}
		tokens.Refused()
		got, err := tokens.Token(ctx)
		if err != nil || got == "stale" || len(kept) != 1 || kept[0] != got+"/refresh-1" {
			t.Errorf("after a refusal: %q (%v), kept %v", got, err, kept)
		}
		if _, err := oauth.NewTokens(client, &oauth2.Token{AccessToken: "x"}, nil); err == nil {
			t.Error("tokens without a refresh token were taken")
		}
	})

	t.Run("XOAUTH2IsWhatGoogleAndMicrosoftRead", func(t *testing.T) {
		t.Parallel()
		mech, resp, _ := oauth.NewXOAUTH2("support@example.org", "tok").Start()
		user, token, err := oauth.ParseXOAUTH2(resp)
		if mech != "XOAUTH2" || string(resp) != "user=support@example.org\x01auth=Bearer tok\x01\x01" || user != "support@example.org" || token != "tok" || err != nil {
			t.Errorf("%s %q → %q %q %v", mech, resp, user, token, err)
		}
		if _, _, err := oauth.ParseXOAUTH2([]byte("user=a\x01auth=Basic x\x01\x01")); err == nil {
			t.Error("a response without a bearer token was taken")
		}
	})
}
