package mail

import (
	"fmt"
	"time"

	"github.com/helpdesk-dev/helpdesk/settings"
)

// SenderConfig says where outbound mail goes: a relay, or without one, a
// Maildir that captures it for a person to read.
type SenderConfig struct {
	URL        string        // the relay; "" captures in CaptureDir instead
	Timeout    time.Duration // each SMTP command's deadline; the body may take twice that, the final reply five times
	CaptureDir string
	HeloName   string // the name we give in EHLO: the mail domain (a command's wiring)
	// Tokens sign in to a relay whose URL says ?auth=xoauth2 (a command's
	// wiring: the tokens of the URL's mailbox).
	Tokens TokenSource
}

// Settings declares the sender's settings.
func (c *SenderConfig) Settings() []settings.Setting {
	return []settings.Setting{
		settings.Func("HELPDESK_SMTP_URL", "smtp-url", "",
			"the relay: smtp://user:pass@host:587 (STARTTLS when offered; ?tls=required insists, ?tls=none never tries), smtps://user:pass@host:465, smtp://host:25; "+
				"smtp://USER@smtp.office365.com:587?auth=xoauth2&mailbox=NAME signs in with the OAuth tokens of mailbox NAME (helpdesk mailbox connect); "+
				"unset: mail is captured, not sent, in the Maildir of HELPDESK_CAPTURE_DIR",
			func(v string) error {
				if _, err := NewRelay(RelayConfig{URL: v}); err != nil {
					return settings.Wantf("%s", err.Error())
				}
				c.URL = v
				return nil
			}),
		settings.Duration(&c.Timeout, "HELPDESK_SMTP_TIMEOUT", "smtp-timeout", "1m", "each SMTP command's deadline; the body may take twice that, the final reply five times"),
		settings.Text(&c.CaptureDir, "HELPDESK_CAPTURE_DIR", "capture-dir", "captured-mail",
			"without HELPDESK_SMTP_URL, mail is written to this Maildir folder (its new/ holds one file a message), not sent"),
	}
}

// NewSender returns the relay of c.URL, or without one the Maildir of
// c.CaptureDir.
func NewSender(c SenderConfig) (Sender, error) {
	settings.Defaults(c.Settings())
	if c.URL == "" {
		m, err := NewMaildir(c.CaptureDir)
		if err != nil {
			return nil, fmt.Errorf("HELPDESK_CAPTURE_DIR: %w", err)
		}
		return m, nil
	}
	return NewRelay(RelayConfig{URL: c.URL, HeloName: c.HeloName, CommandTimeout: c.Timeout, BodyTimeout: 2 * c.Timeout, ReplyTimeout: 5 * c.Timeout,
		Tokens: c.Tokens})
}
