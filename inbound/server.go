package inbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/settings"
)

// ServerConfig is where the listener listens and what it takes; zero
// values take the defaults of Settings.
type ServerConfig struct {
	Addr          string // where to listen; "" for no inbound mail (a command's setting)
	Domain        string // the name in the greeting
	LMTP          bool   // speak LMTP (RFC 2033), for a Postfix in front
	MaxBytes      int64  // the largest message
	MaxRecipients int    // default 50
	// Timeout bounds each read and write, and the storing of a message.
	// Default 5m.
	Timeout time.Duration
	// MessageTimeout bounds a whole message, from the connection or its
	// MAIL command to the final reply, however slowly the client sends.
	MessageTimeout time.Duration
	// MaxSessions is how many sessions run at once; a connection past it
	// is answered 421 4.3.2 and closed.
	MaxSessions int
	// TLSCert and TLSKey are the files of the certificate STARTTLS offers
	// (RFC 3207); the command loads them into TLS. RequireTLS refuses mail
	// sent without it.
	TLSCert, TLSKey string
	TLS             *tls.Config
	RequireTLS      bool
}

// Settings declares the listener's settings.
func (c *ServerConfig) Settings() []settings.Setting {
	return []settings.Setting{
		settings.HostPort(&c.Addr, "HELPDESK_INBOUND_ADDR", "inbound-addr", "", "address of the inbound SMTP (or LMTP) listener; unset: none"),
		settings.Bool(&c.LMTP, "HELPDESK_INBOUND_LMTP", "inbound-lmtp", "0", "1: speak LMTP (RFC 2033) on the inbound listener, for a Postfix in front"),
		settings.Int64(&c.MaxBytes, "HELPDESK_INBOUND_MAX_BYTES", "inbound-max-bytes", "31457280",
			"the largest inbound message (a 20 MiB file takes 27 MiB in mail); larger ones get 552 5.3.4"),
		settings.Duration(&c.MessageTimeout, "HELPDESK_INBOUND_TIMEOUT", "inbound-timeout", "5m",
			"how long one inbound message may take, from the connection or MAIL to the final reply"),
		settings.Int(&c.MaxSessions, "HELPDESK_INBOUND_MAX_SESSIONS", "inbound-max-sessions", "100", "inbound SMTP sessions at once; more are answered 421 4.3.2"),
		settings.Text(&c.TLSCert, "HELPDESK_INBOUND_TLS_CERT", "inbound-tls-cert", "",
			"a PEM certificate (chain) file: the listener offers STARTTLS with it (RFC 3207), as MTAs deliver with opportunistic TLS; unset: no STARTTLS"),
		settings.Text(&c.TLSKey, "HELPDESK_INBOUND_TLS_KEY", "inbound-tls-key", "", "the PEM private key of HELPDESK_INBOUND_TLS_CERT"),
		settings.Bool(&c.RequireTLS, "HELPDESK_INBOUND_REQUIRE_TLS", "inbound-require-tls", "0",
			"1: refuse mail sent without STARTTLS (530 5.7.0); needs HELPDESK_INBOUND_TLS_CERT"),
	}
}

// Server is the inbound SMTP (or LMTP) server.
type Server struct {
	*smtp.Server
	config ServerConfig
}

// NewServer returns a server that hands each message to the receiver and
// answers 250 only once it is committed.
func NewServer(rc *Receiver, config ServerConfig) *Server {
	settings.Defaults(config.Settings())
	if config.MaxRecipients <= 0 {
		config.MaxRecipients = 50
	}
	if config.Timeout <= 0 {
		config.Timeout = 5 * time.Minute
	}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return newSession(rc, config, c), nil
	}))
	s.Domain = config.Domain
	s.LMTP = config.LMTP
	// A customer's address need not be ASCII (RFC 6530): its mail comes
	// with SMTPUTF8 (RFC 6531), its From in UTF-8 (RFC 6532), and the
	// domain is kept in its ASCII form (parseFrom).
	s.EnableSMTPUTF8 = true
	s.MaxMessageBytes = config.MaxBytes // past it go-smtp answers 552 5.3.4
	s.MaxRecipients = config.MaxRecipients
	s.ReadTimeout, s.WriteTimeout = config.Timeout, config.Timeout
	// RFC 5322 §2.1.1 limits a line to 998 characters, but mail in the wild
	// has longer header lines; up to MaxLine they are read, and a message
	// with a longer one gets 500 5.4.0 once it has been read whole, so the
	// sender, still writing, reads the answer instead of a reset
	// connection. Past readLine go-smtp gives up on the stream (it cannot
	// go on reading once a line broke its limit) and the connection closes.
	s.MaxLineLength = readLine
	s.TLSConfig = config.TLS // STARTTLS when set
	s.ErrorLog = slogPrinter{rc.logger}
	return &Server{Server: s, config: config}
}

// Serve takes connections on ln until Close, within the session limits.
func (s *Server) Serve(ln net.Listener) error {
	return s.Server.Serve(&sessionListener{Listener: ln, slots: make(chan struct{}, s.config.MaxSessions),
		messageTimeout: s.config.MessageTimeout, logger: s.Server.ErrorLog})
}

var (
	errNoSuchRecipient = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such recipient here"}
	errTryAgain        = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Could not store the message; try again later"}
	errUnparseable     = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "The message could not be read"}
	errUnstorable      = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "The message's content cannot be stored"}
	errNoSender        = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 7}, Message: "The message has no usable sender address"}
	errLineTooLong     = &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 4, 0}, Message: "A line of the message is too long"}
)

// errUnicodeAddress refuses an envelope address that is not ASCII in a
// transaction whose MAIL did not declare SMTPUTF8, which alone allows one
// in either path: RFC 6531 §3.5's 553 and X.6.7, in Postfix's words.
var errUnicodeAddress = &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 6, 7},
	Message: "Must declare SMTPUTF8 to send unicode address"}

type session struct {
	rc         *Receiver
	timeout    time.Duration
	conn       *sessionConn // nil when served without Server.Serve
	env        Envelope
	tls        bool // the session runs over TLS (after STARTTLS)
	requireTLS bool
	utf8       bool // the transaction's MAIL asked for SMTPUTF8
	open       bool // a MAIL was taken, and no DATA, RSET or EHLO has ended its transaction
}

// newSession starts a session at EHLO, the first one or the one after
// STARTTLS, which go-smtp begins anew.
func newSession(rc *Receiver, config ServerConfig, c *smtp.Conn) *session {
	s := &session{rc: rc, timeout: config.Timeout, requireTLS: config.RequireTLS}
	nc := c.Conn()
	if tc, ok := nc.(*tls.Conn); ok {
		s.tls, nc = true, tc.NetConn()
	}
	s.conn, _ = nc.(*sessionConn)
	if addr, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		s.env.ClientIP = addr.IP
	}
	s.env.Helo = c.Hostname()
	return s
}

var errTLSRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Must issue a STARTTLS command first"}

// errNestedMail refuses a MAIL inside an open transaction, which a client
// MUST NOT send (RFC 5321 §4.1.4): taking it would mix the recipients of
// the two, in Postfix's words.
var errNestedMail = &smtp.SMTPError{Code: 503, EnhancedCode: smtp.EnhancedCode{5, 5, 1}, Message: "Error: nested MAIL command"}

func (s *session) Mail(from string, opts *smtp.MailOptions) error {
	if s.open {
		return errNestedMail
	}
	if s.requireTLS && !s.tls {
		metrics.InboundMessages.WithLabelValues("refused").Inc()
		return errTLSRequired // RFC 3207 §4
	}
	s.utf8 = opts != nil && opts.UTF8
	if !s.utf8 && !mail.IsASCII(from) {
		metrics.InboundMessages.WithLabelValues("refused").Inc()
		return errUnicodeAddress
	}
	if s.conn != nil {
		s.conn.startMessage()
	}
	s.env.MailFrom, s.env.NullSender, s.open = from, from == "", true
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if !s.utf8 && !mail.IsASCII(to) {
		return errUnicodeAddress
	}
	if !s.rc.AcceptsRecipient(to) {
		return errNoSuchRecipient
	}
	s.env.Rcpts = append(s.env.Rcpts, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if s.conn != nil {
		r = untilEnded{r: r, conn: s.conn}
	}
	_, err := s.rc.ReceiveFrom(ctx, &s.env, r)
	var smtpErr *smtp.SMTPError
	switch {
	case err == nil:
		return nil // ReceiveFrom counted it
	case errors.As(err, &smtpErr):
		return err // go-smtp's own: 552 5.3.4 for a message too large
	case errors.Is(err, smtp.ErrTooLongLine), errors.Is(err, ErrLineTooLong):
		metrics.InboundMessages.WithLabelValues("refused").Inc()
		return errLineTooLong
	case errors.Is(err, ErrUnparseable), errors.Is(err, desk.ErrNoSender), errors.Is(err, desk.ErrUnstorable):
		metrics.InboundMessages.WithLabelValues("refused").Inc()
	default:
		metrics.InboundMessages.WithLabelValues("tempfail").Inc()
	}
	switch {
	case errors.Is(err, ErrUnparseable):
		return errUnparseable
	case errors.Is(err, desk.ErrNoSender):
		return noSender(err)
	case errors.Is(err, desk.ErrUnstorable):
		// The same bytes would fail again on every retry: refuse them for
		// good rather than have the sender retry for days.
		s.rc.logger.Error("inbound mail refused: its content cannot be stored", slog.Any("error", err))
		return errUnstorable
	case errors.Is(err, errCutShort):
		// The client is gone and reads no answer: a sender's matter (a
		// network that drops), not ours.
		s.rc.logger.Warn("inbound mail not stored: its connection ended before it did", slog.String("client", s.env.ClientIP.String()))
		return errTryAgain
	default:
		// Nothing was committed: the sender keeps the message and tries again.
		s.rc.logger.Error("inbound mail not stored", slog.Any("error", err))
		return errTryAgain
	}
}

// noSender is errNoSender saying what was wrong with the From (two
// addresses, a domain that cannot be looked up, ...), so that whoever
// reads the bounce can mend it: the reply's text is for people (RFC 5321
// §4.2). The problem may quote the sender's own header, so it is cut to
// one line of printable ASCII and to maxReplyDetail bytes.
func noSender(err error) *smtp.SMTPError {
	var se *desk.SenderError
	if !errors.As(err, &se) || se.Problem == "" {
		return errNoSender
	}
	return &smtp.SMTPError{Code: errNoSender.Code, EnhancedCode: errNoSender.EnhancedCode,
		Message: errNoSender.Message + ": " + replyDetail(se.Problem)}
}

// maxReplyDetail bounds what a reply's text quotes of the message.
const maxReplyDetail = 200

// replyDetail is s as a reply's text may carry it: each byte outside
// printable ASCII a '?', at most maxReplyDetail bytes.
func replyDetail(s string) string {
	b := []byte(s)
	if len(b) > maxReplyDetail {
		b = append(b[:maxReplyDetail-3], "..."...)
	}
	for i, c := range b {
		if c < ' ' || c > '~' {
			b[i] = '?'
		}
	}
	return string(b)
}

// The longest line go-smtp reads: past it, it gives up on the stream.
const readLine = 1 << 20

func (s *session) Reset() {
	s.env.Rcpts, s.env.MailFrom, s.env.NullSender, s.open = nil, "", false, false
}
func (s *session) Logout() error { return nil }

// sessionListener runs at most cap(slots) sessions at once and gives each
// connection a deadline for its message as a whole.
type sessionListener struct {
	net.Listener
	slots          chan struct{}
	messageTimeout time.Duration
	logger         smtp.Logger
}

func (l *sessionListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			sc := &sessionConn{Conn: c, release: func() { <-l.slots }, timeout: l.messageTimeout}
			sc.startMessage() // the greeting and EHLO count toward the first message
			return sc, nil
		default:
			go busy(c)
		}
	}
}

// busy answers a connection over the session limit and closes it (RFC 5321
// §3.8: a server may answer 421 instead of its greeting).
func busy(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "421 4.3.2 Too many sessions at once, try again later\r\n")
	_ = c.Close()
}

// sessionConn caps every deadline go-smtp sets at the message's deadline,
// so that a client that sends a byte now and then cannot keep its session
// past it (go-smtp renews its read deadline on every read).
type sessionConn struct {
	net.Conn
	timeout  time.Duration
	hard     atomic.Int64 // unix nanoseconds
	release  func()
	released sync.Once
	ended    atomic.Bool // a read met the connection's end, or failed
}

func (c *sessionConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.ended.Store(true)
	}
	return n, err
}

// errCutShort is a message whose connection ended before it did.
var errCutShort = fmt.Errorf("the connection ended before the message did: %w", io.ErrUnexpectedEOF)

// untilEnded reads a message, and fails where it ends only because its
// connection did. go-smtp hands a BDAT LAST chunk that the connection cut
// short to Data as if it were whole (its chunk is an io.LimitReader, which
// ends at the connection's end as at the chunk's; DATA's reader, which
// needs the final dot, says io.ErrUnexpectedEOF). Stored, the half would
// take the message's Message-ID, and the whole, sent again by a sender
// that was never answered 250, would be dropped as its duplicate.
type untilEnded struct {
	r    io.Reader
	conn *sessionConn
}

func (u untilEnded) Read(b []byte) (int, error) {
	n, err := u.r.Read(b)
	if err == io.EOF && u.conn.ended.Load() {
		err = errCutShort
	}
	return n, err
}

// startMessage gives the next message its whole time.
func (c *sessionConn) startMessage() {
	c.hard.Store(time.Now().Add(c.timeout).UnixNano())
	_ = c.Conn.SetReadDeadline(time.Unix(0, c.hard.Load()))
}

func (c *sessionConn) capped(t time.Time, grace time.Duration) time.Time {
	hard := time.Unix(0, c.hard.Load()).Add(grace)
	if t.IsZero() || t.After(hard) {
		return hard
	}
	return t
}

func (c *sessionConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.capped(t, 0))
}

// SetWriteDeadline leaves a little time past the message's deadline, so
// the client still reads why its session ends.
func (c *sessionConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.capped(t, 10*time.Second))
}

func (c *sessionConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *sessionConn) Close() error {
	c.released.Do(c.release)
	return c.Conn.Close()
}

type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(format string, v ...interface{}) {
	p.l.Debug("smtp server", slog.Any("detail", v))
}
func (p slogPrinter) Println(v ...interface{}) { p.l.Debug("smtp server", slog.Any("detail", v)) }
