// Package desk holds the helpdesk's use cases (open a ticket, follow up, reply, note, change, assign, close), which the API, inbound mail and the workers all call.
//
// It is a layer of its own so that each caller stays thin and the rules
// of a ticket's life are written once: api/ and inbound/ turn requests
// into calls here, jobs/ works what these calls queue. It stands above
// store/ and mail/ and below jobs/, which it reaches through Jobs.
package desk

import (
	"context"
	"errors"
	"regexp"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/mail"
	"helpdesk/store"
)

// Jobs queues the background work of a use case in its transaction;
// jobs.Queue is the one in use.
type Jobs interface {
	EnqueueTriageTx(ctx context.Context, tx pgx.Tx, ticketID string) (int64, error)
	// EnqueueEmailTx returns ErrNoRelay when no relay would send it.
	EnqueueEmailTx(ctx context.Context, tx pgx.Tx, messageID int64, ticketID string) (int64, error)
	// EnqueueNotifyTx queues a stored mail to an agent.
	EnqueueNotifyTx(ctx context.Context, tx pgx.Tx, messageID int64, ticketID string) (int64, error)
}

// Errors of the use cases; the API maps each to a status.
var (
	ErrNoRelay           = errors.New("outbound email is not configured")
	ErrInvalidTransition = errors.New("invalid status change")
	ErrUnknownAgent      = errors.New("no such active agent")
	ErrUnknownTeam       = errors.New("no such team")
	ErrNoDraft           = errors.New("the ticket has no draft reply")
	ErrDraftStale        = errors.New("the customer wrote after the draft; triage has not written a new one yet")
	ErrTicketClosed      = errors.New("the ticket is closed")
)

// Config is what the use cases need to know.
type Config struct {
	MailDomain string        // Message-IDs are minted on it; default helpdesk.localhost
	From       *mail.Address // the From of every reply; default Support <support@MailDomain>
	// ReplyAddresses signs the Reply-To of mail to agents, so that their
	// answers come back as theirs; nil: mail to agents has no Reply-To.
	ReplyAddresses *mail.ReplyAddresses
	// SuppressFor is how long an address that bounced for good is left
	// alone; default 30 days.
	SuppressFor time.Duration
	// AttachmentMaxBytes is the largest file whose content is kept, in
	// mail or uploaded; of a larger one in mail only its name, type and
	// size are. Default 20 MiB.
	AttachmentMaxBytes int64
	// Ack acknowledges each new ticket a customer opens; nil: none.
	Ack *AckConfig
}

// Desk runs the use cases against PostgreSQL.
type Desk struct {
	pool   *pgxpool.Pool
	jobs   Jobs
	config Config
}

// New returns the use cases over pool, queueing their work with jobs.
func New(pool *pgxpool.Pool, jobs Jobs, config Config) *Desk {
	if config.MailDomain == "" {
		config.MailDomain = "helpdesk.localhost"
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
	return &Desk{pool: pool, jobs: jobs, config: config}
}

// TeamName is what a team may be called, as agent_teams' CHECK has it.
var TeamName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)

// ActorSystem is who makes the changes that nobody asked for: autoclose
// and assignment by triage.
const ActorSystem = store.AuthorSystem
