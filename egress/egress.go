// Package egress decides where the service may connect when someone else chose the address (a webhook's URL): never inside its own network unless allowed.
//
// It is a package of its own because the rule must hold in two places
// that must agree, the registration that refuses a URL and the dialer
// that refuses the connection, and because the dialer is where it really
// holds: it checks the address actually dialled, after name resolution,
// so that localhost, a name that resolves inside, and DNS rebinding
// between the two checks are all caught.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/helpdesk-dev/helpdesk/settings"
)

// Policy says which addresses may be dialled: every public address, and
// those of Allow.
type Policy struct {
	// Allow are networks that are inside but may be dialled: receivers on
	// a private network.
	Allow []netip.Prefix
	// Proxy, if set, carries every request: the proxy itself may be inside
	// and filters on its own. Unset, no proxy is used, whatever the
	// environment says.
	Proxy *url.URL
}

// Settings declares the policy's settings.
func (p *Policy) Settings() []settings.Setting {
	return []settings.Setting{
		settings.Func("HELPDESK_WEBHOOK_ALLOW_NETS", "webhook-allow-nets", "",
			"networks inside that webhooks may reach, as CIDRs separated by commas (10.20.0.0/16,fd00:1::/64); unset: only public addresses "+
				"(loopback, private, link-local, CGNAT, unspecified, multicast and reserved ones are refused)",
			func(v string) error {
				p.Allow = nil
				for _, c := range strings.Split(v, ",") {
					if c = strings.TrimSpace(c); c == "" {
						continue
					}
					prefix, err := netip.ParsePrefix(c)
					if err != nil {
						return settings.Wantf("CIDRs such as 10.20.0.0/16 separated by commas")
					}
					p.Allow = append(p.Allow, prefix.Masked())
				}
				return nil
			}),
		settings.Func("HELPDESK_WEBHOOK_PROXY", "webhook-proxy", "",
			"an HTTP proxy for webhook deliveries, such as http://proxy.internal:3128; unset: none (HTTP_PROXY and friends are ignored)",
			func(v string) error {
				p.Proxy = nil
				if v == "" {
					return nil
				}
				u, err := url.Parse(v)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return settings.Wantf("an http:// or https:// URL of the proxy")
				}
				p.Proxy = u
				return nil
			}),
	}
}

// ErrRefused is an address the policy does not let the service dial.
var ErrRefused = errors.New("refused by policy")

// inside are the networks that are not the public internet (RFC 6890 and
// its successors): reaching them would let whoever names a URL probe the
// service's own network.
var inside = func() []netip.Prefix {
	var out []netip.Prefix
	for _, c := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "2002::/16",
		"fc00::/7", "fe80::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(c))
	}
	return out
}()

// Check returns nil if ip may be dialled, else ErrRefused and why.
func (p *Policy) Check(ip netip.Addr) error {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	for _, a := range p.Allow {
		if a.Contains(ip) {
			return nil
		}
	}
	for _, n := range inside {
		if n.Contains(ip) {
			return fmt.Errorf("%w: %s is %s", ErrRefused, ip, kind(ip))
		}
	}
	if ip.Zone() != "" {
		return fmt.Errorf("%w: %s has a zone", ErrRefused, ip)
	}
	return nil
}

func kind(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address"
	case ip.IsUnspecified():
		return "the unspecified address"
	case ip.IsMulticast():
		return "a multicast address"
	case netip.MustParsePrefix("100.64.0.0/10").Contains(ip):
		return "a shared (CGNAT) address"
	}
	return "a reserved address"
}

// Resolver looks names up; net.DefaultResolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckURL says whether a URL someone gives may be called: http or https,
// a host and no credentials in it, and none of the addresses its host
// resolves to refused. A name that does not resolve now is taken: the
// dialer checks again at every call.
func (p *Policy) CheckURL(ctx context.Context, raw string, r Resolver) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Opaque != "" {
		return errors.New("want an http or https URL without credentials, such as https://example.com/hooks/helpdesk")
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.Check(ip)
	}
	if h := strings.TrimSuffix(strings.ToLower(host), "."); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("%w: %s is a loopback name", ErrRefused, host) // RFC 6761 §6.3
	}
	if p.Proxy != nil {
		return nil // the proxy resolves and filters
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := p.Check(a); err != nil {
			return fmt.Errorf("%s resolves to an address that is %w", host, err)
		}
	}
	return nil
}

// Client is an HTTP client that dials only what the policy lets it, uses
// no proxy but the policy's, follows no redirect (a 3xx is the answer),
// and gives up after timeout.
func (p *Policy) Client(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: min(timeout, 10*time.Second), Control: p.control}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   min(timeout, 10*time.Second),
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	if p.Proxy != nil {
		transport.Proxy = http.ProxyURL(p.Proxy)
		// The proxy is the one address dialled, chosen by the operator.
		transport.DialContext = (&net.Dialer{Timeout: dialer.Timeout}).DialContext
	}
	return &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// control checks each address as it is dialled: after resolution, for
// every address tried.
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is no address", ErrRefused, address)
	}
	return p.Check(ap.Addr())
}
