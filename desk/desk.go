// Package desk holds helpdesk's use cases (open, follow up, reply, note, change, assign, file mail, deliver, triage, close): every rule about tickets.
//
// It is a layer of its own so that each caller stays thin and the rules
// of a ticket's life are written once: api/ and inbound/ turn requests and
// mail into calls here, jobs/ maps what these calls answer onto River's
// control flow. It stands above store/ (the SQL), mail/ (composing and
// sending) and provider/ (the AI), and reaches the queue only through the
// Enqueuer it is given: construction runs one way, store, then the
// enqueue-only queue, then desk, then the workers that hold the desk.
package desk

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/backoff"
	"helpdesk/mail"
	"helpdesk/store"
)

// Enqueuer queues the background work of a use case in its transaction;
// jobs.Queue, an insert-only River client, is the one in use.
type Enqueuer interface {
	EnqueueTriageTx(ctx context.Context, tx *store.Tx, ticketID string) (int64, error)
	// EnqueueEmailTx returns ErrNoRelay when no relay would send it.
	EnqueueEmailTx(ctx context.Context, tx *store.Tx, messageID int64, ticketID string) (int64, error)
	// EnqueueNotifyTx queues a stored mail to an agent; ErrNoRelay too.
	EnqueueNotifyTx(ctx context.Context, tx *store.Tx, messageID int64, ticketID string) (int64, error)
}

// Errors of the use cases; the edges map each to a status or a reply code.
var (
	ErrNoRelay           = errors.New("outbound email is not configured")
	ErrInvalidTransition = errors.New("invalid status change")
	ErrUnknownAgent      = errors.New("no such active agent")
	ErrUnknownTeam       = errors.New("no such team")
	ErrNoDraft           = errors.New("the ticket has no draft reply")
	ErrDraftStale        = errors.New("the customer wrote after the draft; triage has not written a new one yet")
	ErrTicketClosed      = errors.New("the ticket is closed")
	ErrCustomerExists    = errors.New("a customer with this address exists")
)

// Config is what the use cases need to know; zero values take the defaults.
type Config struct {
	MailDomain string        // Message-IDs are minted on it; default helpdesk.localhost
	From       *mail.Address // the From of every reply; default Support <support@MailDomain>
	// ReplyAddresses signs the Reply-To of mail to agents, so that their
	// answers come back as theirs; nil: mail to agents has no Reply-To,
	// and mail to such an address is no agent's answer.
	ReplyAddresses *mail.ReplyAddresses
	// Domains are the support domains whose addresses take mail; default
	// MailDomain.
	Domains []string
	// SuppressFor is how long an address that bounced for good is left
	// alone; default 30 days.
	SuppressFor time.Duration
	// AttachmentMaxBytes is the largest file whose content is kept, in
	// mail or uploaded; of a larger one in mail only its name, type and
	// size are. Default 20 MiB.
	AttachmentMaxBytes int64
	// Ack acknowledges each new ticket a customer opens; nil: none.
	Ack *AckConfig
	// AutoAssign gives a ticket, once triage chose its team, to the
	// team's least busy agent, in the transaction of the classify result.
	AutoAssign bool
	// Delivery is how outbound mail goes out, in processes that work
	// email jobs.
	Delivery DeliveryConfig
	Logger   *slog.Logger
}

// DeliveryConfig is how the email jobs of this process deliver.
type DeliveryConfig struct {
	// Sender takes the mail: a relay, or a Maildir that keeps it. Nil:
	// this process delivers nothing.
	Sender mail.Sender
	// Backoff spaces the attempts of an email, and the pauses of a relay
	// that is down; default 5s to 15m.
	Backoff backoff.Backoff
	// GiveUpAfter fails an email still undelivered this long after it
	// was written; default 72h.
	GiveUpAfter time.Duration
	// DelayNotice shows an email undelivered this long as delayed, with a
	// note on its ticket; default 30m.
	DelayNotice time.Duration
	// Lease is how long a probe of a relay that was down may take: one
	// attempt. Default 90s.
	Lease time.Duration
}

// Desk runs the use cases against PostgreSQL.
type Desk struct {
	pool   *pgxpool.Pool
	jobs   Enqueuer
	config Config
	log    *slog.Logger
}

// New returns the use cases over pool, queueing their work with jobs.
func New(pool *pgxpool.Pool, jobs Enqueuer, config Config) *Desk {
	if config.MailDomain == "" {
		config.MailDomain = "helpdesk.localhost"
	}
	domains := config.Domains
	if len(domains) == 0 {
		domains = []string{config.MailDomain}
	}
	config.Domains = make([]string, len(domains))
	for i, d := range domains {
		config.Domains[i] = strings.ToLower(d)
	}
	if config.SuppressFor <= 0 {
		config.SuppressFor = 30 * 24 * time.Hour
	}
	if config.Ack != nil {
		ack := *config.Ack
		if ack.Template == nil {
			ack.Template = template.Must(ParseAckTemplate(DefaultAckTemplate))
		}
		if ack.MaxPerDay <= 0 {
			ack.MaxPerDay = 3
		}
		config.Ack = &ack
	}
	if config.AttachmentMaxBytes <= 0 {
		config.AttachmentMaxBytes = DefaultAttachmentMaxBytes
	}
	if config.From == nil {
		config.From = &mail.Address{Name: "Support", Address: "support@" + config.MailDomain}
	}
	dc := &config.Delivery
	if dc.Backoff.Base <= 0 {
		dc.Backoff.Base = 5 * time.Second
	}
	if dc.Backoff.Cap <= 0 {
		dc.Backoff.Cap = 15 * time.Minute
	}
	if dc.GiveUpAfter <= 0 {
		dc.GiveUpAfter = 72 * time.Hour
	}
	if dc.DelayNotice <= 0 {
		dc.DelayNotice = 30 * time.Minute
	}
	if dc.Lease <= 0 {
		dc.Lease = 90 * time.Second
	}
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	return &Desk{pool: pool, jobs: jobs, config: config, log: config.Logger}
}

// TeamName is what a team may be called, as agent_teams' CHECK has it.
var TeamName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)
