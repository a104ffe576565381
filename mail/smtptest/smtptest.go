// Package smtptest runs a real go-smtp server on loopback that records what it receives and fails on cue.
package smtptest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/internal/testcert"
	"github.com/helpdesk-dev/helpdesk/oauth"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Fault is how the server treats one connection. The zero Fault accepts everything.
type Fault struct {
	// RejectConnect is sent instead of the greeting, then the connection
	// closes: 421 on connect.
	RejectConnect *smtp.SMTPError
	// Hang accepts the connection and never says a word.
	Hang bool
	// RcptErr refuses these recipients at RCPT TO: 550 for one recipient,
	// 452 to RCPT.
	RcptErr map[string]*smtp.SMTPError
	// DataErr is the reply after the body: 451 on DATA. Nothing is delivered.
	DataErr *smtp.SMTPError
	// DropAfterBody reads and delivers the message, then closes the
	// connection without a reply: the lost acknowledgement.
	DropAfterBody bool
	// StallBody stops reading the body after DATA, so a large message
	// fills the socket and the client's write blocks.
	StallBody bool
	// Reply is the text of the 250 after the body, in place of go-smtp's
	// "OK: queued": "Ok <id>" as Amazon SES answers.
	Reply string
}

// Common faults, as servers write them.
var (
	ErrServiceNotAvailable = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many connections, slow down"}
	ErrTryAgainLater       = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Local error in processing, try again later"}
	ErrRateLimited         = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Rate limited, try again later"}
	ErrNoSuchUser          = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}
	ErrMailboxFull         = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 2, 2}, Message: "Mailbox full"}
	ErrTooManyRecipients   = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 5, 3}, Message: "Too many recipients"}
)

// Delivery is one message the server accepted (or read and then dropped
// the connection on).
type Delivery struct {
	Conn int // the connection it came on, from 1
	From string
	To   []string
	Raw  []byte
	TLS  bool   // it came over TLS
	User string // the login it came with, if any
	Helo string // the name the client gave in the first EHLO of the connection
	UTF8 bool   // MAIL FROM asked for SMTPUTF8 (RFC 6531)
}

// Server is the fake SMTP server.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string

	smtp     *smtp.Server
	ln       net.Listener
	mu       sync.Mutex
	script   []Fault
	fallback Fault
	conns    int
	got      []Delivery
	held     []net.Conn
	open     []net.Conn // every connection a session began on
	users    map[string]string
	tokens   func(user string) string
	roots    *x509.CertPool
	closed   chan struct{}
	once     sync.Once
	maildir  string
	written  int
	forward  func(Delivery) error
}

// Options make the server speak TLS or ask for a login.
type Options struct {
	StartTLS    bool              // offer STARTTLS with a self-signed certificate for 127.0.0.1
	ImplicitTLS bool              // speak TLS from the first byte, as on port 465
	Users       map[string]string // accept AUTH PLAIN for these user → password; nil: no AUTH
	// Tokens, if set, takes AUTH XOAUTH2 instead: the one access token
	// valid for a user now ("" for none).
	Tokens func(user string) string
	// Maildir, if set, is a folder in Maildir layout (tmp, new, cur) where
	// each accepted message is also written, for a person to read.
	Maildir string
	// Forward, if set, is given each accepted message before the server
	// answers; its error is the answer. It makes the server a relay that
	// passes mail on, to another test server or a service's inbound port.
	Forward func(Delivery) error
	// SMTPUTF8 offers the extension (RFC 6531), as Postfix does by default.
	SMTPUTF8 bool
}

// Start listens on 127.0.0.1:0 and stops when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartWith(tb, Options{})
}

// StartWith is Start with TLS or AUTH.
func StartWith(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := listen(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Listen starts a plain server on 127.0.0.1:0; Close stops it.
func Listen() (*Server, error) { return listen(Options{}) }

// ListenWith is Listen with options, for a server that outlives no test.
func ListenWith(opts Options) (*Server, error) { return listen(opts) }

func listen(opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: ln.Addr().String(), users: opts.Users, tokens: opts.Tokens, closed: make(chan struct{}), maildir: opts.Maildir, forward: opts.Forward}
	if s.maildir != "" {
		for _, sub := range []string{"tmp", "new", "cur"} {
			if err := os.MkdirAll(filepath.Join(s.maildir, sub), 0o755); err != nil {
				ln.Close()
				return nil, fmt.Errorf("maildir: %w", err)
			}
		}
	}
	var tlsConfig *tls.Config
	if opts.StartTLS || opts.ImplicitTLS {
		cert, err := testcert.Make()
		if err != nil {
			ln.Close()
			return nil, err
		}
		tlsConfig, s.roots = cert.Server, cert.Pool
	}
	s.ln = &scriptedListener{Listener: ln, server: s}
	if opts.ImplicitTLS {
		s.ln = tls.NewListener(s.ln, tlsConfig)
	}
	s.smtp = smtp.NewServer(smtp.BackendFunc(s.newSession))
	if opts.StartTLS {
		s.smtp.TLSConfig = tlsConfig
	}
	s.smtp.EnableSMTPUTF8 = opts.SMTPUTF8
	s.smtp.Domain = "smtptest.localhost"
	s.smtp.ReadTimeout, s.smtp.WriteTimeout = time.Minute, time.Minute
	s.smtp.MaxRecipients = 100
	s.smtp.ErrorLog = discardLogger{}
	go func() { _ = s.smtp.Serve(s.ln) }()
	return s, nil
}

// URL is the HELPDESK_SMTP_URL that reaches this server without TLS.
func (s *Server) URL() string { return "smtp://" + s.Addr + "?tls=none" }

// RootCAs trusts the server's self-signed certificate.
func (s *Server) RootCAs() *x509.CertPool { return s.roots }

// Script sets how the next attempts go, one Fault each, in order: a
// connection takes one when it is accepted, and each message after the
// first on a connection takes the next that is about a message. After
// them, the fallback (see SetFallback). A script with a fault of a
// connection (RejectConnect, Hang) drops the connections open now, as
// DropConnections does, so that a client's kept session meets it.
func (s *Server) Script(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, faults...)
	for _, f := range faults {
		if f.RejectConnect != nil || f.Hang {
			s.dropLocked()
			break
		}
	}
}

// SetFallback sets how attempts go once the script is used up.
func (s *Server) SetFallback(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// Deliveries returns what the server received, in order.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.got...)
}

// Connections returns how many connections the server has had.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Send delivers raw to addr as a sending mail server would: EHLO, MAIL,
// one RCPT, DATA, QUIT, on a connection of its own.
func Send(addr, from, to string, raw []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("mx.example.net"); err != nil {
		return err
	}
	if err := c.SendMail(from, []string{to}, bytes.NewReader(raw)); err != nil {
		return err
	}
	return c.Quit()
}

// Close stops the server and drops every connection, hanging ones included.
// DropConnections closes every connection from the server's side without a
// word, as a server whose idle timeout passed does.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked()
}

func (s *Server) dropLocked() {
	for _, c := range s.open {
		_ = c.Close()
	}
	s.open = nil
}

func (s *Server) Close() error {
	s.once.Do(func() { close(s.closed) })
	s.mu.Lock()
	for _, c := range s.held {
		c.Close()
	}
	s.held = nil
	s.mu.Unlock()
	return s.smtp.Close()
}

// nextMessageFault takes the script's next fault if it is about a
// message (not RejectConnect or Hang, which wait for a connection), else
// gives the fallback.
func (s *Server) nextMessageFault() Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) > 0 && s.script[0].RejectConnect == nil && !s.script[0].Hang {
		f := s.script[0]
		s.script = s.script[1:]
		return f
	}
	return s.fallback
}

func (s *Server) nextFault() (int, Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns++
	if len(s.script) > 0 {
		f := s.script[0]
		s.script = s.script[1:]
		return s.conns, f
	}
	return s.conns, s.fallback
}

// scriptedListener applies the faults that happen before SMTP starts, and
// hands the rest to go-smtp with their Fault attached.
type scriptedListener struct {
	net.Listener
	server *Server
}

type scriptedConn struct {
	net.Conn
	id    int
	fault Fault
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		id, f := l.server.nextFault()
		switch {
		case f.Hang:
			l.server.mu.Lock()
			l.server.held = append(l.server.held, c)
			l.server.mu.Unlock()
		case f.RejectConnect != nil:
			e := f.RejectConnect
			fmt.Fprintf(c, "%d %d.%d.%d %s\r\n", e.Code, e.EnhancedCode[0], e.EnhancedCode[1], e.EnhancedCode[2], e.Message)
			c.Close()
		default:
			return &scriptedConn{Conn: c, id: id, fault: f}, nil
		}
	}
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	raw := c.Conn()
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	sc, ok := raw.(*scriptedConn)
	if !ok {
		return nil, errors.New("smtptest: unexpected connection type")
	}
	s.mu.Lock()
	s.open = append(s.open, c.Conn())
	s.mu.Unlock()
	sess := &session{server: s, conn: sc, smtp: c, helo: c.Hostname()}
	if s.users != nil || s.tokens != nil {
		return &authSession{session: sess}, nil
	}
	return sess, nil
}

type session struct {
	server *Server
	conn   *scriptedConn
	smtp   *smtp.Conn
	helo   string
	user   string
	from   string
	utf8   bool
	to     []string
	mails  int // MAIL commands on this connection
}

func (s *session) Mail(from string, opts *smtp.MailOptions) error {
	if (s.server.users != nil || s.server.tokens != nil) && s.user == "" {
		return smtp.ErrAuthRequired
	}
	// A connection's first message meets the fault it was accepted with;
	// each later one on the same session takes the script's next message
	// fault, so that a script means one fault per attempt whether or not
	// the client keeps its session.
	if s.mails++; s.mails > 1 {
		s.conn.fault = s.server.nextMessageFault()
	}
	s.from, s.utf8 = from, opts != nil && opts.UTF8
	return nil
}

// authSession asks for AUTH PLAIN.
type authSession struct{ *session }

func (s *authSession) AuthMechanisms() []string {
	if s.server.tokens != nil {
		return []string{oauth.XOAUTH2}
	}
	return []string{sasl.Plain}
}

// xoauth2 checks a client's XOAUTH2 response: a refused token gets the
// JSON challenge, then 535, as Google and Microsoft answer.
type xoauth2 struct {
	session *authSession
	failed  bool
}

func (x *xoauth2) Next(response []byte) ([]byte, bool, error) {
	refused := &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication failed"}
	if x.failed {
		return nil, true, refused
	}
	user, token, err := oauth.ParseXOAUTH2(response)
	if err != nil {
		return nil, true, refused
	}
	if want := x.session.server.tokens(user); want == "" || want != token {
		x.failed = true
		return oauth.FailureChallenge(), false, nil
	}
	x.session.user = user
	return nil, true, nil
}

func (s *authSession) Auth(mech string) (sasl.Server, error) {
	if s.server.tokens != nil {
		if mech != oauth.XOAUTH2 {
			return nil, &smtp.SMTPError{Code: 504, EnhancedCode: smtp.EnhancedCode{5, 5, 4}, Message: "Only XOAUTH2"}
		}
		return &xoauth2{session: s}, nil
	}
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if want, ok := s.server.users[user]; !ok || want != pass {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication failed"}
		}
		s.user = user
		return nil
	}), nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err, ok := s.conn.fault.RcptErr[to]; ok {
		return err
	}
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	if s.conn.fault.StallBody {
		select { // until the server closes: long past any client's body deadline
		case <-s.server.closed:
		case <-time.After(time.Minute):
		}
		s.conn.Close()
		return nil
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.conn.fault.DataErr != nil {
		return s.conn.fault.DataErr
	}
	s.server.mu.Lock()
	_, isTLS := s.smtp.TLSConnectionState()
	d := Delivery{Conn: s.conn.id, From: s.from, To: append([]string(nil), s.to...), Raw: raw, TLS: isTLS, User: s.user, Helo: s.helo, UTF8: s.utf8}
	s.server.got = append(s.server.got, d)
	s.server.written++
	n := s.server.written
	s.server.mu.Unlock()
	if s.server.maildir != "" {
		if err := writeMaildir(s.server.maildir, n, raw); err != nil {
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "could not keep the message: " + err.Error()}
		}
	}
	if s.server.forward != nil {
		if err := s.server.forward(d); err != nil {
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 4, 0}, Message: "could not pass the message on: " + err.Error()}
		}
	}
	if s.conn.fault.DropAfterBody {
		s.conn.Close() // the message is in, the acknowledgement never leaves
	}
	if s.conn.fault.Reply != "" {
		// go-smtp writes an error's code and text as they are, 250 included.
		return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.NoEnhancedCode, Message: s.conn.fault.Reply}
	}
	return nil
}

// writeMaildir delivers raw into the folder the Maildir way: written in
// tmp, then renamed into new, so a reader never sees half a message.
func writeMaildir(dir string, n int, raw []byte) error {
	host, _ := os.Hostname()
	name := fmt.Sprintf("%d.P%dQ%d.%s", time.Now().Unix(), os.Getpid(), n, strings.ReplaceAll(host, "/", "_"))
	tmp := filepath.Join(dir, "tmp", name)
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "new", name))
}

func (s *session) Reset() {
	s.from, s.utf8, s.to = "", false, nil
}

func (s *session) Logout() error { return nil }

type discardLogger struct{}

func (discardLogger) Printf(string, ...interface{}) {}
func (discardLogger) Println(...interface{})        {}
