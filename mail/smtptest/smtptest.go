// Package smtptest runs a real go-smtp server on loopback that records what it receives and fails on cue.
package smtptest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

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
}

// Common faults, as servers write them.
var (
	ErrServiceNotAvailable = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many connections, slow down"}
	ErrTryAgainLater       = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Local error in processing, try again later"}
	ErrRateLimited         = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Rate limited, try again later"}
	ErrNoSuchUser          = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}
	ErrMailboxFull         = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 2, 2}, Message: "Mailbox full"}
	ErrTooManyRecipients   = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 5, 3}, Message: "Too many recipients"}
	ErrContentRejected     = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message content rejected"}
)

// Delivery is one message the server accepted (or read and then dropped
// the connection on).
type Delivery struct {
	Conn int // the connection it came on, from 1
	From string
	To   []string
	Raw  []byte
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
	received chan struct{}
}

// Start listens on 127.0.0.1:0 and stops when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := Listen()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Listen starts a server on 127.0.0.1:0; Close stops it.
func Listen() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: ln.Addr().String(), received: make(chan struct{}, 1024)}
	s.ln = &scriptedListener{Listener: ln, server: s}
	s.smtp = smtp.NewServer(smtp.BackendFunc(s.newSession))
	s.smtp.Domain = "smtptest.localhost"
	s.smtp.ReadTimeout, s.smtp.WriteTimeout = time.Minute, time.Minute
	s.smtp.MaxRecipients = 100
	s.smtp.ErrorLog = discardLogger{}
	go func() { _ = s.smtp.Serve(s.ln) }()
	return s, nil
}

// URL is the HELPDESK_SMTP_URL that reaches this server.
func (s *Server) URL() string { return "smtp://" + s.Addr + "?tls=none" }

// Script sets how the next connections go, one Fault each, in order; after
// them, connections get the fallback (see SetFallback).
func (s *Server) Script(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, faults...)
}

// SetFallback sets how connections go once the script is used up.
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

// WaitDeliveries blocks until the server holds at least n deliveries or the timeout passes.
func (s *Server) WaitDeliveries(n int, timeout time.Duration) []Delivery {
	deadline := time.After(timeout)
	for {
		if got := s.Deliveries(); len(got) >= n {
			return got
		}
		select {
		case <-s.received:
		case <-deadline:
			return s.Deliveries()
		}
	}
}

// Close stops the server and drops every connection, hanging ones included.
func (s *Server) Close() error {
	s.mu.Lock()
	for _, c := range s.held {
		c.Close()
	}
	s.held = nil
	s.mu.Unlock()
	return s.smtp.Close()
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
	sc, ok := c.Conn().(*scriptedConn)
	if !ok {
		return nil, errors.New("smtptest: unexpected connection type")
	}
	return &session{server: s, conn: sc}, nil
}

type session struct {
	server *Server
	conn   *scriptedConn
	from   string
	to     []string
}

func (s *session) AuthPlain(username, password string) error { return nil }

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err, ok := s.conn.fault.RcptErr[to]; ok {
		return err
	}
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.conn.fault.DataErr != nil {
		return s.conn.fault.DataErr
	}
	s.server.mu.Lock()
	s.server.got = append(s.server.got, Delivery{Conn: s.conn.id, From: s.from, To: append([]string(nil), s.to...), Raw: raw})
	s.server.mu.Unlock()
	select {
	case s.server.received <- struct{}{}:
	default:
	}
	if s.conn.fault.DropAfterBody {
		s.conn.Close() // the message is in, the acknowledgement never leaves
	}
	return nil
}

func (s *session) Reset() {
	s.from, s.to = "", nil
}

func (s *session) Logout() error { return nil }

type discardLogger struct{}

func (discardLogger) Printf(string, ...interface{}) {}
func (discardLogger) Println(...interface{})        {}
