package inbound

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/emersion/go-smtp"
)

// ServerConfig limits what the listener takes.
type ServerConfig struct {
	Domain        string // the name in the greeting
	LMTP          bool   // speak LMTP (RFC 2033), for a Postfix in front
	MaxBytes      int64  // the largest message; default 25 MiB
	MaxRecipients int    // default 50
	Timeout       time.Duration
}

// NewServer returns a go-smtp server that hands each message to the
// receiver and answers 250 only once it is committed.
func NewServer(rc *Receiver, config ServerConfig) *smtp.Server {
	if config.MaxBytes <= 0 {
		config.MaxBytes = 25 << 20
	}
	if config.MaxRecipients <= 0 {
		config.MaxRecipients = 50
	}
	if config.Timeout <= 0 {
		config.Timeout = 5 * time.Minute
	}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &session{rc: rc, timeout: config.Timeout}, nil
	}))
	s.Domain = config.Domain
	s.LMTP = config.LMTP
	s.MaxMessageBytes = config.MaxBytes // past it go-smtp answers 552 5.3.4
	s.MaxRecipients = config.MaxRecipients
	s.ReadTimeout, s.WriteTimeout = config.Timeout, config.Timeout
	s.ErrorLog = slogPrinter{rc.logger}
	return s
}

var (
	errNoSuchRecipient = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such recipient here"}
	errTryAgain        = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Could not store the message; try again later"}
	errUnparseable     = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "The message could not be read"}
	errNoSender        = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 7}, Message: "The message has no sender address"}
)

type session struct {
	rc      *Receiver
	timeout time.Duration
	rcpts   []string
}

func (s *session) Mail(string, *smtp.MailOptions) error { return nil }

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if !s.rc.AcceptsRecipient(to) {
		return errNoSuchRecipient
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		return err // go-smtp turns a too-large message into 552 5.3.4
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	_, err := s.rc.Receive(ctx, s.rcpts, buf.Bytes())
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnparseable):
		return errUnparseable
	case errors.Is(err, ErrNoSender):
		return errNoSender
	default:
		// Nothing was committed: the sender keeps the message and tries again.
		s.rc.logger.Error("inbound mail not stored", slog.Any("error", err))
		return errTryAgain
	}
}

func (s *session) Reset()        { s.rcpts = nil }
func (s *session) Logout() error { return nil }

type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(format string, v ...interface{}) {
	p.l.Debug("smtp server", slog.Any("detail", v))
}
func (p slogPrinter) Println(v ...interface{}) { p.l.Debug("smtp server", slog.Any("detail", v)) }
