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

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/settings"
	"github.com/helpdesk-dev/helpdesk/store"
)

// Enqueuer queues the background work of a use case in its transaction,
// and cancels it; jobs.Queue, an insert-only River client, is the one in
// use.
type Enqueuer interface {
	// QueueTriageAtCommit has tx insert the ticket's triage job, with the
	// id taken for it in an earlier trip (store.Batch.NextJobID), with its
	// commit: the ticket names the job before it exists, and the insert
	// costs no trip of its own. A quiet job's triage mails no agent
	// (TriageResult.Quiet).
	QueueTriageAtCommit(tx *store.Tx, ticketID string, jobID int64, quiet bool)
	// QueueEmailAtCommit queues a stored mail whose bytes are kept with it
	// (an acknowledgement), numbered jobID, with tx's commit; ErrNoRelay
	// when no relay would send it.
	QueueEmailAtCommit(tx *store.Tx, messageID int64, ticketID string, jobID int64) error
	// QueueReplyAtCommit queues an agent's reply, rendered at its first
	// attempt (Attempt.TicketID), as QueueEmailAtCommit; ErrNoRelay too.
	QueueReplyAtCommit(tx *store.Tx, messageID int64, ticketID string, jobID int64) error
	// QueueNotifyAtCommit queues a stored mail to an agent, as
	// QueueEmailAtCommit; ErrNoRelay too.
	QueueNotifyAtCommit(tx *store.Tx, messageID int64, ticketID string, jobID int64) error
	// CancelTx cancels a job that has not started: ErrJobBusy for one
	// that runs, ErrJobFinished for one that is over, store.ErrNotFound
	// for none. It holds the job until tx ends, so no worker takes it.
	CancelTx(ctx context.Context, tx *store.Tx, jobID int64) (Cancelled, error)
	// EnqueueSLATx queues a look at a ticket's clocks at at (zero: now);
	// one look per ticket and time.
	EnqueueSLATx(ctx context.Context, tx *store.Tx, ticketID string, at time.Time) (int64, error)
}

// Errors of the use cases; the edges map each to a status or a reply code.
var (
	ErrNoRelay           = errors.New("outbound email is not configured")
	ErrInvalidTransition = errors.New("invalid status change")
	ErrUnknownAgent      = errors.New("no such active agent")
	ErrUnknownTeam       = errors.New("no such team")
	ErrInvalidPriority   = errors.New("a priority is 1 (urgent) to 4 (low)")
	// ErrTicketChanged is an answer written without the newest message:
	// a customer wrote, or another agent answered, since.
	ErrTicketChanged  = errors.New("the ticket has a newer message than the one you saw")
	ErrNoDraft        = errors.New("the ticket has no draft reply")
	ErrDraftStale     = errors.New("the customer wrote after the draft; triage has not written a new one yet")
	ErrTicketClosed   = errors.New("the ticket is closed")
	ErrCustomerExists = errors.New("a customer with this address exists")
)

// Config is what the use cases need to know; zero values take the defaults.
type Config struct {
	MailDomain string        // Message-IDs are minted on it; default helpdesk.localhost
	From       *mail.Address // the From of every reply; default Support <support@MailDomain>
	// ReplyAddresses signs the Reply-To of mail to agents, so that their
	// answers come back as theirs; nil: made from ReplySecret at the
	// support address, or, without a secret, mail to agents has no
	// Reply-To and mail to such an address is no agent's answer.
	ReplyAddresses      *mail.ReplyAddresses
	ReplySecret         string
	ReplySecretPrevious []string
	// ReplyAddressTTL is how long a notification's reply address takes
	// an agent's answer.
	ReplyAddressTTL time.Duration
	// IdempotencyRetention is how long an Idempotency-Key replays its
	// first answer; Prune forgets older keys. Default 24h.
	IdempotencyRetention time.Duration
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
	// DraftExamples is how many similar solved tickets of the team a
	// draft draws on, at most; negative: none. Default 3.
	DraftExamples int
	// OmitExampleQuestions leaves the other customers' questions out of
	// the examples: only the subject and the agents' answer go.
	OmitExampleQuestions bool
	// SimilarMinScore is how alike (cosine) a solved ticket must be to
	// serve as a draft's example; default 0.3.
	SimilarMinScore float64
	// DuplicateWindow is how far back a ticket's possible duplicate is
	// looked for, and DuplicateMinScore how alike it must be; default 7
	// days and 0.5.
	DuplicateWindow   time.Duration
	DuplicateMinScore float64
	// Similarity finds similar tickets; nil: an index in memory, read
	// from the tickets table (newMemorySimilarity).
	Similarity Similarity
	// SLARecheck is how long this process trusts its answer to whether any
	// SLA policy exists (slaSwitch); default 5 s. A test that counts a use
	// case's trips sets it past the test's end, where a clock would
	// otherwise decide whether the question is asked.
	SLARecheck time.Duration
	Logger     *slog.Logger
}

// DeliveryConfig is how the email jobs of this process deliver.
type DeliveryConfig struct {
	// Sender takes the mail: a relay, or a Maildir that keeps it. Nil:
	// this process delivers nothing.
	Sender mail.Sender
	// Backoff spaces the pauses of a relay that is down, as the email
	// queue spaces its retries: the command gives the queue's
	// (jobs.Config.EmailBackoff).
	Backoff backoff.Backoff
	// GiveUpAfter fails an email still undelivered this long after it
	// was written.
	GiveUpAfter time.Duration
	// DelayNotice shows an email undelivered this long as delayed, with a
	// note on its ticket.
	DelayNotice time.Duration
	// Lease is how long a probe of a relay that was down may take: one
	// attempt, the email queue's timeout (jobs.Config.EmailTimeout).
	Lease time.Duration
}

// Desk runs the use cases against PostgreSQL.
type Desk struct {
	pool      *pgxpool.Pool
	jobs      Enqueuer
	config    Config
	log       *slog.Logger
	addresses addressCache
	// similarity is Config.Similarity or the one in memory.
	similarity Similarity
	slaOn      slaSwitch
	assigning  assignTeams
	// steps commits triage steps saved at once together (SaveTriageStep).
	steps *store.Combiner
	// deliveries commits deliveries' writes made at once together: the
	// bytes kept before a send, the outcome recorded after (Deliver).
	deliveries *store.Combiner
}

// New returns the use cases over pool, queueing their work with jobs.
func New(pool *pgxpool.Pool, jobs Enqueuer, config Config) *Desk {
	if config.Ack != nil {
		ack := *config.Ack // the caller's stays as it was
		config.Ack = &ack
	}
	settings.Defaults(config.Settings())
	domains := config.Domains
	if len(domains) == 0 {
		domains = []string{config.MailDomain}
	}
	config.Domains = make([]string, len(domains))
	for i, d := range domains {
		config.Domains[i] = strings.ToLower(d)
	}
	if config.Ack != nil && config.Ack.Template == nil {
		config.Ack.Template = template.Must(ParseAckTemplate(DefaultAckTemplate))
	}
	if config.From == nil {
		config.From = &mail.Address{Name: "Support", Address: "support@" + config.MailDomain}
	}
	if config.ReplyAddresses == nil && config.ReplySecret != "" {
		local, domain, _ := strings.Cut(config.From.Address, "@")
		config.ReplyAddresses = &mail.ReplyAddresses{Local: local, Domain: domain, Secret: []byte(config.ReplySecret)}
		for _, p := range config.ReplySecretPrevious {
			config.ReplyAddresses.Previous = append(config.ReplyAddresses.Previous, []byte(p))
		}
	}
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	if config.SLARecheck <= 0 {
		config.SLARecheck = defaultSLARecheck
	}
	similarity := config.Similarity
	if similarity == nil {
		similarity = newMemorySimilarity(pool)
	}
	return &Desk{pool: pool, jobs: jobs, config: config, log: config.Logger, similarity: similarity,
		slaOn: slaSwitch{recheck: config.SLARecheck}, steps: store.NewCombiner(pool, stepGroups, stepsAGroup),
		deliveries: store.NewCombiner(pool, deliveryGroups, deliveriesAGroup)}
}

// runAlone runs fn in a unit of work of its own: the way past a
// combiner for the work that must not wait in one (a large mail's bytes).
func (d *Desk) runAlone(ctx context.Context, fn func(tx *store.Tx) error) error {
	return store.Run(ctx, d.pool, fn)
}

// IdempotencyRetention is how long an Idempotency-Key replays its first
// answer.
func (d *Desk) IdempotencyRetention() time.Duration { return d.config.IdempotencyRetention }

// TeamName is what a team may be called, as agent_teams' CHECK has it.
var TeamName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)
