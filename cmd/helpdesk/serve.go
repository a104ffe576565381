package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/net/netutil"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/console"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/fetcher"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/oauth"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/settings"
	"github.com/helpdesk-dev/helpdesk/store"
)

// serveConfig is everything `helpdesk serve` reads from flags and the
// environment: serve's own settings, and each subsystem's configuration,
// filled by that subsystem's table of settings.
type serveConfig struct {
	Role            string // all, api or worker
	HTTPAddr        string
	MetricsAddr     string        // empty: /metrics on the HTTP listener
	PprofAddr       string        // empty: no profiling endpoints
	MetricsInterval time.Duration // how often the jobs are counted for the metrics
	ShutdownGrace   time.Duration
	HTTPIdleTimeout time.Duration // an idle keep-alive connection is closed after it
	HTTPMaxConn     int           // connections each HTTP listener holds at once
	TLSCert, TLSKey string        // the API serves TLS itself with these
	apiTLS          *tls.Config   // loaded from them

	DB       store.Config
	API      api.Config
	Jobs     jobs.Config
	Desk     desk.Config
	Inbound  inbound.ServerConfig
	Receiver inbound.ReceiverConfig
	Fetcher  fetcher.Config
	Mail     mail.SenderConfig
	Provider provider.Config // BaseURL empty: start the simulator in-process

	// listening, if set, is told each listener's address as it listens
	// (what is the variable that names it): for tests that listen on
	// port 0.
	listening func(what, addr string)
}

// settings declares serve's own settings.
func (c *serveConfig) settings() []settings.Setting {
	return []settings.Setting{
		settings.Func("HELPDESK_ROLE", "role", "all", "`all`: the API, inbound mail and the workers; `api`: the API and inbound mail, which queue jobs and work none; "+
			"`worker`: the workers, with only /healthz, /readyz and /metrics on HELPDESK_HTTP_ADDR",
			func(v string) error {
				if v != "all" && v != "api" && v != "worker" {
					return settings.Wantf("all, api or worker")
				}
				c.Role = v
				return nil
			}),
		settings.HostPort(&c.HTTPAddr, "HELPDESK_HTTP_ADDR", "http-addr", "127.0.0.1:8080", "the API's address (of /healthz, /readyz and /metrics for a worker)"),
		settings.HostPort(&c.MetricsAddr, "HELPDESK_METRICS_ADDR", "metrics-addr", "", "a listener of its own for /metrics; unset: /metrics on HELPDESK_HTTP_ADDR"),
		settings.LoopbackHostPort(&c.PprofAddr, "HELPDESK_PPROF_ADDR", "pprof-addr", "a loopback listener for net/http/pprof (/debug/pprof/); unset: none"),
		settings.Duration(&c.MetricsInterval, "HELPDESK_METRICS_INTERVAL", "metrics-interval", "15s", "how often each process counts the jobs by kind and state for /metrics"),
		settings.Duration(&c.ShutdownGrace, "HELPDESK_SHUTDOWN_GRACE", "shutdown-grace", "30s", "how long running jobs may take to finish on shutdown"),
		settings.Duration(&c.HTTPIdleTimeout, "HELPDESK_HTTP_IDLE_TIMEOUT", "http-idle-timeout", "30s", "an idle keep-alive connection is closed (headers must come within 10s, the body within 30s)"),
		settings.Int(&c.HTTPMaxConn, "HELPDESK_HTTP_MAX_CONNECTIONS", "http-max-connections", "1024",
			"connections each HTTP listener holds at once; one more waits in the kernel's queue until another closes, "+
				"so that what strangers open costs the process no memory past it (the idle timeout and the 10s for headers bound how long each is held)"),
		settings.Text(&c.TLSCert, "HELPDESK_TLS_CERT", "tls-cert", "",
			"a PEM certificate (chain) file: the API and River UI serve HTTPS with it; unset: plain HTTP, for a proxy in front that ends TLS (see HELPDESK_TRUSTED_PROXIES)"),
		settings.Text(&c.TLSKey, "HELPDESK_TLS_KEY", "tls-key", "", "the PEM private key of HELPDESK_TLS_CERT"),
	}
}

// groups are serve's settings by subsystem, in the order of the help and
// of the configuration reference.
func (c *serveConfig) groups() []settings.Group {
	return []settings.Group{
		{Title: "Database", About: "Every command reaches PostgreSQL through these.", Settings: c.DB.Settings()},
		{Title: "The service", About: "What `helpdesk serve` runs and where it listens.", Settings: c.settings()},
		{Title: "API", Settings: c.API.Settings()},
		{Title: "Tickets and mail", About: "The use cases: the support address, acknowledgements, assignment, suppressions, what is kept.", Settings: c.Desk.Settings()},
		{Title: "Outbound mail", Settings: c.Mail.Settings()},
		{Title: "Inbound mail", About: "The listener, and whom it believes about a sender (docs/mail.md has the threat model).",
			Settings: append(c.Inbound.Settings(), c.Receiver.Settings()...)},
		{Title: "Mailboxes (IMAP)", About: "The workers fetch the mailboxes added with `helpdesk mailbox add` (docs/mail.md#mailboxes).",
			Settings: c.Fetcher.Settings()},
		{Title: "AI provider", Settings: c.Provider.Settings()},
		{Title: "Queue and workers", About: "River's queues: attempts, backoff, timeouts, the provider's circuit breaker.", Settings: c.Jobs.Settings()},
	}
}

// databaseSetting declares DATABASE_URL and its connect timeout, which
// every command that reaches PostgreSQL takes.
func databaseSetting(fs *flagSet) *store.Config {
	db := &store.Config{}
	fs.declare(db.Settings()...)
	return db
}

// openDatabase connects to the database a command's DATABASE_URL names,
// and checks that it is migrated: a command on an older schema would
// fail on its first query with PostgreSQL's words.
func openDatabase(ctx context.Context, db *store.Config) (*pgxpool.Pool, error) {
	pool, err := connectDatabase(ctx, db)
	if err != nil {
		return nil, err
	}
	pending, err := store.PendingMigrations(ctx, pool)
	if err == nil && len(pending) > 0 {
		err = usageErrorf("the database is not migrated (%s): run `helpdesk migrate` first, with the same DATABASE_URL", pendingText(pending))
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// pendingText says which migrations wait.
func pendingText(pending []int) string {
	if len(pending) == 1 {
		return fmt.Sprintf("migration %d waits", pending[0])
	}
	return fmt.Sprintf("%d migrations wait, %d to %d", len(pending), pending[0], pending[len(pending)-1])
}

// connectDatabase connects to the database a command's DATABASE_URL names.
func connectDatabase(ctx context.Context, db *store.Config) (*pgxpool.Pool, error) {
	if db.URL == "" {
		return nil, usageErrorf("DATABASE_URL (-database-url) is not set")
	}
	pool, err := store.Open(ctx, db.URL, db.ConnectTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w (DATABASE_URL; HELPDESK_DB_CONNECT_TIMEOUT is %s)", err, db.ConnectTimeout)
	}
	return pool, nil
}

func parseServeConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) (serveConfig, error) {
	fs := newFlagSet("serve", "serve [flags]",
		"Runs the HTTP API and the triage workers. SIGTERM or SIGINT stops fetching jobs,\n"+
			"lets running ones finish within the grace period, and exits 0.", getenv, stdout, stderr)
	var cfg serveConfig
	for _, g := range cfg.groups() {
		fs.declare(g.Settings...)
	}
	if err := fs.parseNoArgs(args); err != nil {
		return serveConfig{}, err
	}
	if cfg.DB.URL == "" {
		return serveConfig{}, usageErrorf("DATABASE_URL (-database-url) is not set")
	}
	// The job timeouts bound the rescue: a provider call may take its
	// timeout three times over, and the rescue must come after any live
	// attempt has been cancelled.
	if cfg.Jobs.TriageTimeout == 0 {
		cfg.Jobs.TriageTimeout = 3*cfg.Provider.Timeout + 15*time.Second
	}
	if cfg.Jobs.RescueStuckJobsAfter == 0 {
		cfg.Jobs.RescueStuckJobsAfter = cfg.Jobs.LongestJobTimeout() + 30*time.Second
	}
	if err := cfg.Jobs.Validate(); err != nil {
		return serveConfig{}, fs.asGiven(err)
	}
	if s := cfg.Desk.ReplySecret; s != "" && len(s) < 16 {
		return serveConfig{}, usageErrorf("HELPDESK_REPLY_SECRET (-reply-secret) = \"********\": want a secret of at least 16 characters")
	}
	if cfg.Inbound.Addr != "" && cfg.Desk.ReplySecret == "" {
		return serveConfig{}, usageErrorf("HELPDESK_REPLY_SECRET (-reply-secret) is not set: with inbound mail (HELPDESK_INBOUND_ADDR) agents answer notifications " +
			"at signed addresses, and the secret signs them; set one of at least 16 random characters")
	}
	var err error
	if cfg.apiTLS, err = loadTLS("HELPDESK_TLS_CERT", cfg.TLSCert, "HELPDESK_TLS_KEY", cfg.TLSKey); err != nil {
		return serveConfig{}, err
	}
	if cfg.Inbound.TLS, err = loadTLS("HELPDESK_INBOUND_TLS_CERT", cfg.Inbound.TLSCert, "HELPDESK_INBOUND_TLS_KEY", cfg.Inbound.TLSKey); err != nil {
		return serveConfig{}, err
	}
	if cfg.Inbound.RequireTLS && cfg.Inbound.TLS == nil {
		return serveConfig{}, usageErrorf("HELPDESK_INBOUND_REQUIRE_TLS=1 needs HELPDESK_INBOUND_TLS_CERT and HELPDESK_INBOUND_TLS_KEY: without a certificate no sender could use STARTTLS")
	}
	// Settings one subsystem declares and another follows.
	cfg.Jobs.Mail = true // a relay, or the Maildir that captures mail
	cfg.Desk.Delivery.Backoff, cfg.Desk.Delivery.Lease = cfg.Jobs.EmailBackoff, cfg.Jobs.EmailTimeout
	cfg.Mail.HeloName = cfg.Desk.MailDomain
	cfg.Inbound.Domain = cfg.Desk.MailDomain
	return cfg, nil
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
		WriteTimeout:      cfg.API.RequestTimeout + 15*time.Second,
		IdleTimeout:       cfg.HTTPIdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
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
	pool, err := openDatabase(ctx, &cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	works := cfg.Role != "api"
	servesAPI := cfg.Role != "worker"

	// One way: the insert-only queue, then the use cases that enqueue
	// with it, then (in a worker process) the workers that hold them.
	cfg.Jobs.Logger, cfg.Desk.Logger, cfg.Receiver.Logger = logger, logger, logger
	providerURL := cfg.Provider.BaseURL
	relayTokens := &mailboxTokens{}
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
		providerConfig := cfg.Provider
		providerConfig.BaseURL = providerURL
		if cfg.Jobs.Provider, err = provider.New(providerConfig); err != nil {
			return err
		}
		if relayTokens.name = mail.OAuthMailbox(cfg.Mail.URL); relayTokens.name != "" {
			cfg.Mail.Tokens = relayTokens
		}
		if cfg.Desk.Delivery.Sender, err = mail.NewSender(cfg.Mail); err != nil {
			return err
		}
		if m, ok := cfg.Desk.Delivery.Sender.(*mail.Maildir); ok {
			logger.Warn("HELPDESK_SMTP_URL is not set: mail is captured, not sent; read it in the Maildir folder "+m.Dir()+"/new",
				slog.String("maildir", m.Dir()))
		}
	}
	queue, err := jobs.NewQueue(pool, cfg.Jobs)
	if err != nil {
		return err
	}
	cases := desk.New(pool, queue, cfg.Desk)
	relayTokens.bind(cases)
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
		// Each connection costs a goroutine and its buffers: past the
		// cap the next is not accepted until one closes.
		ln = netutil.LimitListener(ln, cfg.HTTPMaxConn)
		servers = append(servers, srv)
		go func() {
			var err error
			if srv.TLSConfig != nil {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			select {
			case serveErr <- err:
			default: // another listener's end is reported already
			}
		}()
		return ln.Addr(), nil
	}
	apiConfig := cfg.API
	apiConfig.Logger, apiConfig.Pool, apiConfig.Queue, apiConfig.Desk = logger, pool, queue, cases
	apiConfig.Metrics, apiConfig.ProbesOnly = cfg.MetricsAddr == "", !servesAPI
	apiConfig.WebhookEgress = &cfg.Jobs.WebhookEgress // one policy: what is registered is what is delivered
	apiServer := api.New(apiConfig)
	if servesAPI {
		if err := apiServer.MountUI(); err != nil {
			return err
		}
		agentConsole, err := console.New(cases, pool, apiServer, logger)
		if err != nil {
			return err
		}
		apiServer.MountConsole(agentConsole)
		if err := apiServer.Start(ctx); err != nil {
			return err
		}
	}
	apiHTTP := newHTTPServer(cfg, apiServer)
	apiHTTP.TLSConfig = cfg.apiTLS
	apiAddr, err := listen("HELPDESK_HTTP_ADDR", cfg.HTTPAddr, apiHTTP)
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

	receiver := inbound.NewReceiver(cases, cfg.Receiver) // the listener's and the fetchers': one bound on parses
	if servesAPI && cfg.Inbound.Addr != "" {
		inboundServer := inbound.NewServer(receiver, cfg.Inbound)
		inboundLn, err := net.Listen("tcp", cfg.Inbound.Addr)
		if err != nil {
			return fmt.Errorf("listen on HELPDESK_INBOUND_ADDR %s: %w", cfg.Inbound.Addr, err)
		}
		if cfg.listening != nil {
			cfg.listening("HELPDESK_INBOUND_ADDR", inboundLn.Addr().String())
		}
		go func() { _ = inboundServer.Serve(inboundLn) }()
		defer inboundServer.Close()
		logger.Info("receiving mail", slog.String("addr", inboundLn.Addr().String()), slog.Bool("lmtp", cfg.Inbound.LMTP))
	}

	fetched := make(chan struct{})
	fetchCtx, stopFetching := context.WithCancel(ctx)
	defer stopFetching()
	if works {
		// The queue runs on a context of its own: a signal must lead to the
		// graceful Stop below, not to River's immediate cancellation.
		if err := workers.Start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		// The mailboxes: each fetch files in a transaction of its own, so
		// a signal may end them at once.
		cfg.Fetcher.Logger, cfg.Fetcher.MaxBytes = logger, cfg.Inbound.MaxBytes
		go func() { fetcher.New(cases, receiver, cfg.Fetcher).Run(fetchCtx); close(fetched) }()
	} else {
		close(fetched)
	}
	scheme := "http://"
	if cfg.apiTLS != nil {
		scheme = "https://"
	}
	logger.Info("helpdesk is serving", slog.String("role", cfg.Role), slog.String("http", scheme+apiAddr.String()),
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
	stopFetching()
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
		// No email is being sent now: the kept SMTP sessions end with QUIT.
		if relay, ok := cfg.Desk.Delivery.Sender.(*mail.Relay); ok {
			relay.Close()
		}
	}
	select {
	case <-fetched:
	case <-graceCtx.Done():
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

// loadTLS loads a certificate and its key given by two settings: both or
// neither; nil for neither.
func loadTLS(certSetting, certFile, keySetting, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, usageErrorf("%s and %s go together: set both or neither", certSetting, keySetting)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, usageErrorf("%s %s with %s %s: %v", certSetting, certFile, keySetting, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// mailboxTokens are the OAuth tokens of the mailbox a relay's URL names
// (?auth=xoauth2&mailbox=NAME), read from it once the use cases exist and
// kept in it as they are refreshed.
type mailboxTokens struct {
	name   string
	mu     sync.Mutex
	desk   *desk.Desk
	tokens *oauth.Tokens
}

func (m *mailboxTokens) bind(d *desk.Desk) {
	m.mu.Lock()
	m.desk = d
	m.mu.Unlock()
}

// Token is a valid access token of the mailbox.
func (m *mailboxTokens) Token(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tokens == nil {
		if m.desk == nil {
			return "", errors.New("the relay's tokens are read once the service runs")
		}
		t, err := m.desk.MailboxTokens(ctx, m.name)
		if err != nil {
			return "", err
		}
		m.tokens = t
	}
	return m.tokens.Token(ctx)
}

// Refused makes the next token a new one.
func (m *mailboxTokens) Refused() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tokens != nil {
		m.tokens.Refused()
	}
}
