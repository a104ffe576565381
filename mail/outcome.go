package mail

import (
	"errors"
	"fmt"
	"regexp"
)

// Recipient states after an attempt; the same words the store keeps.
const (
	StatePending   = "pending"   // not served yet; a later attempt tries again
	StateSent      = "sent"      // the server took the message for this recipient
	StateFailed    = "failed"    // refused for good
	StateUncertain = "uncertain" // the body went out, the reply never came
)

// RecipientOutcome is what one attempt did to one recipient.
type RecipientOutcome struct {
	State    string
	Code     int    // the SMTP reply code that decided it, 0 if none
	Enhanced string // e.g. "5.1.1"
	Text     string
}

// Outcome is one attempt classified, once, for everything above: which
// recipients were served, whether the server asked us to slow down, and the
// error a person reads.
type Outcome struct {
	Recipients map[string]RecipientOutcome
	Delivered  bool // at least one recipient was served
	SlowDown   bool // 421, 450 4.2.1, 451 4.7.x or 452 4.5.3: wait, spend no attempt
	// RelayDown: the relay could not be reached or would not begin a
	// session (connection refused, no greeting in time, a failed TLS
	// handshake, a temporary refusal at connect). A fault of the relay,
	// not of the message: wait, spend no attempt.
	RelayDown bool
	Config    bool // the relay setting cannot work; retrying will not help
	LastError string
}

// Classify reads a Result for the recipients that were sent to.
func Classify(res *Result, to []string) *Outcome {
	o := &Outcome{Recipients: make(map[string]RecipientOutcome, len(to))}
	var cfg *ConfigError
	if errors.As(res.Err, &cfg) {
		o.Config, o.LastError = true, "SMTPConfig: "+cfg.Msg
		return o
	}
	o.RelayDown = relayDown(res.Err)
	for _, addr := range to {
		rcptErr, asked := res.Rcpt[addr]
		var decided error
		switch {
		case asked && rcptErr != nil:
			decided = rcptErr
		case asked && res.Err == nil && res.BodySent:
			o.Recipients[addr] = RecipientOutcome{State: StateSent, Code: 250, Text: res.Reply}
			o.Delivered = true
			continue
		case asked && res.Uncertain:
			o.Recipients[addr] = RecipientOutcome{State: StateUncertain}
			continue
		default: // refused or broken after RCPT, or never asked
			decided = res.Err
		}
		o.Recipients[addr] = o.judge(decided)
		if o.LastError == "" || (res.Err == nil && o.Recipients[addr].State == StateFailed) {
			o.LastError = describe(decided, addr, asked && rcptErr != nil)
		}
	}
	if res.Uncertain {
		o.LastError = describe(res.Err, "", false)
	}
	if o.LastError == "" && len(o.Recipients) > 0 && !o.Delivered {
		o.LastError = "SMTPUnknown: the attempt ended without a reply"
	}
	return o
}

var relayIDReply = regexp.MustCompile(`(?i)^ok\s+<?([a-z0-9][a-z0-9._+=-]{15,})>?\s*$`)

// RelayMessageID is the id a relay gave the message in its 250 ("Ok <id>",
// as Amazon SES answers, which then sends the mail with Message-ID
// <id@…amazonses.com>); "" for any other reply, such as Postfix's
// "2.0.0 Ok: queued as ABC123", which names a queue entry, not the mail.
func RelayMessageID(reply string) string {
	if m := relayIDReply.FindStringSubmatch(reply); m != nil {
		return m[1]
	}
	return ""
}

// PausesRelay reports whether the attempt says to leave the whole relay
// alone for a while, without spending the message's attempt.
func (o *Outcome) PausesRelay() bool { return o.SlowDown || o.RelayDown }

// relayDown tells a relay that is not there from one that answered.
func relayDown(err error) bool {
	var ce *ConnError
	if errors.As(err, &ce) {
		return ce.Phase == PhaseConnect
	}
	var se *SMTPError
	return errors.As(err, &se) && se.Phase == PhaseConnect && se.Temporary()
}

// judge turns an error into a recipient's state.
func (o *Outcome) judge(err error) RecipientOutcome {
	var se *SMTPError
	if !errors.As(err, &se) {
		return RecipientOutcome{State: StatePending} // no reply: a connection problem
	}
	r := RecipientOutcome{Code: se.Code, Text: se.Message}
	if se.Enhanced[0] != 0 {
		r.Enhanced = fmt.Sprintf("%d.%d.%d", se.Enhanced[0], se.Enhanced[1], se.Enhanced[2])
	}
	switch {
	case se.Permanent():
		r.State = StateFailed
	case se.SlowDown():
		r.State, o.SlowDown = StatePending, true
	default:
		r.State = StatePending
	}
	return r
}

// describe is the last_error a person reads: a kind, the reply, where.
func describe(err error, addr string, atRcpt bool) string {
	if err == nil {
		return ""
	}
	var se *SMTPError
	if errors.As(err, &se) {
		kind := "SMTPTemporary"
		switch {
		case se.Permanent():
			kind = "SMTPPermanent"
		case se.SlowDown():
			kind = "SMTPSlowDown"
		}
		where := string(se.Phase)
		if atRcpt {
			where = "rcpt " + addr
		}
		return fmt.Sprintf("%s: %s (%s)", kind, se.Error(), where)
	}
	var ce *ConnError
	if errors.As(err, &ce) && ce.Phase == PhaseReply {
		return "SMTPUncertain: no reply after the body: " + ce.Err.Error()
	}
	return "SMTPUnavailable: " + err.Error()
}
