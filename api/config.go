package api

import (
	"math"
	"strconv"
	"strings"

	"helpdesk/settings"
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
	}
}
