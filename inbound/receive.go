package inbound

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/senderauth"
	"github.com/helpdesk-dev/helpdesk/settings"
)

// ReceiverConfig is how a receiver judges mail and how many it reads at
// once; zero values take the defaults of Settings.
type ReceiverConfig struct {
	// Auth reaches each message's sender-authentication verdict.
	Auth senderauth.Config
	// MaxParses is how many messages are read and parsed at once, by
	// every listener and fetcher of the process together: each costs
	// memory in proportion to its size, so a flood of sessions waits
	// here rather than growing the heap.
	MaxParses int
	Logger    *slog.Logger
}

// Settings declares the receiver's settings.
func (c *ReceiverConfig) Settings() []settings.Setting {
	return append(c.Auth.Settings(),
		settings.Int(&c.MaxParses, "HELPDESK_INBOUND_MAX_PARSES", "inbound-max-parses", "4",
			"inbound messages read and parsed at once; further ones wait (each takes up to about twice its size of the heap)"))
}

// Receiver reads inbound mail, judges its sender and hands it to the
// desk, which files it.
type Receiver struct {
	desk   *desk.Desk
	auth   senderauth.Config
	slots  chan struct{}
	logger *slog.Logger
}

// NewReceiver returns a receiver that files mail with d.
func NewReceiver(d *desk.Desk, config ReceiverConfig) *Receiver {
	settings.Defaults(config.Settings())
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	return &Receiver{desk: d, auth: config.Auth, slots: make(chan struct{}, max(config.MaxParses, 1)), logger: config.Logger}
}

// AcceptsRecipient reports whether rcpt is at one of the support domains.
func (rc *Receiver) AcceptsRecipient(rcpt string) bool { return rc.desk.AcceptsRecipient(rcpt) }

// Envelope is what the transport said of a message (RFC 5321): where it
// goes and, as far as known, where it comes from.
type Envelope struct {
	Rcpts    []string
	MailFrom string // the reverse path; "" for the null sender, or when not known
	// NullSender is a transport that said MAIL FROM:<>: a report or an
	// automatic response (RFC 5321 §4.5.5, RFC 3834 §3.3), which nothing
	// answers automatically (RFC 3834 §2).
	NullSender bool
	Helo       string
	ClientIP   net.IP // nil when not known (a mailbox fetcher)
	// Source is the mailbox a fetched mail comes from: its address and
	// the plus forms of it that the mail's headers name stand for the
	// recipients it has none of.
	Source *desk.MailSource
	// AuthservID, when set, is whose Authentication-Results are believed
	// for this message in place of the receiver's: for mail fetched from a
	// mailbox, the MTA the mailbox names or its provider, which received
	// it from the sender.
	AuthservID string
}

// ErrLineTooLong is a message with a line longer than MaxLine.
var ErrLineTooLong = errors.New("a line of the message is too long")

// MaxLine is the longest line a message may have. RFC 5322 §2.1.1 limits
// a line to 998 characters, but mail in the wild has longer header lines.
const MaxLine = 64 << 10

// Receive files raw, as ReceiveFrom does, for mail that is in memory
// already.
func (rc *Receiver) Receive(ctx context.Context, rcpts []string, raw []byte) (*desk.Filed, error) {
	return rc.ReceiveFrom(ctx, &Envelope{Rcpts: rcpts}, bytes.NewReader(raw))
}

// ReceiveFrom reads a message from r, once it has a parse slot, and
// files it (desk.FileInbound): under its ticket, held on it, as a new
// ticket, as a bounce or an agent's answer, or not at all when it is
// stored already. The message is compressed as it is read, and parsed
// from that, so that no copy of it is kept whole: what it costs is its
// compressed size and the parts that are kept.
func (rc *Receiver) ReceiveFrom(ctx context.Context, env *Envelope, r io.Reader) (*desk.Filed, error) {
	select {
	case rc.slots <- struct{}{}:
		defer func() { <-rc.slots }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	raw, size, sum, err := spool(r)
	if err != nil {
		return nil, err
	}
	// Once filed, the message's chunks serve the next one.
	var msg *desk.InboundMail
	defer func() {
		raw.Release()
		if msg != nil {
			for _, f := range msg.Attachments {
				f.Content.Release()
			}
		}
	}()
	unzip := func() io.Reader {
		zr, err := gzip.NewReader(raw.Reader())
		if err != nil {
			return strings.NewReader("") // it was written just now: cannot happen
		}
		return zr
	}
	msg, err = ParseReader(unzip(), size, sum, rc.desk.AttachmentMaxBytes())
	if err != nil {
		return nil, err
	}
	msg.NoAutoReply = msg.NoAutoReply || env.NullSender
	msg.RawGzip = raw
	rcpts := env.Rcpts
	if src := env.Source; src != nil {
		msg.Source = src
		rcpts = []string{src.Address}
		_, domain, _ := strings.Cut(src.Address, "@")
		for _, r := range msg.Recipients {
			if strings.HasSuffix(r, "@"+domain) && r != src.Address {
				rcpts = append(rcpts, r)
			}
		}
	}
	if msg.From != "" {
		_, domain, _ := strings.Cut(msg.From, "@")
		auth := rc.auth
		if env.AuthservID != "" {
			auth.AuthservID = env.AuthservID
		}
		v := auth.Check(ctx, &senderauth.Mail{FromDomain: domain, Results: msg.AuthResults, Raw: unzip,
			ClientIP: env.ClientIP, Helo: env.Helo, MailFrom: env.MailFrom})
		msg.Verdict, msg.VerdictDetail = v.Result, v.Detail
	}
	out, err := rc.desk.FileInbound(ctx, rcpts, msg)
	if err != nil {
		return nil, err
	}
	metrics.InboundMessages.WithLabelValues(out.Kind).Inc()
	rc.logger.InfoContext(ctx, "inbound mail", slog.String("outcome", out.Kind), slog.String("ticket_id", out.TicketID),
		slog.String("matched", out.Matched), slog.String("message_id", msg.MessageID), slog.Bool("automatic", msg.Automatic),
		slog.String("verdict", string(msg.Verdict)))
	return out, nil
}

// spool compresses r as it reads it, and hashes it: a message without a
// Message-ID is named by its hash; size is how many bytes it had. A line
// past MaxLine is ErrLineTooLong, once r is read to its end (the sender,
// still writing, then reads the answer instead of a reset connection).
func spool(r io.Reader) (gz *blob.Buffer, size int64, sum []byte, err error) {
	gz = &blob.Buffer{}
	zw, err := gzip.NewWriterLevel(gz, gzip.BestSpeed)
	if err != nil {
		return nil, 0, nil, err
	}
	h := sha256.New()
	lines := &lineLimit{max: MaxLine}
	size, err = io.Copy(io.MultiWriter(zw, h, lines), r)
	if err == nil {
		err = zw.Close()
	}
	if err == nil && lines.longest > lines.max {
		err = ErrLineTooLong
	}
	if err != nil {
		gz.Release()
		return nil, 0, nil, err
	}
	return gz, size, h.Sum(nil), nil
}

// lineLimit tracks the longest line written to it, CRLF left out.
type lineLimit struct {
	max, current, longest int
	cr                    bool // the last byte written was a CR
}

func (l *lineLimit) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.current += len(b)
			l.cr = b[len(b)-1] == '\r'
			break
		}
		line := l.current + i
		if (i > 0 && b[i-1] == '\r') || (i == 0 && l.cr) {
			line--
		}
		l.longest = max(l.longest, line)
		l.current, l.cr = 0, false
		b = b[i+1:]
	}
	if l.current > l.max+1 { // a line still going, past the limit already
		l.longest = max(l.longest, l.current-1)
	}
	return n, nil
}
