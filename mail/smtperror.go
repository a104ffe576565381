package mail

import (
	"errors"
	"fmt"
	"strings"

	"github.com/emersion/go-smtp"
)

// Phase is the step of an SMTP exchange where something happened.
type Phase string

// The phases of one delivery.
const (
	PhaseConnect Phase = "connect" // dial, TLS, greeting, EHLO, STARTTLS, AUTH
	PhaseMail    Phase = "mail"    // MAIL FROM
	PhaseRcpt    Phase = "rcpt"    // RCPT TO
	PhaseData    Phase = "data"    // DATA and the body
	PhaseReply   Phase = "reply"   // the final reply after the body
)

// SMTPError is a reply from the server other than success. go-smtp's
// *smtp.SMTPError is turned into it in one place, asSMTPError; everything
// above decides by its methods, never by parsing text.
type SMTPError struct {
	Code     int
	Enhanced [3]int // 0.0.0 when the server sent none
	Message  string
	Phase    Phase
}

func (e *SMTPError) Error() string {
	if e.Enhanced[0] != 0 {
		return fmt.Sprintf("%d %d.%d.%d %s", e.Code, e.Enhanced[0], e.Enhanced[1], e.Enhanced[2], e.Message)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Message)
}

// Temporary reports a 4xx reply: the same message may pass later.
func (e *SMTPError) Temporary() bool { return e.Code >= 400 && e.Code < 500 }

// Permanent reports a 5xx reply: sending the same message again will fail the same way.
func (e *SMTPError) Permanent() bool { return e.Code >= 500 }

// SlowDown reports the replies by which a server asks us to send less, not
// to give up: 421 (closing, try later), 450 4.2.1 (mailbox receiving too
// fast), 451 4.7.x (local policy, rate limits, greylisting) and 452 4.5.3
// (too many recipients). They must not spend an attempt.
func (e *SMTPError) SlowDown() bool {
	switch {
	case e.Code == 421:
		return true
	case e.Code == 450:
		return e.Enhanced == [3]int{4, 2, 1}
	case e.Code == 451:
		return e.Enhanced[0] == 4 && e.Enhanced[1] == 7
	case e.Code == 452:
		return e.Enhanced == [3]int{4, 5, 3}
	}
	return false
}

// ConnError is a failure without a reply: the connection could not be made,
// broke, or the server did not answer in time.
type ConnError struct {
	Phase Phase
	Err   error
}

func (e *ConnError) Error() string { return fmt.Sprintf("%s: %v", e.Phase, e.Err) }
func (e *ConnError) Unwrap() error { return e.Err }

// ConfigError is a relay setting that cannot work, such as a required
// STARTTLS the server does not offer. Retrying will not help.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "smtp configuration: " + e.Msg }

// asSMTPError converts what go-smtp returned at a phase.
func asSMTPError(phase Phase, err error) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return &SMTPError{Code: se.Code, Enhanced: [3]int(se.EnhancedCode), Message: strings.TrimSpace(se.Message), Phase: phase}
	}
	return &ConnError{Phase: phase, Err: err}
}
