package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"helpdesk/mail"
	"helpdesk/store"
)

// EmailArgs is the job that delivers one outbound message.
type EmailArgs struct {
	MessageID int64 `json:"message_id"`
}

// Kind is River's name for the job.
func (EmailArgs) Kind() string { return "email_outbound" }

// ErrNoRelay is returned for a reply when no SMTP relay is configured.
var ErrNoRelay = errors.New("outbound email is not configured")

// ReplyParams are an agent's reply to a ticket.
type ReplyParams struct {
	TicketID string
	Author   string // agent:NAME
	Body     string
	Cc       []*mail.Address
}

// CreateReplyTx writes, in the caller's transaction, the outbound message
// with its Message-ID minted now (and never again), its delivery with one
// row per recipient, and its email_outbound job.
func (q *Queue) CreateReplyTx(ctx context.Context, tx pgx.Tx, p *ReplyParams) (*store.Message, int64, error) {
	if q.config.Relay == nil {
		return nil, 0, ErrNoRelay // no worker would ever send it
	}
	st := store.New(tx)
	ticket, err := st.GetTicket(ctx, p.TicketID)
	if err != nil {
		return nil, 0, err
	}
	customer, err := st.GetCustomer(ctx, ticket.CustomerID)
	if err != nil {
		return nil, 0, err
	}
	id := mail.NewMessageID(q.config.MailDomain)
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{
		TicketID: ticket.ID, Direction: store.DirectionOutbound, Author: p.Author, Body: p.Body, EmailMessageID: &id,
	})
	if err != nil {
		return nil, 0, err
	}
	recipients := []store.Recipient{{Address: customer.Email, Kind: "to"}}
	seen := map[string]bool{strings.ToLower(customer.Email): true}
	for _, cc := range p.Cc {
		if !seen[strings.ToLower(cc.Address)] {
			seen[strings.ToLower(cc.Address)] = true
			recipients = append(recipients, store.Recipient{Address: cc.Address, Kind: "cc"})
		}
	}
	if err := st.InsertOutboundEmail(ctx, &store.InsertOutboundEmailParams{
		MessageID: msg.ID, FromAddress: q.config.From.String(), Recipients: recipients,
	}); err != nil {
		return nil, 0, err
	}
	res, err := q.Client.InsertTx(ctx, tx, EmailArgs{MessageID: msg.ID}, &river.InsertOpts{MaxAttempts: q.config.EmailMaxAttempts})
	if err != nil {
		return nil, 0, fmt.Errorf("enqueue email %d: %w", msg.ID, err)
	}
	if err := st.SetOutboundJob(ctx, msg.ID, res.Job.ID); err != nil {
		return nil, 0, err
	}
	return msg, res.Job.ID, nil
}

// EmailWorker delivers an outbound message. It renders the mail once and
// keeps the bytes before the first send; every retry sends those bytes, the
// same Message-ID, only to the recipients not yet served.
type EmailWorker struct {
	river.WorkerDefaults[EmailArgs]

	pool    *pgxpool.Pool
	relay   *mail.Relay
	backoff Backoff
	logger  *slog.Logger
}

// NextRetry spaces the attempts of an email that failed for a while.
func (w *EmailWorker) NextRetry(job *river.Job[EmailArgs]) time.Time {
	return w.backoff.NextRetry(job.JobRow)
}

// Timeout leaves room for a slow relay: River's default minute is shorter
// than the SMTP phases' own deadlines.
func (w *EmailWorker) Timeout(*river.Job[EmailArgs]) time.Duration { return 15 * time.Minute }

// Work makes one delivery attempt.
func (w *EmailWorker) Work(ctx context.Context, job *river.Job[EmailArgs]) error {
	st := store.New(w.pool)
	em, err := st.GetOutboundEmail(ctx, job.Args.MessageID)
	if errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("MessageNotFound: outbound message %d does not exist", job.Args.MessageID))
	}
	if err != nil {
		return err
	}
	var to []string
	resendsUncertain := false
	for _, r := range em.Recipients {
		if r.State == store.RecipientPending || r.State == store.RecipientUncertain {
			to = append(to, r.Address)
			resendsUncertain = resendsUncertain || r.State == store.RecipientUncertain
		}
	}
	if len(to) == 0 {
		return nil // sent to everyone already: a duplicate delivery of the job
	}

	if em.Rendered == nil {
		if em, err = w.render(ctx, em); err != nil {
			return err
		}
	}

	// A relay that asked anyone to slow down is left alone until then.
	notBefore, err := st.RelayNotBefore(ctx, w.relay.Name())
	if err != nil {
		return err
	}
	if wait := time.Until(notBefore); wait > 0 {
		// A tenth more at random, so that the waiting jobs do not all come back at once.
		return river.JobSnooze(wait + time.Duration(w.backoff.rand(int64(wait/10)+1)))
	}

	if err := st.MarkSending(ctx, em.MessageID, resendsUncertain); err != nil {
		return err
	}
	from, err := mail.ParseAddress(em.FromAddress)
	if err != nil {
		return w.unsendable(ctx, em, fmt.Errorf("From: %w", err))
	}
	res := w.relay.Send(ctx, mail.Envelope{From: from.Address, To: to}, em.Rendered)
	if ctx.Err() != nil && res.Err != nil && !res.BodySent {
		return ctx.Err() // shutting down: River puts the job back without spending the attempt
	}
	return w.settle(ctx, job, em, to, res)
}

// render builds the mail from the stored message and its ticket and keeps
// the bytes; if another delivery of the job kept some first, those win.
func (w *EmailWorker) render(ctx context.Context, em *store.OutboundEmail) (*store.OutboundEmail, error) {
	st := store.New(w.pool)
	msg, err := st.GetMessage(ctx, em.MessageID)
	if err != nil {
		return nil, err
	}
	ticket, err := st.GetTicket(ctx, msg.TicketID)
	if err != nil {
		return nil, err
	}
	customer, err := st.GetCustomer(ctx, ticket.CustomerID)
	if err != nil {
		return nil, err
	}
	thread, err := st.ReplyThread(ctx, msg)
	if err != nil {
		return nil, err
	}
	from, err := mail.ParseAddress(em.FromAddress)
	if err != nil {
		return nil, w.unsendable(ctx, em, fmt.Errorf("From: %w", err))
	}
	out := &mail.Outgoing{
		From: from, Subject: ticket.Subject, TicketID: ticket.ID, Date: msg.CreatedAt,
		MessageID: *msg.EmailMessageID, InReplyTo: thread.Parent, References: mail.References(thread.Earlier),
		ThreadRoot: thread.Root, ThreadStart: ticket.CreatedAt, Body: msg.Body,
	}
	for _, r := range em.Recipients {
		a, err := mail.ParseAddress(r.Address)
		if err != nil {
			return nil, w.unsendable(ctx, em, err)
		}
		if r.Kind == "to" {
			a.Name = customer.Name
			out.To = append(out.To, a)
		} else {
			out.Cc = append(out.Cc, a)
		}
	}
	raw, err := out.Render()
	if err != nil {
		return nil, w.unsendable(ctx, em, err)
	}
	saved, err := st.SaveRendered(ctx, em.MessageID, out.InReplyTo, out.References, raw)
	if err != nil {
		return nil, err
	}
	if !saved {
		return st.GetOutboundEmail(ctx, em.MessageID) // another delivery's bytes win
	}
	em.Rendered, em.InReplyTo, em.References = raw, &out.InReplyTo, out.References
	return em, nil
}

// unsendable fails a message whose stored data cannot make a valid mail.
func (w *EmailWorker) unsendable(ctx context.Context, em *store.OutboundEmail, cause error) error {
	err := fmt.Errorf("InvalidMessage: %w", cause)
	if rerr := store.New(w.pool).RecordAttempt(ctx, em.MessageID, &store.AttemptResult{State: store.DeliveryFailed, LastError: err.Error()}); rerr != nil {
		return rerr
	}
	return river.JobCancel(err)
}

// settle classifies the attempt per recipient, records it, and tells River
// what comes next: done, snooze (slow down: no attempt spent), retry with
// backoff (temporary or uncertain), or stop (permanent).
func (w *EmailWorker) settle(ctx context.Context, job *river.Job[EmailArgs], em *store.OutboundEmail, to []string, res *mail.Result) error {
	outcome := mail.Classify(res, to)
	attempt := &store.AttemptResult{SMTPReply: res.Reply, LastError: outcome.LastError}
	var sent, failed, pending, uncertain int
	for _, r := range em.Recipients {
		state := r.State
		if o, ok := outcome.Recipients[r.Address]; ok {
			state = o.State
			attempt.Recipients = append(attempt.Recipients, store.RecipientResult{
				Address: r.Address, State: o.State, SMTPCode: o.Code, SMTPEnhanced: o.Enhanced, SMTPText: o.Text,
			})
		}
		switch state {
		case store.RecipientSent:
			sent++
		case store.RecipientFailed:
			failed++
		case store.RecipientUncertain:
			uncertain++
		default:
			pending++
		}
	}
	exhausted := job.Attempt >= job.MaxAttempts && !outcome.SlowDown && !outcome.Config && pending+uncertain > 0
	if exhausted {
		// River discards the job after this: whoever is left is not served.
		for i, r := range attempt.Recipients {
			if r.State != store.RecipientSent {
				attempt.Recipients[i].State = store.RecipientFailed
			}
		}
		failed, pending, uncertain = failed+pending+uncertain, 0, 0
	}
	switch {
	case pending+uncertain == 0 && failed == 0:
		attempt.State = store.DeliverySent
	case pending+uncertain == 0 && sent > 0:
		attempt.State = store.DeliveryPartiallySent
	case pending+uncertain == 0:
		attempt.State = store.DeliveryFailed
	case uncertain > 0:
		attempt.State = store.DeliveryUncertain
	default:
		attempt.State = store.DeliveryQueued
	}
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := store.New(tx).RecordAttempt(ctx, em.MessageID, attempt); err != nil {
			return err
		}
		if outcome.Delivered {
			return store.New(tx).RelayRecovered(ctx, w.relay.Name())
		}
		return nil
	})
	if err != nil {
		return err
	}

	log := w.logger.With(slog.Int64("job_id", job.ID), slog.Int64("message_id", em.MessageID),
		slog.Int("attempt", job.Attempt), slog.String("state", attempt.State))
	switch {
	case attempt.State == store.DeliverySent:
		log.InfoContext(ctx, "email sent", slog.String("reply", res.Reply))
		return nil
	case exhausted:
		return errors.New(outcome.LastError) // River makes it a dead letter
	case outcome.Config, pending+uncertain == 0:
		log.WarnContext(ctx, "email failed; a retry would get the same answer", slog.String("error", outcome.LastError))
		return river.JobCancel(errors.New(outcome.LastError))
	case outcome.SlowDown:
		until, err := store.New(w.pool).RecordSlowDown(ctx, w.relay.Name(), outcome.LastError, w.backoff.Base, w.backoff.Cap)
		if err != nil {
			return err
		}
		log.InfoContext(ctx, "relay asks to slow down; waiting without spending an attempt",
			slog.Time("until", until), slog.String("reply", outcome.LastError))
		return river.JobSnooze(max(time.Until(until), time.Millisecond))
	default:
		if uncertain > 0 {
			log.WarnContext(ctx, "email outcome unknown; it will be sent again with the same Message-ID and bytes",
				slog.String("error", outcome.LastError))
		}
		return errors.New(outcome.LastError)
	}
}
