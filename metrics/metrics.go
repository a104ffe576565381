// Package metrics holds helpdesk's Prometheus metrics, one registry that every layer records into and /metrics serves.
//
// It is a package of its own, below every other, so that the API, the
// queue, the mail code and the inbound listener record into the same
// registry without importing each other. Names follow the Prometheus
// conventions: a helpdesk_ prefix, base units (seconds, bytes), _total on
// counters, labels with few values.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds every metric of the process, the Go runtime's and the
// process's own included.
var Registry = prometheus.NewRegistry()

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Buckets of the request and job histograms, in seconds: from 5 ms to 2 min.
var durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

var (
	// HTTPRequests counts API requests by route pattern ("GET /v1/tickets/{id}"), method and status.
	HTTPRequests = newCounterVec("helpdesk_http_requests_total",
		"API requests answered, by route pattern, method and status code.", "route", "method", "code")
	// HTTPDuration is how long API requests take, by route pattern and method.
	HTTPDuration = newHistogramVec("helpdesk_http_request_duration_seconds",
		"Time from an API request's arrival to its answer, by route pattern and method.", "route", "method")

	// Jobs is the number of jobs by kind and helpdesk state, counted periodically.
	Jobs = newGaugeVec("helpdesk_jobs",
		"Jobs in River's table by kind and state (queued, running, waiting, retrying, succeeded, failed, dead_letter), counted periodically.", "kind", "state")
	// JobsCountDuration is how long the last count of Jobs took.
	JobsCountDuration = newGauge("helpdesk_jobs_count_duration_seconds",
		"How long the last count of jobs by kind and state took.")
	// JobDuration is how long an attempt of a job ran, by kind and what came of it.
	JobDuration = newHistogramVec("helpdesk_job_duration_seconds",
		"Time one attempt of a job ran, by kind and outcome (succeeded, retry, snoozed, failed, dead_letter).", "kind", "outcome")

	// ProviderCalls counts calls to the AI provider by task and outcome.
	ProviderCalls = newCounterVec("helpdesk_provider_calls_total",
		"Calls to the AI provider by task (classify, draft_reply, embed) and outcome (ok, rate_limited, server_error, unreachable, timeout, rejected, invalid, cancelled).",
		"task", "outcome")
	// ProviderBreakerOpen is 1 while the provider's circuit breaker is open.
	ProviderBreakerOpen = newGauge("helpdesk_provider_breaker_open",
		"1 while the AI provider's circuit breaker is open (calls wait for a probe), else 0.")

	// SMTPDeliveries counts outbound deliveries per recipient by outcome
	// and the class of the enhanced status code (2, 4, 5, or none).
	SMTPDeliveries = newCounterVec("helpdesk_smtp_deliveries_total",
		"Outbound mail per recipient by outcome (sent, captured, failed, retry, uncertain, suppressed) and enhanced status code class (2, 4, 5, none).",
		"outcome", "class")
	// SMTPSessions counts the relay's sessions by TLS and whether a
	// message opened one or reused a kept one.
	SMTPSessions = newCounterVec("helpdesk_smtp_sessions_total",
		"SMTP sessions to the relay by tls (tls, plain) and how a message got one (opened, reused).", "tls", "how")
	// SMTPRelayPaused is 1 while the relay is paused: down, or it asked to slow down.
	SMTPRelayPaused = newGauge("helpdesk_smtp_relay_paused",
		"1 while the SMTP relay is paused because it is down or asked to slow down, else 0.")

	// InboundMessages counts inbound mail by what became of it.
	InboundMessages = newCounterVec("helpdesk_inbound_messages_total",
		"Inbound mail by outcome (new_ticket, reply, follow_up, duplicate, bounce, ignored, agent_replied, refused, tempfail, …).", "outcome")

	// IMAPMessages counts the messages fetched from each mailbox by what
	// became of them (the filing's outcomes, and refused, too_large, before_since, unfetchable).
	IMAPMessages = newCounterVec("helpdesk_imap_messages_total",
		"Messages fetched from IMAP mailboxes, by mailbox and outcome (new_ticket, reply, duplicate, …, refused, too_large, before_since, unfetchable).", "mailbox", "outcome")
	// IMAPConnected is 1 while a process holds a mailbox's connection.
	IMAPConnected = newGaugeVec("helpdesk_imap_connected",
		"1 while this process is connected to the IMAP mailbox, else 0.", "mailbox")
	// IMAPLastSuccess is when a mailbox was last fetched without error.
	IMAPLastSuccess = newGaugeVec("helpdesk_imap_last_success_timestamp_seconds",
		"When this process last fetched the IMAP mailbox without an error, as a Unix time.", "mailbox")
	// IMAPUIDValidityResets counts the UIDVALIDITY changes seen.
	IMAPUIDValidityResets = newCounterVec("helpdesk_imap_uidvalidity_resets_total",
		"UIDVALIDITY changes of IMAP mailboxes: their folders are read again from the first message, once-only.", "mailbox")
)

// SLA metrics: breaches as they are sent, and the running clocks by
// how soon they fall due (counted with the jobs' gauges).
var (
	// SLABreaches counts breaches sent, by target, priority and team.
	SLABreaches = newCounterVec("helpdesk_sla_breaches_total",
		"SLA breaches sent (each once), by target (first_response, next_response, resolution), priority and team.", "target", "priority", "team")
	// SLADueWithin is how many running clocks of a target fall due within
	// a bound: overdue ones are within every bound.
	SLADueWithin = newGaugeVec("helpdesk_sla_open_tickets_due_within_seconds",
		"Running SLA clocks by target that fall due within the given number of seconds (cumulative; overdue clocks count in every bound; +Inf is all).",
		"target", "within")
)

// SLADueBounds are the bounds of SLADueWithin, in seconds.
var SLADueBounds = []float64{0, 900, 3600, 4 * 3600, 24 * 3600}

// Handler serves the registry in the Prometheus exposition format.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry})
}

func newCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	Registry.MustRegister(c)
	return c
}

func newGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	Registry.MustRegister(g)
	return g
}

func newGauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	Registry.MustRegister(g)
	return g
}

func newHistogramVec(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: durationBuckets}, labels)
	Registry.MustRegister(h)
	return h
}
