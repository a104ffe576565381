package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/oauth"
)

// RelayConfig says where outbound mail goes and how long each phase may take.
type RelayConfig struct {
	// URL is smtp://user:pass@host:587 (STARTTLS when offered, ?tls=required
	// to insist, ?tls=none to never try), smtps://user:pass@host:465
	// (implicit TLS) or smtp://host:25 (no auth).
	URL string
	// HeloName is the name we give in EHLO: HELPDESK_MAIL_DOMAIN's host.
	HeloName string

	DialTimeout    time.Duration // TCP and TLS handshake; default 15s
	CommandTimeout time.Duration // each command's reply, the greeting included; default 1m
	BodyTimeout    time.Duration // writing the whole body; default 2m
	ReplyTimeout   time.Duration // the final reply after the body; default 5m

	// A session that ended well is kept for the next message: for up to
	// SessionMessages messages (default 100) and SessionIdle between two
	// (default 15s, well inside the five minutes a server waits, RFC 5321
	// §4.5.3.2.7).
	SessionMessages int
	SessionIdle     time.Duration

	TLSConfig *tls.Config // nil: verify the server's certificate against the system's roots

	// Captures: the server is the in-process sink of a service without a
	// relay; what it takes is captured, not sent, and must be shown so.
	Captures bool

	// Tokens sign in with XOAUTH2, for a URL with ?auth=xoauth2: an
	// access token valid now, and a way to say the server refused it.
	Tokens TokenSource
}

// TokenSource gives OAuth access tokens (oauth.Tokens is one).
type TokenSource interface {
	Token(ctx context.Context) (string, error)
	Refused()
}

// Relay sends mail to one SMTP server. It is safe for concurrent use; each
// Send has a session of its own while it runs, and a session that ended
// well is kept for the next Send (see sessionPool).
type Relay struct {
	pool sessionPool

	config      RelayConfig
	addr        string
	host        string
	implicitTLS bool
	tlsMode     string // "opportunistic", "required" or "none"
	auth        func() sasl.Client
	oauthUser   string // with ?auth=xoauth2
}

// NewRelay checks the configuration. Its errors never hold the URL: it
// may carry a password.
func NewRelay(config RelayConfig) (*Relay, error) {
	u, err := url.Parse(config.URL)
	if err != nil || u.Fragment != "" {
		// A # of a user or password would otherwise cut the URL short,
		// silently where what comes before it still reads as one.
		return nil, errors.New("a URL such as smtp://user:pass@host:587 (a password with reserved characters must be percent-encoded, # as %23)")
	}
	r := &Relay{config: config, host: u.Hostname(), tlsMode: "opportunistic"}
	switch u.Scheme {
	case "smtp":
	case "smtps":
		r.implicitTLS = true
	default:
		return nil, fmt.Errorf("a URL of scheme smtp or smtps, not %q", u.Scheme)
	}
	if r.host == "" {
		return nil, errors.New("a URL with a host, such as smtp://host:587")
	}
	port := u.Port()
	if port == "" {
		port = map[bool]string{true: "465", false: "587"}[r.implicitTLS]
	}
	r.addr = net.JoinHostPort(r.host, port)
	switch mode := u.Query().Get("tls"); mode {
	case "", "opportunistic":
	case "required", "none":
		r.tlsMode = mode
	default:
		return nil, fmt.Errorf("tls=required, opportunistic or none, not tls=%q", mode)
	}
	switch a := u.Query().Get("auth"); {
	case a == "xoauth2":
		if u.User == nil || u.User.Username() == "" {
			return nil, errors.New("auth=xoauth2 with the account as the URL's user, such as smtp://support%40example.com@smtp.office365.com:587?auth=xoauth2&mailbox=support")
		}
		if u.Query().Get("mailbox") == "" {
			return nil, errors.New("auth=xoauth2 with the mailbox whose OAuth tokens sign in: &mailbox=NAME (helpdesk mailbox connect NAME)")
		}
		r.oauthUser = u.User.Username()
		return r.finish(), nil
	case a != "":
		return nil, fmt.Errorf("auth=xoauth2, or no auth parameter (PLAIN with the URL's password), not auth=%q", a)
	}
	if u.User != nil {
		user := u.User.Username()
		pass, _ := u.User.Password()
		if !r.implicitTLS && r.tlsMode == "none" && !isLoopback(r.host) {
			return nil, errors.New("no password without TLS: drop tls=none")
		}
		r.auth = func() sasl.Client { return sasl.NewPlainClient("", user, pass) }
	}
	return r.finish(), nil
}

// OAuthMailbox is the mailbox whose tokens a URL with ?auth=xoauth2 signs
// in with; "" for another URL.
func OAuthMailbox(relayURL string) string {
	u, err := url.Parse(relayURL)
	if err != nil || u.Query().Get("auth") != "xoauth2" {
		return ""
	}
	return u.Query().Get("mailbox")
}

func (r *Relay) finish() *Relay {
	if r.config.HeloName == "" {
		r.config.HeloName = "localhost"
	}
	setDefault(&r.config.DialTimeout, 15*time.Second)
	setDefault(&r.config.CommandTimeout, time.Minute)
	setDefault(&r.config.BodyTimeout, 2*time.Minute)
	setDefault(&r.config.ReplyTimeout, 5*time.Minute)
	setDefault(&r.config.SessionIdle, 15*time.Second)
	if r.config.SessionMessages <= 0 {
		r.config.SessionMessages = 100
	}
	r.pool.idleFor = r.config.SessionIdle
	return r
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// Name identifies the relay for throttling: host:port.
func (r *Relay) Name() string { return r.addr }

// Captures reports whether mail "sent" through this relay is only captured.
func (r *Relay) Captures() bool { return r.config.Captures }

// Envelope is the SMTP envelope: MAIL FROM and one RCPT TO per recipient.
type Envelope struct {
	From string
	To   []string
}

// Result is what one delivery attempt did. Rcpt holds every recipient that
// got a reply to RCPT: nil for accepted, the error for refused. Err is the
// error that ended the exchange, if any.
type Result struct {
	Rcpt      map[string]*SMTPError
	Err       error
	Reply     string // the server's text after the body, e.g. its queue id
	BodySent  bool   // the whole body and its final dot were handed to the connection
	Uncertain bool   // the body was sent and no final reply came: it may have been delivered
}

// Send makes one delivery attempt: connect, EHLO, STARTTLS, AUTH, MAIL, one
// RCPT per recipient, DATA with raw, and the final reply. Every phase has a
// deadline, the write of the body included; ctx's deadline bounds them all
// together, and ctx's end ends the attempt.
func (r *Relay) Send(ctx context.Context, env Envelope, raw []byte) *Result {
	res := &Result{Rcpt: map[string]*SMTPError{}}
	s, err := r.session(ctx)
	if err != nil {
		res.Err = err
		return res
	}
	keep := false
	defer func() {
		if keep {
			r.pool.put(s)
		} else {
			s.c.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer func() { stop() }()

	opts, ok := mailOptions(s.c, env)
	if !ok {
		// Nothing was said on the session: it stays good for the next.
		for _, rcpt := range env.To {
			res.Rcpt[rcpt] = needsSMTPUTF8(rcpt)
		}
		keep = true
		return res
	}
	from := AddrSpec(env.From)
	err = s.c.Mail(from, opts)
	if err != nil && s.reused && staleSession(err) {
		// The server closed the kept session while it waited (an idle
		// timeout, a restart): nothing of this message was said yet, so a
		// fresh session tries again, within this attempt.
		s.c.Close()
		stop()
		if s, err = r.fresh(ctx); err != nil {
			res.Err = err
			return res
		}
		stop = context.AfterFunc(ctx, func() { s.conn.Close() })
		err = s.c.Mail(from, opts)
	}
	c, conn := s.c, s.conn
	if err != nil {
		res.Err = asSMTPError(PhaseMail, err)
		return res
	}
	accepted := 0
	for _, rcpt := range env.To {
		err := c.Rcpt(AddrSpec(rcpt), nil)
		if err == nil {
			res.Rcpt[rcpt] = nil
			accepted++
			continue
		}
		e := asSMTPError(PhaseRcpt, err)
		var se *SMTPError
		if !errors.As(e, &se) {
			res.Err = e // the connection broke: what was not asked stays unknown
			return res
		}
		res.Rcpt[rcpt] = se
		if se.Code == 421 { // the server closes the channel
			res.Err = se
			return res
		}
	}
	if accepted == 0 {
		_ = c.Quit()
		return res
	}

	w, err := c.Data()
	if err != nil {
		res.Err = asSMTPError(PhaseData, err)
		return res
	}
	conn.setLimit(r.config.BodyTimeout)
	if _, err := w.Write(raw); err != nil {
		res.Err = &ConnError{Phase: PhaseData, Err: err}
		return res
	}
	// CloseWithResponse writes the final dot, then waits for the answer
	// (go-smtp's SubmissionTimeout, which is our ReplyTimeout). Once the dot
	// is out, a broken or silent connection leaves the outcome unknown.
	conn.setLimit(max(r.config.BodyTimeout, r.config.ReplyTimeout))
	resp, err := w.CloseWithResponse()
	if err != nil {
		e := asSMTPError(PhaseReply, err)
		var ce *ConnError
		if errors.As(e, &ce) {
			res.BodySent, res.Uncertain = true, true
		}
		res.Err = e
		return res
	}
	res.BodySent, res.Reply = true, resp.StatusText
	s.sent++
	// Only a session whose every command succeeded is kept; after any
	// refusal the next attempt starts afresh, as before pooling. The next
	// MAIL starts the next transaction (RFC 5321 §3.3).
	if s.sent < r.config.SessionMessages && accepted == len(env.To) {
		keep = true
	} else {
		_ = c.Quit()
	}
	return res
}

// mailOptions asks for SMTPUTF8 (RFC 6531 §3.4) when an address of the
// envelope is not ASCII, such as a customer's jörg@example.de. Such a
// message cannot go through a relay that does not offer the extension
// (§3.2: neither the address nor the headers that carry it), to any of
// its recipients, now or later: ok is false.
func mailOptions(c *smtp.Client, env Envelope) (opts *smtp.MailOptions, ok bool) {
	if IsASCII(env.From) && !slices.ContainsFunc(env.To, func(a string) bool { return !IsASCII(a) }) {
		return nil, true
	}
	if offered, _ := c.Extension("SMTPUTF8"); !offered {
		return nil, false
	}
	return &smtp.MailOptions{UTF8: true}, true
}

// needsSMTPUTF8 is a recipient's refusal, for good, of a message that
// needs SMTPUTF8 at a relay that does not offer it, in RFC 6531 §3.5's
// codes: 553 5.6.7 for an address that is not ASCII, 554 5.6.9 for an
// ASCII one whose copy would carry the other in its headers.
func needsSMTPUTF8(rcpt string) *SMTPError {
	if !IsASCII(rcpt) {
		return &SMTPError{Code: 553, Enhanced: [3]int{5, 6, 7}, Phase: PhaseRcpt,
			Message: "the address is not ASCII and the relay does not offer SMTPUTF8 (RFC 6531)"}
	}
	return &SMTPError{Code: 554, Enhanced: [3]int{5, 6, 9}, Phase: PhaseRcpt,
		Message: "the message carries an address that is not ASCII and the relay does not offer SMTPUTF8 (RFC 6531)"}
}

// session is an open, greeted, authenticated SMTP session.
type session struct {
	c      *smtp.Client
	conn   *limitConn
	tls    bool
	sent   int       // messages (or refused transactions) it carried
	idle   time.Time // since when it waits in the pool
	reused bool      // it carried a message before this Send
}

// sessionPool keeps the sessions that ended well, newest last: every
// email opening its own session was a tenth of the process's CPU and as
// much again on the server's side. It keeps every one given back, so that
// as many Sends as ran at once find a session each the next time (with a
// fixed eight kept, twenty email workers opened a session for one email
// in four); it cannot hold more than ran at once, which the email workers
// bound. A session idle longer than idleFor is closed when it is found:
// by take, newest first, and by put, oldest first, so that the sessions of
// a burst do not outlive it by more than idleFor while fewer are in use.
type sessionPool struct {
	mu      sync.Mutex
	idle    []*session
	idleFor time.Duration // RelayConfig.SessionIdle
}

func (p *sessionPool) take(now time.Time) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		s := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(s.idle) < p.idleFor {
			return s
		}
		s.c.Close()
	}
	return nil
}

func (p *sessionPool) put(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.idle = time.Now()
	stale := 0
	for stale < len(p.idle) && s.idle.Sub(p.idle[stale].idle) >= p.idleFor {
		p.idle[stale].c.Close()
		stale++
	}
	p.idle = append(slices.Delete(p.idle, 0, stale), s)
}

// Close says QUIT on the kept sessions and closes them, giving a server
// that does not answer a second each at most.
func (r *Relay) Close() {
	r.pool.mu.Lock()
	idle := r.pool.idle
	r.pool.idle = nil
	r.pool.mu.Unlock()
	for _, s := range idle {
		s.conn.hard = time.Now().Add(time.Second)
		s.conn.setLimit(time.Second)
		_ = s.c.Quit()
		s.c.Close()
	}
}

// session is a kept session, its deadlines now this Send's, or a new one.
func (r *Relay) session(ctx context.Context) (*session, error) {
	if s := r.pool.take(time.Now()); s != nil {
		s.reused = true
		s.conn.hard, _ = ctx.Deadline()
		s.conn.setLimit(r.config.CommandTimeout)
		metrics.SMTPSessions.WithLabelValues(tlsLabel(s.tls), "reused").Inc()
		return s, nil
	}
	return r.fresh(ctx)
}

// fresh opens a new session.
func (r *Relay) fresh(ctx context.Context) (*session, error) {
	c, conn, isTLS, err := r.connect(ctx)
	if err != nil {
		return nil, err
	}
	metrics.SMTPSessions.WithLabelValues(tlsLabel(isTLS), "opened").Inc()
	return &session{c: c, conn: conn, tls: isTLS}, nil
}

func tlsLabel(tls bool) string {
	if tls {
		return "tls"
	}
	return "plain"
}

// staleSession says whether an error on a kept session's first command
// means the server is gone from it: the connection broke, or it said 421
// (closing the channel).
func staleSession(err error) bool {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code == 421
	}
	return true // not a reply: the connection
}

// connect dials, says EHLO, upgrades to TLS as configured and authenticates.
// It reports whether the session is over TLS: go-smtp cannot tell after
// our STARTTLS, the TLS connection being under the replayed greeting.
func (r *Relay) connect(ctx context.Context) (_ *smtp.Client, _ *limitConn, isTLS bool, _ error) {
	conn, limit, err := r.dial(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	isTLS = r.implicitTLS
	if !r.implicitTLS && r.tlsMode != "none" {
		if conn, isTLS, err = r.startTLS(conn); err != nil {
			conn.Close()
			return nil, nil, false, err
		}
	}
	c := r.newClient(conn)
	if err := c.Hello(r.config.HeloName); err != nil {
		c.Close()
		return nil, nil, false, asSMTPError(PhaseConnect, err)
	}
	if r.oauthUser != "" {
		if err := r.authXOAUTH2(ctx, c); err != nil {
			c.Close()
			return nil, nil, false, err
		}
	}
	if r.auth != nil {
		if err := c.Auth(r.auth()); err != nil {
			c.Close()
			var se *smtp.SMTPError
			if errors.As(err, &se) && se.Code >= 500 {
				return nil, nil, false, &ConfigError{Msg: "the server refused our login: " + se.Error()}
			}
			return nil, nil, false, asSMTPError(PhaseConnect, err)
		}
	}
	return c, limit, isTLS, nil
}

// startTLS reads the greeting, says EHLO with our name and upgrades to TLS
// if the server offers it (RFC 3207), before go-smtp takes the connection.
// go-smtp only upgrades inside NewClientStartTLS, whose EHLO would say
// "localhost"; doing it here keeps our name in every EHLO. go-smtp then
// reads a greeting that stands for the one we consumed, and says EHLO
// again, as RFC 3207 §4.2 requires after the upgrade. Without one, that
// second EHLO is answered from the first's reply and never sent: RFC 5321
// §4.1.4 lets a server refuse it, and some do (Python's smtpd, with 503,
// which failed every mail for good).
func (r *Relay) startTLS(conn net.Conn) (net.Conn, bool, error) {
	tp := textproto.NewConn(conn)
	greeting, _, err := readReply(&tp.Reader, 220)
	if err != nil {
		return conn, false, err
	}
	if err := tp.PrintfLine("EHLO %s", r.config.HeloName); err != nil {
		return conn, false, &ConnError{Phase: PhaseConnect, Err: err}
	}
	ehlo, lines, err := readReply(&tp.Reader, 250)
	var se *SMTPError
	if errors.As(err, &se) && (se.Code == 500 || se.Code == 502) && r.tlsMode != "required" {
		// A server without EHLO has no STARTTLS either: go-smtp says
		// EHLO, hears the same, and falls back to HELO (RFC 5321 §3.2).
		return &greetedConn{Conn: conn, pending: greeting}, false, nil
	}
	if err != nil {
		return conn, false, err
	}
	offered := false
	for _, line := range lines[1:] {
		offered = offered || strings.EqualFold(strings.TrimSpace(line), "STARTTLS")
	}
	if !offered {
		if r.tlsMode == "required" {
			return conn, false, &ConfigError{Msg: "the server does not offer STARTTLS and HELPDESK_SMTP_URL says tls=required"}
		}
		return &greetedConn{Conn: conn, pending: greeting, ehlo: "EHLO " + r.config.HeloName + "\r\n", ehloReply: ehlo}, false, nil
	}
	if err := tp.PrintfLine("STARTTLS"); err != nil {
		return conn, false, &ConnError{Phase: PhaseConnect, Err: err}
	}
	if _, _, err := readReply(&tp.Reader, 220); err != nil {
		return conn, false, err
	}
	tc := tls.Client(conn, r.tlsConfig())
	if err := tc.Handshake(); err != nil {
		return conn, false, &ConnError{Phase: PhaseConnect, Err: err}
	}
	return &greetedConn{Conn: tc, pending: greeting}, true, nil
}

// readReply reads one reply, every line of it (RFC 5321 §4.2.1), and
// returns it as it came, for go-smtp to read again, and its lines' texts;
// a reply whose code is not want is an SMTPError.
func readReply(r *textproto.Reader, want int) (raw string, texts []string, err error) {
	var b strings.Builder
	for {
		line, err := r.ReadLine()
		if err != nil {
			return "", nil, &ConnError{Phase: PhaseConnect, Err: err}
		}
		b.WriteString(line + "\r\n")
		if len(line) < 3 || len(texts) > 100 {
			return "", nil, &ConnError{Phase: PhaseConnect, Err: fmt.Errorf("malformed reply %q", line)}
		}
		text := ""
		if len(line) > 4 {
			text = line[4:]
		}
		texts = append(texts, text)
		if len(line) > 3 && line[3] == '-' {
			continue
		}
		code, err := strconv.Atoi(line[:3])
		if err != nil {
			return "", nil, &ConnError{Phase: PhaseConnect, Err: fmt.Errorf("malformed reply %q", line)}
		}
		if code != want {
			return "", nil, replyError(&textproto.Error{Code: code, Msg: strings.Join(texts, "\n")})
		}
		return b.String(), texts, nil
	}
}

// greetedConn hands go-smtp the replies startTLS consumed: the greeting,
// and, on a session without TLS, the EHLO's reply in place of sending
// go-smtp's own EHLO.
type greetedConn struct {
	net.Conn
	pending   string // what Read gives before reading from the connection: the greeting first
	ehlo      string // go-smtp's EHLO, as it will write it: not sent ...
	ehloReply string // ... but answered with the first EHLO's reply
}

func (c *greetedConn) Read(b []byte) (int, error) {
	if c.pending != "" {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

func (c *greetedConn) Write(b []byte) (int, error) {
	if c.ehlo != "" && string(b) == c.ehlo {
		c.ehlo, c.pending = "", c.pending+c.ehloReply
		return len(b), nil
	}
	c.ehlo = "" // only go-smtp's first write can be its EHLO
	return c.Conn.Write(b)
}

// replyError turns a reply read by net/textproto into our SMTPError.
func replyError(err error) error {
	var te *textproto.Error
	if !errors.As(err, &te) {
		return &ConnError{Phase: PhaseConnect, Err: err}
	}
	se := &SMTPError{Code: te.Code, Message: te.Msg, Phase: PhaseConnect}
	if code, rest, ok := strings.Cut(te.Msg, " "); ok {
		var e [3]int
		if n, _ := fmt.Sscanf(code, "%d.%d.%d", &e[0], &e[1], &e[2]); n == 3 {
			se.Enhanced, se.Message = e, rest
		}
	}
	return se
}

func (r *Relay) newClient(conn net.Conn) *smtp.Client {
	c := smtp.NewClient(conn)
	c.CommandTimeout, c.SubmissionTimeout = r.config.CommandTimeout, r.config.ReplyTimeout
	return c
}

// limitConn caps every deadline go-smtp sets at now + limit, so that its
// own generous defaults (five minutes for a greeting) cannot outlast ours,
// whatever path through the library a phase takes; and at the caller's
// deadline, so that the phases together cannot outlast the attempt.
type limitConn struct {
	net.Conn
	limit atomic.Int64 // nanoseconds
	hard  time.Time    // the context's deadline; zero for none
}

func (c *limitConn) SetDeadline(t time.Time) error {
	max := time.Now().Add(time.Duration(c.limit.Load()))
	if !c.hard.IsZero() && c.hard.Before(max) {
		max = c.hard
	}
	if t.IsZero() || t.After(max) {
		t = max
	}
	return c.Conn.SetDeadline(t)
}

func (c *limitConn) setLimit(d time.Duration) {
	c.limit.Store(int64(d))
	_ = c.SetDeadline(time.Time{})
}

// dial returns the connection for go-smtp and, under it, the one whose
// deadlines we steer.
func (r *Relay) dial(ctx context.Context) (net.Conn, *limitConn, error) {
	d := net.Dialer{Timeout: r.config.DialTimeout}
	raw, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, nil, &ConnError{Phase: PhaseConnect, Err: err}
	}
	conn := &limitConn{Conn: raw}
	conn.hard, _ = ctx.Deadline()
	conn.setLimit(r.config.CommandTimeout)
	if !r.implicitTLS {
		return conn, conn, nil
	}
	tc := tls.Client(conn, r.tlsConfig()) // its deadlines reach conn's
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, nil, &ConnError{Phase: PhaseConnect, Err: err}
	}
	return tc, conn, nil
}

func (r *Relay) tlsConfig() *tls.Config {
	if r.config.TLSConfig != nil {
		return r.config.TLSConfig.Clone()
	}
	return &tls.Config{ServerName: r.host, MinVersion: tls.VersionTLS12}
}

// authXOAUTH2 signs in with an access token; a refused one is refreshed
// and tried once more on the same connection.
func (r *Relay) authXOAUTH2(ctx context.Context, c *smtp.Client) error {
	if r.config.Tokens == nil {
		return &ConfigError{Msg: "the relay's URL asks for XOAUTH2 but this process has no token source for it"}
	}
	for try := 0; ; try++ {
		token, err := r.config.Tokens.Token(ctx)
		if err != nil {
			return &ConfigError{Msg: "no OAuth token for the relay: " + err.Error()}
		}
		err = c.Auth(oauth.NewXOAUTH2(r.oauthUser, token))
		if err == nil {
			return nil
		}
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code < 500 {
			return asSMTPError(PhaseConnect, err)
		}
		if try == 1 {
			return &ConfigError{Msg: "the server refused our OAuth token: " + se.Error()}
		}
		r.config.Tokens.Refused()
	}
}
