package api

import (
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/helpdesk-dev/helpdesk/settings"
)

// Settings declares the API's own settings; the pool, the queue and the
// desk are given by the command that serves it.
func (c *Config) Settings() []settings.Setting {
	return []settings.Setting{
		settings.Duration(&c.RequestTimeout, "HELPDESK_REQUEST_TIMEOUT", "request-timeout", "15s",
			"one API request with its transaction; past it 503 `timeout`, rolled back"),
		settings.Func("HELPDESK_API_RATE", "api-rate", "20/s", "requests a second per API key, in one process; past it 429 with Retry-After, nothing done",
			func(v string) error {
				r, err := strconv.ParseFloat(strings.TrimSuffix(v, "/s"), 64)
				if err != nil || r <= 0 || math.IsInf(r, 0) {
					return settings.Wantf("requests a second, such as 20/s or 0.5")
				}
				c.RatePerKey = r
				return nil
			}).ZeroWhen(func() bool { return c.RatePerKey == 0 }),
		settings.Int(&c.BurstPerKey, "HELPDESK_API_BURST", "api-burst", "40", "requests per API key at once before the rate applies"),
		settings.Duration(&c.UISessionTTL, "HELPDESK_UI_SESSION_TTL", "ui-session-ttl", "12h",
			"how long a River UI sign-in lasts; revoking its key or disabling its agent ends it sooner, and so does signing out"),
		settings.Func("HELPDESK_AUTH_FAIL_RATE", "auth-fail-rate", "30/m",
			"failed authentications a minute from one client address (an IPv6 /64), in one process; past it 429 with Retry-After and no lookup, "+
				"while keys that worked lately go on working",
			func(v string) error {
				r, err := strconv.ParseFloat(strings.TrimSuffix(v, "/m"), 64)
				if err != nil || r < 1 || math.IsInf(r, 0) {
					return settings.Wantf("failures a minute, such as 30/m (at least 1)")
				}
				c.AuthFailRate = r
				return nil
			}).ZeroWhen(func() bool { return c.AuthFailRate == 0 }),
		settings.Func("HELPDESK_TRUSTED_PROXIES", "trusted-proxies", "",
			"the reverse proxies in front, as CIDRs separated by commas: only theirs are X-Forwarded-For (the client address) and "+
				"X-Forwarded-Proto (https marks cookies Secure) believed; unset: none",
			func(v string) error {
				c.TrustedProxies = nil
				for _, p := range strings.Split(v, ",") {
					if p = strings.TrimSpace(p); p == "" {
						continue
					}
					prefix, err := netip.ParsePrefix(p)
					if err != nil {
						ip, ierr := netip.ParseAddr(p)
						if ierr != nil {
							return settings.Wantf("CIDRs or addresses such as 10.0.0.0/8,127.0.0.1 separated by commas")
						}
						prefix = netip.PrefixFrom(ip, ip.BitLen())
					}
					c.TrustedProxies = append(c.TrustedProxies, prefix.Masked())
				}
				return nil
			}),
	}
}
