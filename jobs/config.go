package jobs

import (
	"strconv"

	"github.com/helpdesk-dev/helpdesk/settings"
)

// Settings declares the queue's and the workers' settings. The provider
// is given by the command (provider.Config has its own); the triage
// timeout and the rescue default to what the other settings imply.
func (c *Config) Settings() []settings.Setting {
	return append([]settings.Setting{
		settings.Duration(&c.TriageBackoff.Base, "HELPDESK_RETRY_BASE", "retry-base", "2s", "longest wait after a triage job's first failure (full jitter: the wait is drawn from zero to it)"),
		settings.Duration(&c.TriageBackoff.Cap, "HELPDESK_RETRY_CAP", "retry-cap", "60s", "longest wait after any failure of a triage job"),
		settings.Int(&c.TriageMaxAttempts, "HELPDESK_TRIAGE_MAX_ATTEMPTS", "triage-max-attempts", "5", "attempts before a triage job becomes a dead letter; a provider's \"slow down\" spends none"),
		settings.Int(&c.TriageWorkers, "HELPDESK_TRIAGE_WORKERS", "triage-workers", strconv.Itoa(DefaultTriageWorkers), "triage jobs worked at once by one process (queue `triage`; they mostly wait on the provider)"),
		settings.Int(&c.EmailWorkers, "HELPDESK_EMAIL_WORKERS", "email-workers", strconv.Itoa(DefaultEmailWorkers), "email jobs worked at once by one process (queue `email`, its own, so replies never wait behind triage)"),
		settings.Int(&c.Breaker.Failures, "HELPDESK_BREAKER_FAILURES", "breaker-failures", "10", "provider failures in a row (5xx, timeouts, no connection) that open the circuit breaker"),
		settings.Duration(&c.Breaker.Window, "HELPDESK_BREAKER_WINDOW", "breaker-window", "30s", "…within this long"),
		settings.Duration(&c.Breaker.ProbeMin, "HELPDESK_BREAKER_PROBE_MIN", "breaker-probe-min", "5s", "an open breaker lets one probe through after this, doubling with each failed probe"),
		settings.Duration(&c.Breaker.ProbeMax, "HELPDESK_BREAKER_PROBE_MAX", "breaker-probe-max", "2m", "…up to this"),
		settings.Duration(&c.AutocloseAfter, "HELPDESK_AUTOCLOSE_AFTER", "autoclose-after", "168h", "a solved ticket closes after this long without a word from the customer"),
		settings.Duration(&c.EmailBackoff.Base, "HELPDESK_EMAIL_RETRY_BASE", "email-retry-base", "5s", "longest wait after an email's first temporary failure, and the first pause of a relay that is down"),
		settings.Duration(&c.EmailBackoff.Cap, "HELPDESK_EMAIL_RETRY_CAP", "email-retry-cap", "15m", "longest wait after any email failure, and the longest pause of a relay"),
		settings.Int(&c.EmailMaxAttempts, "HELPDESK_EMAIL_MAX_ATTEMPTS", "email-max-attempts", "8", "attempts spent on errors of the message itself (4xx at RCPT or after the body, an unknown outcome) before it is a dead letter; a relay that is down or slow spends none"),
		settings.Duration(&c.TriageTimeout, "HELPDESK_TRIAGE_TIMEOUT", "triage-timeout", "", "one attempt of a triage job; River cancels it then; default 3 × the provider timeout + 15s (45s)"),
		settings.Duration(&c.EmailTimeout, "HELPDESK_EMAIL_TIMEOUT", "email-timeout", "90s", "one attempt of an email job, every SMTP phase together"),
		settings.Duration(&c.RescueStuckJobsAfter, "HELPDESK_RESCUE_AFTER", "rescue-after", "", "a job still running this long after it started (its process died) is handed to another worker; must exceed both timeouts; default the longest job timeout + 30s (2m)"),
	}, c.WebhookEgress.Settings()...)
}

// Validate checks what the settings say together.
func (c *Config) Validate() error {
	list := c.Settings()
	switch {
	case c.TriageBackoff.Cap < c.TriageBackoff.Base:
		return fail(list, "HELPDESK_RETRY_CAP", c.TriageBackoff.Cap.String(), "at least HELPDESK_RETRY_BASE ("+c.TriageBackoff.Base.String()+")")
	case c.EmailBackoff.Cap < c.EmailBackoff.Base:
		return fail(list, "HELPDESK_EMAIL_RETRY_CAP", c.EmailBackoff.Cap.String(), "at least HELPDESK_EMAIL_RETRY_BASE ("+c.EmailBackoff.Base.String()+")")
	case c.Breaker.ProbeMax < c.Breaker.ProbeMin:
		return fail(list, "HELPDESK_BREAKER_PROBE_MAX", c.Breaker.ProbeMax.String(), "at least HELPDESK_BREAKER_PROBE_MIN ("+c.Breaker.ProbeMin.String()+")")
	case c.RescueStuckJobsAfter <= c.LongestJobTimeout():
		return fail(list, "HELPDESK_RESCUE_AFTER", c.RescueStuckJobsAfter.String(), "longer than the longest job timeout ("+c.LongestJobTimeout().String()+")")
	}
	return nil
}

func fail(list []settings.Setting, env, value, want string) error {
	return &settings.Error{Setting: settings.Find(list, env).Name(), Value: value, Want: want}
}
