package egress_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/egress"
)

type names map[string][]netip.Addr

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	var p egress.Policy

	t.Run("InsideAddressesAreRefusedPublicOnesTaken", func(t *testing.T) {
		t.Parallel()
		for _, a := range []string{"127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
			"224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1"} {
			if err := p.Check(netip.MustParseAddr(a)); !errors.Is(err, egress.ErrRefused) {
				t.Errorf("%s: %v, want refused", a, err)
			}
		}
		for _, a := range []string{"93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"} {
			if err := p.Check(netip.MustParseAddr(a)); err != nil {
				t.Errorf("%s: %v, want taken", a, err)
			}
		}
		allowed := egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}}
		if allowed.Check(netip.MustParseAddr("10.20.3.4")) != nil || allowed.Check(netip.MustParseAddr("10.21.0.1")) == nil {
			t.Error("an allowed network is not taken, or more than it is")
		}
	})

	t.Run("ARegistrationIsRefusedWhatTheDialerWouldRefuse", func(t *testing.T) {
		t.Parallel()
		r := names{"hooks.example.com": {netip.MustParseAddr("93.184.216.34")}, "rebind.example.com": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.5")}}
		for raw, ok := range map[string]bool{
			"https://hooks.example.com/x":                      true,
			"https://unknown.example.com/x":                    true, // checked again when dialled
			"http://169.254.169.254/latest/meta-data/":         false,
			"http://10.0.0.1/":                                 false,
			"http://[::1]:8080/":                               false,
			"http://0.0.0.0:8080/":                             false,
			"http://localhost:8080/":                           false,
			"http://api.localhost/":                            false,
			"https://rebind.example.com/":                      false,
			"ftp://hooks.example.com/":                         false,
			"https://user:pass@hooks.example.com/":             false,
			"http://[::ffff:169.254.169.254]/latest/meta-data": false,
		} {
			if err := p.CheckURL(context.Background(), raw, r); (err == nil) != ok {
				t.Errorf("%s: %v, want taken %v", raw, err, ok)
			}
		}
	})

	t.Run("TheClientDialsNoInsideAddressAndFollowsNoRedirect", func(t *testing.T) {
		t.Parallel()
		hits := 0
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
		defer target.Close()
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		}))
		defer redirect.Close()

		_, err := p.Client(5*time.Second).Post(target.URL, "application/json", nil)
		if !errors.Is(err, egress.ErrRefused) || hits != 0 {
			t.Fatalf("posting to loopback: %v (%d hits), want refused by policy", err, hits)
		}
		loopback := egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
		resp, err := loopback.Client(5*time.Second).Post(redirect.URL, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect || hits != 0 {
			t.Errorf("a redirect: %d with %d hits at its target, want the 307 itself and no second request", resp.StatusCode, hits)
		}
	})
}
