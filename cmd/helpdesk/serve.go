package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/api"
	"helpdesk/backoff"
	"helpdesk/desk"
	"helpdesk/inbound"
	"helpdesk/jobs"
	"helpdesk/mail"
	"helpdesk/metrics"
	"helpdesk/provider"
	"helpdesk/provider/simulator"
	"helpdesk/store"
)

// serveConfig is everything `helpdesk serve` reads from flags and environment.
type serveConfig struct {
	Role              string // all, api or worker
	DatabaseURL       string
	HTTPAddr          string
	MetricsAddr       string        // empty: /metrics on the HTTP listener
	PprofAddr         string        // empty: no profiling endpoints
	MetricsInterval   time.Duration // how often the jobs are counted for the metrics
	ProviderURL       string        // empty: start the simulator in-process
	ProviderKey       string
	ProviderTimeout   time.Duration
	RetryBase         time.Duration
	RetryCap          time.Duration
	TriageMaxAttempts int
	TriageWorkers     int
	EmailWorkers      int
	ShutdownGrace     time.Duration
	IdempotencyKeep   time.Duration

	DBConnectTimeout time.Duration
	RequestTimeout   time.Duration // one API request, its transaction included
	HTTPIdleTimeout  time.Duration // an idle keep-alive connection is closed after it
	TriageTimeout    time.Duration // one attempt of a triage job
	EmailTimeout     time.Duration // one attempt of an email job, every SMTP phase together
	RescueAfter      time.Duration // a job still running this long after it started is handed to another worker

	Breaker        jobs.BreakerConfig
	ReplySecret    string   // signs the Reply-To of mail to agents
	ReplyPrevious  []string // still accepted, for a rotation
	AutoAssign     bool
	AutocloseAfter time.Duration
	APIRate        float64 // requests a second per API key
	APIBurst       int

	SMTPURL          string // empty: an in-process fake SMTP server that keeps mail in memory
	MailDomain       string
	From             *mail.Address
	EmailRetryBase   time.Duration
	EmailRetryCap    time.Duration
	EmailMaxAttempts int
	EmailGiveUpAfter time.Duration
	EmailDelayNotice time.Duration
	SMTPTimeout      time.Duration
	CaptureDir       string // without a relay, mail is kept here (Maildir)
	SuppressDays     int
	AttachmentMax    int64           // the largest attachment whose content is kept or uploaded
	Ack              *desk.AckConfig // nil: new tickets are not acknowledged

	InboundAddr        string // empty: no inbound listener
	InboundLMTP        bool
	InboundMaxBytes    int
	InboundDomains     []string
	InboundTimeout     time.Duration // one message, from MAIL to the final reply
	InboundMaxSessions int

	// listening, if set, is told each listener's address as it listens
	// (what is the variable that names it): for tests that listen on
	// port 0.
	listening func(what, addr string)
}

var mailDomainRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+$`)

// dbSetting is where every command finds PostgreSQL and how long it waits
// for it to answer.
type dbSetting struct {
	url            *setting
	connectTimeout *setting
}

func databaseSetting(fs *flagSet) *dbSetting {
	return &dbSetting{
		url: fs.setting("database-url", "DATABASE_URL", "", "PostgreSQL connection URL"),
		connectTimeout: fs.setting("db-connect-timeout", "HELPDESK_DB_CONNECT_TIMEOUT", "10s",
			"how long connecting to PostgreSQL may take, its first answer included"),
	}
}

// required is DATABASE_URL: a postgres:// URL or a key=value string
// such as "host=/run/postgresql dbname=helpdesk".
func (db *dbSetting) required() (string, error) {
	v, err := db.url.required()
	if err != nil || !strings.Contains(v, "://") {
		return v, err
	}
	return v, db.url.urlOf("postgres", "postgresql")
}

// openDatabase connects to the database a command's DATABASE_URL names.
func openDatabase(ctx context.Context, db *dbSetting) (*pgxpool.Pool, error) {
	url, err := db.required()
	if err != nil {
		return nil, err
	}
	timeout, err := db.connectTimeout.duration()
	if err != nil {
		return nil, err
	}
	pool, err := store.Open(ctx, url, timeout)
	if err != nil {
		return nil, fmt.Errorf("%w (DATABASE_URL; HELPDESK_DB_CONNECT_TIMEOUT is %s)", err, timeout)
	}
	return pool, nil
}

func parseServeConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) (serveConfig, error) {
	fs := newFlagSet("serve", "serve [flags]",
		"Runs the HTTP API and the triage workers. SIGTERM or SIGINT stops fetching jobs,\n"+
			"lets running ones finish within the grace period, and exits 0.", getenv, stdout, stderr)
	db := databaseSetting(fs)
	role := fs.setting("role", "HELPDESK_ROLE", "all", "all: the API, inbound mail and the workers; api: the API and inbound mail, which queue jobs and work none; worker: the workers, with only /healthz, /readyz and /metrics over HTTP")
	addr := fs.setting("http-addr", "HELPDESK_HTTP_ADDR", "127.0.0.1:8080", "address of the API (of /healthz, /readyz and /metrics for a worker)")
	metricsAddr := fs.setting("metrics-addr", "HELPDESK_METRICS_ADDR", "", "a listener of its own for /metrics; unset: /metrics on HELPDESK_HTTP_ADDR")
	pprofAddr := fs.setting("pprof-addr", "HELPDESK_PPROF_ADDR", "", "a listener for net/http/pprof (/debug/pprof/), on a loopback address; unset: none")
	metricsInterval := fs.setting("metrics-interval", "HELPDESK_METRICS_INTERVAL", "15s", "how often jobs are counted by kind and state for /metrics")
	providerURL := fs.setting("provider-url", "HELPDESK_PROVIDER_URL", "", "base URL of an OpenAI-compatible provider; unset: the in-process simulator")
	providerKey := fs.setting("provider-key", "HELPDESK_PROVIDER_KEY", "", "bearer key for the provider")
	providerTimeout := fs.setting("provider-timeout", "HELPDESK_PROVIDER_TIMEOUT", "10s", "how long one provider call may take")
	retryBase := fs.setting("retry-base", "HELPDESK_RETRY_BASE", "2s", "longest wait after a triage job's first failure")
	retryCap := fs.setting("retry-cap", "HELPDESK_RETRY_CAP", "60s", "longest wait after any failure")
	maxAttempts := fs.setting("triage-max-attempts", "HELPDESK_TRIAGE_MAX_ATTEMPTS", "5", "attempts before a triage job becomes a dead letter")
	triageWorkers := fs.setting("triage-workers", "HELPDESK_TRIAGE_WORKERS", strconv.Itoa(jobs.DefaultTriageWorkers), "triage jobs worked at once by this process (they mostly wait on the provider)")
	emailWorkers := fs.setting("email-workers", "HELPDESK_EMAIL_WORKERS", strconv.Itoa(jobs.DefaultEmailWorkers), "email jobs worked at once by this process, on a queue of their own")
	grace := fs.setting("shutdown-grace", "HELPDESK_SHUTDOWN_GRACE", "30s", "how long running jobs may take to finish on shutdown")
	keep := fs.setting("idempotency-retention", "HELPDESK_IDEMPOTENCY_RETENTION", "24h", "how long an Idempotency-Key replays its first answer")
	requestTimeout := fs.setting("request-timeout", "HELPDESK_REQUEST_TIMEOUT", "15s", "how long one API request may take; then 503 and nothing is written")
	idleTimeout := fs.setting("http-idle-timeout", "HELPDESK_HTTP_IDLE_TIMEOUT", "30s", "how long an idle keep-alive connection stays open")
	triageTimeout := fs.setting("triage-timeout", "HELPDESK_TRIAGE_TIMEOUT", "", "how long one attempt of a triage job may run; default 3 × the provider timeout + 15s")
	emailTimeout := fs.setting("email-timeout", "HELPDESK_EMAIL_TIMEOUT", "90s", "how long one attempt of an email job may run, every SMTP phase together")
	rescueAfter := fs.setting("rescue-after", "HELPDESK_RESCUE_AFTER", "", "a job still running this long after it started (its process died) goes to another worker; default the longest job timeout + 30s")
	smtpURL := fs.setting("smtp-url", "HELPDESK_SMTP_URL", "", "smtp://user:pass@host:587 (STARTTLS when offered; ?tls=required insists), smtps://…, smtp://host:25; unset: an in-process fake that keeps mail in memory")
	domain := fs.setting("mail-domain", "HELPDESK_MAIL_DOMAIN", "helpdesk.localhost", "domain of minted Message-IDs and of EHLO")
	from := fs.setting("from", "HELPDESK_FROM", "", "From of replies, with a display name; default Support <support@MAIL_DOMAIN>")
	emailBase := fs.setting("email-retry-base", "HELPDESK_EMAIL_RETRY_BASE", "5s", "longest wait after an email's first temporary failure")
	emailCap := fs.setting("email-retry-cap", "HELPDESK_EMAIL_RETRY_CAP", "15m", "longest wait after any email failure")
	emailAttempts := fs.setting("email-max-attempts", "HELPDESK_EMAIL_MAX_ATTEMPTS", "8", "attempts spent on errors of the message itself before an email becomes a dead letter")
	giveUp := fs.setting("email-give-up-after", "HELPDESK_EMAIL_GIVE_UP_AFTER", "72h", "an email still undelivered this long after it was written fails")
	delayNotice := fs.setting("email-delay-notice", "HELPDESK_EMAIL_DELAY_NOTICE", "30m", "an email undelivered this long shows as delayed, with a note on its ticket")
	suppressDays := fs.setting("suppress-days", "HELPDESK_SUPPRESS_DAYS", "30", "an address that bounced for good is left alone this many days")
	attachmentMax := attachmentMaxSetting(fs)
	ack := fs.setting("ack", "HELPDESK_ACK", "1", "1: acknowledge each new ticket of a customer by mail (RFC 3834 auto-reply); 0: no acknowledgements")
	ackMax := fs.setting("ack-max-per-day", "HELPDESK_ACK_MAX_PER_DAY", "3", "acknowledgements to one address in 24 hours, at most")
	ackTemplate := fs.setting("ack-template", "HELPDESK_ACK_TEMPLATE", "", "the acknowledgement's text, a Go text/template given .TicketID, .Subject, .CustomerName, .CustomerEmail: a file's path, or the text itself; unset: a built-in text")
	captureDir := fs.setting("capture-dir", "HELPDESK_CAPTURE_DIR", "captured-mail", "without HELPDESK_SMTP_URL, mail is captured, not sent, in this Maildir folder")
	smtpTimeout := fs.setting("smtp-timeout", "HELPDESK_SMTP_TIMEOUT", "1m", "deadline of each SMTP phase")
	breakerFailures := fs.setting("breaker-failures", "HELPDESK_BREAKER_FAILURES", "10", "provider failures in a row (5xx, timeouts, no connection) that open the circuit breaker")
	breakerWindow := fs.setting("breaker-window", "HELPDESK_BREAKER_WINDOW", "30s", "...within this long")
	probeMin := fs.setting("breaker-probe-min", "HELPDESK_BREAKER_PROBE_MIN", "5s", "an open breaker lets one probe through after this, doubling with each failed probe")
	probeMax := fs.setting("breaker-probe-max", "HELPDESK_BREAKER_PROBE_MAX", "2m", "...up to this")
	apiRate := fs.setting("api-rate", "HELPDESK_API_RATE", "20/s", "requests a second per API key, in this process; past it 429 with Retry-After")
	autoAssign := fs.setting("autoassign", "HELPDESK_AUTOASSIGN", "1", "1: triage gives each ticket to the least busy active agent of its team; 0: nobody is assigned automatically")
	autoclose := fs.setting("autoclose-after", "HELPDESK_AUTOCLOSE_AFTER", "168h", "a solved ticket closes after this long without a word from the customer")
	apiBurst := fs.setting("api-burst", "HELPDESK_API_BURST", "40", "requests per API key at once before the rate applies")
	replySecret := fs.setting("reply-secret", "HELPDESK_REPLY_SECRET", "", "signs the reply addresses of mail to agents (at least 16 characters); required with inbound mail")
	replyPrevious := fs.setting("reply-secret-previous", "HELPDESK_REPLY_SECRET_PREVIOUS", "", "earlier secrets, comma-separated, still accepted while replies to old notifications come in")
	inboundAddr := fs.setting("inbound-addr", "HELPDESK_INBOUND_ADDR", "", "address of the inbound SMTP (or LMTP) listener; unset: none")
	inboundLMTP := fs.setting("inbound-lmtp", "HELPDESK_INBOUND_LMTP", "0", "1: speak LMTP on the inbound listener, for a Postfix in front")
	inboundMax := fs.setting("inbound-max-bytes", "HELPDESK_INBOUND_MAX_BYTES", "31457280", "largest inbound message (a 20 MiB file takes 27 MiB in mail); larger ones get 552 5.3.4")
	inboundDomains := fs.setting("inbound-domains", "HELPDESK_INBOUND_DOMAINS", "", "comma-separated support domains accepted as recipients; default HELPDESK_MAIL_DOMAIN")
	inboundTimeout := fs.setting("inbound-timeout", "HELPDESK_INBOUND_TIMEOUT", "5m", "how long one inbound message may take, from the connection or MAIL to the final reply")
	inboundSessions := fs.setting("inbound-max-sessions", "HELPDESK_INBOUND_MAX_SESSIONS", "100", "inbound SMTP sessions at once; more are answered 421 4.3.2")
	if err := fs.parseNoArgs(args); err != nil {
		return serveConfig{}, err
	}

	var (
		e   errs
		err error
	)
	cfg := serveConfig{
		Role:              role.val,
		MetricsInterval:   duration(&e, metricsInterval),
		ProviderURL:       providerURL.val,
		ProviderKey:       providerKey.val,
		ProviderTimeout:   duration(&e, providerTimeout),
		RetryBase:         duration(&e, retryBase),
		RetryCap:          duration(&e, retryCap),
		TriageMaxAttempts: positiveInt(&e, maxAttempts),
		TriageWorkers:     positiveInt(&e, triageWorkers),
		EmailWorkers:      positiveInt(&e, emailWorkers),
		ShutdownGrace:     duration(&e, grace),
		IdempotencyKeep:   duration(&e, keep),
		SMTPURL:           smtpURL.val,
		MailDomain:        domain.val,
		EmailRetryBase:    duration(&e, emailBase),
		EmailRetryCap:     duration(&e, emailCap),
		EmailMaxAttempts:  positiveInt(&e, emailAttempts),
		SMTPTimeout:       duration(&e, smtpTimeout),
		CaptureDir:        captureDir.val,
		SuppressDays:      positiveInt(&e, suppressDays),
		InboundMaxBytes:   positiveInt(&e, inboundMax),
		InboundLMTP:       inboundLMTP.val == "1" || inboundLMTP.val == "true",

		DBConnectTimeout:   duration(&e, db.connectTimeout),
		RequestTimeout:     duration(&e, requestTimeout),
		HTTPIdleTimeout:    duration(&e, idleTimeout),
		EmailTimeout:       duration(&e, emailTimeout),
		EmailGiveUpAfter:   duration(&e, giveUp),
		EmailDelayNotice:   duration(&e, delayNotice),
		InboundTimeout:     duration(&e, inboundTimeout),
		InboundMaxSessions: positiveInt(&e, inboundSessions),

		Breaker: jobs.BreakerConfig{Failures: positiveInt(&e, breakerFailures), Window: duration(&e, breakerWindow),
			ProbeMin: duration(&e, probeMin), ProbeMax: duration(&e, probeMax)},
		APIBurst:       positiveInt(&e, apiBurst),
		AutoAssign:     autoAssign.val == "1",
		AutocloseAfter: duration(&e, autoclose),
	}
	e.keep(providerURL.urlOf("http", "https"))
	if r := role.val; r != "all" && r != "api" && r != "worker" {
		e.keep(role.fail("all, api or worker"))
	}
	if metricsAddr.val != "" {
		cfg.MetricsAddr, err = metricsAddr.hostPort()
		e.keep(err)
	}
	if pprofAddr.val != "" {
		// Profiles show memory and code paths: never on a public address.
		cfg.PprofAddr, err = pprofAddr.loopbackAddr()
		e.keep(err)
	}
	cfg.AttachmentMax = int64(positiveInt(&e, attachmentMax))
	switch ack.val {
	case "0":
	case "1":
		cfg.Ack = &desk.AckConfig{MaxPerDay: positiveInt(&e, ackMax)}
		if v := ackTemplate.val; v != "" {
			if cfg.Ack.Template, err = ackTemplateOf(v); err != nil {
				e.keep(ackTemplate.fail(err.Error()))
			}
		}
	default:
		e.keep(ack.fail("1 or 0"))
	}
	cfg.ReplySecret = replySecret.val
	if cfg.ReplySecret != "" && len(cfg.ReplySecret) < 16 {
		e.keep(replySecret.fail("a secret of at least 16 characters"))
	}
	for _, p := range strings.Split(replyPrevious.val, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.ReplyPrevious = append(cfg.ReplyPrevious, p)
		}
	}
	if v := autoAssign.val; v != "0" && v != "1" {
		e.keep(autoAssign.fail("1 or 0"))
	}
	if r, err := strconv.ParseFloat(strings.TrimSuffix(apiRate.val, "/s"), 64); err != nil || r <= 0 || math.IsInf(r, 0) {
		e.keep(apiRate.fail("requests a second, such as 20/s or 0.5"))
	} else {
		cfg.APIRate = r
	}
	if e.err == nil && cfg.Breaker.ProbeMax < cfg.Breaker.ProbeMin {
		e.keep(probeMax.fail(fmt.Sprintf("at least HELPDESK_BREAKER_PROBE_MIN (%s)", cfg.Breaker.ProbeMin)))
	}
	// The job timeouts bound the rescue: a provider call may take its
	// timeout three times over, and the rescue must come after any live
	// attempt has been cancelled.
	cfg.TriageTimeout = 3*cfg.ProviderTimeout + 15*time.Second
	if triageTimeout.val != "" {
		cfg.TriageTimeout = duration(&e, triageTimeout)
	}
	cfg.RescueAfter = max(cfg.TriageTimeout, cfg.EmailTimeout) + 30*time.Second
	if rescueAfter.val != "" {
		cfg.RescueAfter = duration(&e, rescueAfter)
		if e.err == nil && cfg.RescueAfter <= max(cfg.TriageTimeout, cfg.EmailTimeout) {
			e.keep(rescueAfter.fail(fmt.Sprintf("longer than the longest job timeout (%s)", max(cfg.TriageTimeout, cfg.EmailTimeout))))
		}
	}
	if inboundAddr.val != "" {
		cfg.InboundAddr, err = inboundAddr.hostPort()
		e.keep(err)
	}
	if v := inboundLMTP.val; v != "0" && v != "1" && v != "true" && v != "false" {
		e.keep(inboundLMTP.fail("1 or 0"))
	}
	cfg.InboundDomains = []string{cfg.MailDomain}
	if inboundDomains.val != "" {
		cfg.InboundDomains = nil
		for _, d := range strings.Split(inboundDomains.val, ",") {
			if d = strings.TrimSpace(d); !mailDomainRE.MatchString(d) {
				e.keep(inboundDomains.fail("domain names separated by commas"))
			}
			cfg.InboundDomains = append(cfg.InboundDomains, strings.TrimSpace(d))
		}
	}
	if !mailDomainRE.MatchString(cfg.MailDomain) {
		e.keep(domain.fail("a domain name such as support.example.com"))
	}
	fromValue := from.val
	if fromValue == "" {
		fromValue = "Support <support@" + cfg.MailDomain + ">"
	}
	if a, err := mail.ParseAddress(fromValue); err != nil {
		e.keep(from.fail("an address such as \"Example Support <support@example.com>\""))
	} else {
		cfg.From = a
	}
	cfg.DatabaseURL, err = db.required()
	e.keep(err)
	cfg.HTTPAddr, err = addr.hostPort()
	e.keep(err)
	if e.err == nil && cfg.RetryCap < cfg.RetryBase {
		e.keep(retryCap.fail(fmt.Sprintf("at least HELPDESK_RETRY_BASE (%s)", cfg.RetryBase)))
	}
	if e.err == nil && cfg.EmailRetryCap < cfg.EmailRetryBase {
		e.keep(emailCap.fail(fmt.Sprintf("at least HELPDESK_EMAIL_RETRY_BASE (%s)", cfg.EmailRetryBase)))
	}
	if e.err == nil && cfg.InboundAddr != "" && cfg.ReplySecret == "" {
		e.keep(usageErrorf("HELPDESK_REPLY_SECRET (-reply-secret) is not set: with inbound mail (HELPDESK_INBOUND_ADDR) agents answer notifications " +
			"at signed addresses, and the secret signs them; set one of at least 16 random characters"))
	}
	if e.err == nil && cfg.SMTPURL != "" {
		if _, err := mail.NewRelay(mail.RelayConfig{URL: cfg.SMTPURL}); err != nil {
			e.keep(smtpURL.fail(err.Error()))
		}
	}
	return cfg, e.err
}

// newHTTPServer bounds every phase of a connection: headers, the body (at
// most 1 MiB), the handler (which ends its own work at the request
// timeout), and idle keep-alive time, so that slow or idle clients cannot
// hold connections for ever.
func newHTTPServer(cfg serveConfig, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      cfg.RequestTimeout + 15*time.Second,
		IdleTimeout:       cfg.HTTPIdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// ackTemplateOf reads HELPDESK_ACK_TEMPLATE: a value with a template
// action or a line break is the text itself; anything else names a file.
func ackTemplateOf(v string) (*template.Template, error) {
	text := v
	if !strings.Contains(v, "{{") && !strings.Contains(v, "\n") {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("a readable file, or the template's text: %w", err)
		}
		text = string(b)
	}
	t, err := desk.ParseAckTemplate(text)
	if err != nil {
		return nil, fmt.Errorf("a Go text/template: %w", err)
	}
	return t, nil
}

func cmdServe(ctx context.Context, args []string, getenv func(string) string, logger *slog.Logger, stdout, stderr io.Writer) error {
	cfg, err := parseServeConfig(args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, logger, nil)
}

// serve runs until ctx ends, then shuts down in order: the listeners stop
// taking requests, the queue stops fetching and waits up to the grace
// period for running jobs. ready, if set, is told the HTTP listener's
// address once it listens. The role decides what runs: the API and
// inbound mail (api), the workers (worker), or both (all).
func serve(ctx context.Context, cfg serveConfig, logger *slog.Logger, ready func(addr string)) error {
	pool, err := store.Open(ctx, cfg.DatabaseURL, cfg.DBConnectTimeout)
	if err != nil {
		return fmt.Errorf("%w (DATABASE_URL; HELPDESK_DB_CONNECT_TIMEOUT is %s)", err, cfg.DBConnectTimeout)
	}
	defer pool.Close()
	pending, err := store.PendingMigrations(ctx, pool)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("the database needs migrations %v first: run `helpdesk migrate`", pending)
	}
	works := cfg.Role != "api"
	servesAPI := cfg.Role != "worker"

	// One way: the insert-only queue, then the use cases that enqueue
	// with it, then (in a worker process) the workers that hold them.
	jobsConfig := jobs.Config{
		Logger:               logger,
		Mail:                 true, // a relay, or the Maildir that captures mail
		TriageBackoff:        backoff.Backoff{Base: cfg.RetryBase, Cap: cfg.RetryCap},
		TriageMaxAttempts:    cfg.TriageMaxAttempts,
		TriageWorkers:        cfg.TriageWorkers,
		EmailWorkers:         cfg.EmailWorkers,
		IdempotencyRetention: cfg.IdempotencyKeep,
		EmailBackoff:         backoff.Backoff{Base: cfg.EmailRetryBase, Cap: cfg.EmailRetryCap},
		EmailMaxAttempts:     cfg.EmailMaxAttempts,
		Breaker:              cfg.Breaker,
		TriageTimeout:        cfg.TriageTimeout,
		EmailTimeout:         cfg.EmailTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		AutocloseAfter:       cfg.AutocloseAfter,
	}
	var replies *mail.ReplyAddresses
	if cfg.ReplySecret != "" {
		local, domain, _ := strings.Cut(cfg.From.Address, "@")
		replies = &mail.ReplyAddresses{Local: local, Domain: domain, Secret: []byte(cfg.ReplySecret)}
		for _, p := range cfg.ReplyPrevious {
			replies.Previous = append(replies.Previous, []byte(p))
		}
	}
	deskConfig := desk.Config{MailDomain: cfg.MailDomain, From: cfg.From, ReplyAddresses: replies, Domains: cfg.InboundDomains,
		SuppressFor: time.Duration(cfg.SuppressDays) * 24 * time.Hour, AttachmentMaxBytes: cfg.AttachmentMax, Ack: cfg.Ack,
		AutoAssign: cfg.AutoAssign, Logger: logger,
		Delivery: desk.DeliveryConfig{Backoff: jobsConfig.EmailBackoff, GiveUpAfter: cfg.EmailGiveUpAfter, DelayNotice: cfg.EmailDelayNotice,
			Lease: cfg.EmailTimeout}}
	providerURL := cfg.ProviderURL
	if works {
		if providerURL == "" {
			sim, err := simulator.Listen("127.0.0.1:0", simulator.DefaultSettings())
			if err != nil {
				return err
			}
			defer sim.Close()
			providerURL = sim.URL
			logger.Info("HELPDESK_PROVIDER_URL is not set: using the in-process simulator", slog.String("url", sim.URL))
		}
		if jobsConfig.Provider, err = provider.New(provider.Config{BaseURL: providerURL, APIKey: cfg.ProviderKey, Timeout: cfg.ProviderTimeout}); err != nil {
			return err
		}
		if cfg.SMTPURL == "" {
			captured, err := mail.NewMaildir(cfg.CaptureDir)
			if err != nil {
				return fmt.Errorf("HELPDESK_CAPTURE_DIR: %w", err)
			}
			deskConfig.Delivery.Sender = captured
			logger.Warn("HELPDESK_SMTP_URL is not set: mail is captured, not sent; read it in the Maildir folder "+captured.Dir()+"/new",
				slog.String("maildir", captured.Dir()))
		} else if deskConfig.Delivery.Sender, err = mail.NewRelay(mail.RelayConfig{URL: cfg.SMTPURL, HeloName: cfg.MailDomain,
			CommandTimeout: cfg.SMTPTimeout, BodyTimeout: 2 * cfg.SMTPTimeout, ReplyTimeout: 5 * cfg.SMTPTimeout}); err != nil {
			return err
		}
	}
	queue, err := jobs.NewQueue(pool, jobsConfig)
	if err != nil {
		return err
	}
	cases := desk.New(pool, queue, deskConfig)
	var workers *jobs.Workers
	if works {
		if workers, err = jobs.NewWorkers(pool, queue, cases); err != nil {
			return err
		}
	}

	// Listeners: the API (or a worker's probes), /metrics, inbound mail.
	var servers []*http.Server
	defer func() {
		for _, srv := range servers {
			_ = srv.Close()
		}
	}()
	serveErr := make(chan error, 1) // the first listener to stop; the others' ends are not waited for
	listen := func(what, addr string, srv *http.Server) (net.Addr, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s %s: %w", what, addr, err)
		}
		if cfg.listening != nil {
			cfg.listening(what, ln.Addr().String())
		}
		servers = append(servers, srv)
		go func() {
			err := srv.Serve(ln)
			select {
			case serveErr <- err:
			default: // another listener's end is reported already
			}
		}()
		return ln.Addr(), nil
	}
	apiServer := api.New(api.Config{Logger: logger, Pool: pool, Queue: queue, Desk: cases,
		IdempotencyRetention: cfg.IdempotencyKeep, RequestTimeout: cfg.RequestTimeout,
		RatePerKey: cfg.APIRate, BurstPerKey: cfg.APIBurst, Metrics: cfg.MetricsAddr == "", ProbesOnly: !servesAPI})
	if servesAPI {
		if err := apiServer.MountUI(); err != nil {
			return err
		}
		if err := apiServer.Start(ctx); err != nil {
			return err
		}
	}
	apiAddr, err := listen("HELPDESK_HTTP_ADDR", cfg.HTTPAddr, newHTTPServer(cfg, apiServer))
	if err != nil {
		return err
	}
	if cfg.MetricsAddr != "" {
		addr, err := listen("HELPDESK_METRICS_ADDR", cfg.MetricsAddr, newHTTPServer(cfg, metricsMux()))
		if err != nil {
			return err
		}
		logger.Info("serving metrics", slog.String("addr", "http://"+addr.String()+"/metrics"))
	}
	if cfg.PprofAddr != "" {
		profiles := newHTTPServer(cfg, pprofMux())
		profiles.WriteTimeout = 0 // a CPU profile streams for as long as it was asked to run
		addr, err := listen("HELPDESK_PPROF_ADDR", cfg.PprofAddr, profiles)
		if err != nil {
			return err
		}
		logger.Info("serving profiles", slog.String("addr", "http://"+addr.String()+"/debug/pprof/"))
	}
	gaugesCtx, stopGauges := context.WithCancel(ctx)
	defer stopGauges()
	go queue.RunGauges(gaugesCtx, cfg.MetricsInterval)

	if servesAPI && cfg.InboundAddr != "" {
		receiver := inbound.NewReceiver(cases, logger)
		inboundServer := inbound.NewServer(receiver, inbound.ServerConfig{Domain: cfg.MailDomain, LMTP: cfg.InboundLMTP,
			MaxBytes: int64(cfg.InboundMaxBytes), MessageTimeout: cfg.InboundTimeout, MaxSessions: cfg.InboundMaxSessions})
		inboundLn, err := net.Listen("tcp", cfg.InboundAddr)
		if err != nil {
			return fmt.Errorf("listen on HELPDESK_INBOUND_ADDR %s: %w", cfg.InboundAddr, err)
		}
		if cfg.listening != nil {
			cfg.listening("HELPDESK_INBOUND_ADDR", inboundLn.Addr().String())
		}
		go func() { _ = inboundServer.Serve(inboundLn) }()
		defer inboundServer.Close()
		logger.Info("receiving mail", slog.String("addr", inboundLn.Addr().String()), slog.Bool("lmtp", cfg.InboundLMTP),
			slog.Any("domains", cfg.InboundDomains))
	}

	if works {
		// The queue runs on a context of its own: a signal must lead to the
		// graceful Stop below, not to River's immediate cancellation.
		if err := workers.Start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	logger.Info("helpdesk is serving", slog.String("role", cfg.Role), slog.String("http", "http://"+apiAddr.String()),
		slog.String("provider", providerURL))
	if ready != nil {
		ready(apiAddr.String())
	}

	var listenErr error
	select {
	case <-ctx.Done():
	case listenErr = <-serveErr:
		logger.Error("a listener stopped", slog.Any("error", listenErr))
	}

	logger.Info("shutting down: no new jobs; running jobs may finish", slog.Duration("grace", cfg.ShutdownGrace))
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(graceCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("http shutdown", slog.Any("error", err))
		}
	}
	if works {
		if err := workers.Stop(graceCtx); err != nil {
			return err
		}
	}
	logger.Info("stopped")
	if listenErr != nil {
		return fmt.Errorf("http: %w", listenErr)
	}
	return nil
}

// pprofMux serves net/http/pprof's handlers, for HELPDESK_PPROF_ADDR.
func pprofMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// metricsMux serves /metrics alone, for HELPDESK_METRICS_ADDR.
func metricsMux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler())
	return mux
}
