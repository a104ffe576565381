package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"helpdesk/desk"
	"helpdesk/mail"
	"helpdesk/metrics"
	"helpdesk/store"
)

// EmailArgs is the job that delivers one outbound message.
type EmailArgs struct {
	MessageID int64 `json:"message_id"`
	// TicketID is the message's ticket, for people reading the job; jobs
	// queued before it was added have none.
	TicketID string `json:"ticket_id,omitempty"`
}

// Kind is River's name for the job.
func (EmailArgs) Kind() string { return "email_outbound" }

// EmailWorker delivers an outbound message. It renders the mail once and
// keeps the bytes before the first send; every retry sends those bytes, the
// same Message-ID, only to the recipients not yet served.
type EmailWorker struct {
	river.WorkerDefaults[EmailArgs]

	pool    *pgxpool.Pool
	relay   *mail.Relay
	backoff Backoff
	logger  *slog.Logger

	notifier    Notifier      // tells the agents of refusals; nil: nobody
	timeout     time.Duration // one attempt, every SMTP phase included
	giveUpAfter time.Duration // an email still undelivered this long after it was queued fails
	delayNotice time.Duration // after this long undelivered, it shows as delayed, with a note on the ticket
}

// NextRetry spaces the attempts of an email that failed for a while.
func (w *EmailWorker) NextRetry(job *river.Job[EmailArgs]) time.Time {
	return w.backoff.NextRetry(job.JobRow)
}

// Timeout bounds one attempt, all SMTP phases together: River cancels the
// attempt's context then, and the relay's deadlines are capped by it. The
// rescuer hands a job back only after this, so a live attempt is never
// given to a second worker.
func (w *EmailWorker) Timeout(*river.Job[EmailArgs]) time.Duration { return w.timeout }

// Work makes one delivery attempt.
func (w *EmailWorker) Work(ctx context.Context, job *river.Job[EmailArgs]) error {
	return w.deliver(ctx, job.JobRow, job.Args.MessageID)
}

// deliver makes one delivery attempt of a stored outbound message, a
// reply to a customer or a mail to an agent alike. Before the send it
// costs three round trips the first time (the delivery with its message;
// what the mail is made of; the bytes kept with the mark that an attempt
// starts), two after; after the send, one.
func (w *EmailWorker) deliver(ctx context.Context, job *rivertype.JobRow, messageID int64) error {
	st := store.New(w.pool)
	var (
		em    store.OutboundEmail
		msg   store.Message
		reads store.Batch
	)
	reads.GetOutboundEmail(messageID, &em)
	reads.GetMessage(messageID, &msg)
	if err := st.Send(ctx, &reads); errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("MessageNotFound: outbound message %d does not exist", messageID))
	} else if err != nil {
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

	if age := time.Since(em.QueuedAt); age > w.giveUpAfter {
		return w.giveUp(ctx, &em, &msg, age)
	}
	// An address that bounced for good is not tried again until it is
	// cleared or its time is up.
	to, err := w.dropSuppressed(ctx, &em, &msg, to)
	if err != nil || len(to) == 0 {
		return err
	}
	from, err := mail.ParseAddress(em.FromAddress)
	if err != nil {
		return w.unsendable(ctx, &msg, fmt.Errorf("From: %w", err))
	}

	// The bytes are kept before the first send, and the attempt is marked
	// as starting in the same round trip, unless the relay is troubled.
	var (
		keep          store.Batch
		saved, marked bool
		out           *mail.Outgoing
		raw           []byte
	)
	if em.Rendered == nil {
		if out, raw, err = w.render(ctx, from, &em, &msg); err != nil {
			return err
		}
		keep.SaveRendered(em.MessageID, out.InReplyTo, out.References, raw, &saved)
	}
	keep.MarkSendingUnlessRelayTroubled(em.MessageID, resendsUncertain, w.relay.Name(), &marked)
	if err := st.Send(ctx, &keep); err != nil {
		return err
	}
	switch {
	case out != nil && saved:
		em.Rendered, em.InReplyTo, em.References = raw, &out.InReplyTo, out.References
	case out != nil:
		kept, err := st.GetOutboundEmail(ctx, em.MessageID) // another delivery's bytes win
		if err != nil {
			return err
		}
		em = *kept
	}

	// A relay that is down, or asked anyone to slow down, is left alone
	// until its pause ends; then one job probes it while the others wait.
	var gate store.RelayGate
	if !marked {
		if gate, err = st.EnterRelay(ctx, w.relay.Name(), w.timeout); err != nil {
			return err
		}
	}
	if gate.Wait > 0 || gate.Probing {
		wait := gate.Wait
		if gate.Probing {
			// Back soon after the probe succeeds, or about when the next pause would end.
			wait = min(max(wait, w.backoff.Base), w.backoff.Bound(gate.Faults+1))
		}
		if err := w.noticeDelay(ctx, &em); err != nil {
			return err
		}
		// A tenth more at random, so that the waiting jobs do not all come back at once.
		return river.JobSnooze(wait + time.Duration(w.backoff.rand(int64(wait/10)+1)))
	}

	if !marked {
		if err := st.MarkSending(ctx, em.MessageID, resendsUncertain); err != nil {
			return err
		}
	}
	res := w.relay.Send(ctx, mail.Envelope{From: from.Address, To: to}, em.Rendered)
	if ctx.Err() != nil && res.Err != nil && !res.BodySent {
		return ctx.Err() // shutting down: River puts the job back without spending the attempt
	}
	return w.settle(ctx, job, &em, &msg, to, res, gate.Troubled)
}

// dropSuppressed marks the recipients on the suppression list suppressed
// and returns the others. With nobody left, the message fails at once.
func (w *EmailWorker) dropSuppressed(ctx context.Context, em *store.OutboundEmail, msg *store.Message, to []string) ([]string, error) {
	suppressed := map[string]bool{}
	for _, r := range em.Recipients {
		if r.Suppressed {
			suppressed[strings.ToLower(r.Address)] = true
		}
	}
	if len(suppressed) == 0 {
		return to, nil
	}
	attempt := &store.AttemptResult{State: store.DeliveryQueued}
	var left, dropped []string
	for _, addr := range to {
		if suppressed[strings.ToLower(addr)] {
			dropped = append(dropped, addr)
			attempt.Recipients = append(attempt.Recipients, store.RecipientResult{Address: addr, State: store.RecipientSuppressed,
				SMTPText: "suppressed: it bounced for good before"})
		} else {
			left = append(left, addr)
		}
	}
	if len(left) > 0 {
		return left, store.New(w.pool).RecordAttempt(ctx, em.MessageID, attempt)
	}
	why := fmt.Sprintf("Suppressed: %s bounced for good before; clear it with DELETE /v1/suppressions/ADDRESS to send again", strings.Join(dropped, ", "))
	attempt.State, attempt.LastError = store.DeliverySuppressed, why
	for _, r := range em.Recipients {
		if r.State == store.RecipientSent || r.State == store.RecipientCaptured {
			attempt.State = store.DeliveryPartiallySent
		}
	}
	if err := w.record(ctx, msg, attempt, nil); err != nil {
		return nil, err
	}
	w.logger.WarnContext(ctx, "email not sent: suppressed", slog.Int64("message_id", em.MessageID), slog.Any("addresses", dropped))
	return nil, river.JobCancel(errors.New(why))
}

// reportRefusals tells the ticket's agents of every customer recipient the
// server refused for good (a 5xx at RCPT or after the body), as a bounce.
func (w *EmailWorker) reportRefusals(ctx context.Context, tx pgx.Tx, msg *store.Message, results []store.RecipientResult) error {
	if w.notifier == nil || !store.ToCustomer(msg.Direction) {
		return nil // mail to agents: their own problem to see in the log
	}
	for _, r := range results {
		if !refusedForGood(r) {
			continue
		}
		status := strings.TrimSpace(r.SMTPEnhanced + " " + strconv.Itoa(r.SMTPCode) + " " + r.SMTPText)
		if err := w.notifier.BounceTx(ctx, tx, &desk.Bounce{TicketID: msg.TicketID, Address: r.Address, Status: status, Code: r.SMTPCode}); err != nil {
			return err
		}
	}
	return nil
}

// refusedForGood: the server refused the recipient with a 5xx.
func refusedForGood(r store.RecipientResult) bool {
	return r.State == store.RecipientFailed && r.SMTPCode >= 500
}

// noticeDelay shows a message that waited longer than the delay notice as
// delayed, with a system note on its ticket for the agents, once.
func (w *EmailWorker) noticeDelay(ctx context.Context, em *store.OutboundEmail) error {
	if em.DelayedAt != nil || time.Since(em.QueuedAt) < w.delayNotice {
		return nil
	}
	reason := "the mail relay has not taken it yet"
	if em.LastError != nil {
		reason = *em.LastError
	}
	note := fmt.Sprintf("Reply %d is not delivered after %s (%s). It is still being tried, until %s.",
		em.MessageID, w.delayNotice, reason, em.QueuedAt.Add(w.giveUpAfter).UTC().Format(time.RFC3339))
	var marked bool
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		ticketID, direction, m, err := store.New(tx).MarkDelayed(ctx, em.MessageID, note)
		if err != nil || !m {
			return err
		}
		marked = true
		// The assignee hears of a reply to a customer that is late; mail to
		// agents that is late would only queue behind itself.
		if w.notifier != nil && direction == store.DirectionOutbound {
			return w.notifier.TellAssigneeTx(ctx, tx, ticketID, "Delayed: ", note)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if marked {
		w.logger.WarnContext(ctx, "email delayed", slog.Int64("message_id", em.MessageID), slog.String("reason", reason))
	}
	return nil
}

// giveUp fails a message that stayed undelivered for longer than the
// give-up age: whoever was not served is failed, and a person may retry it.
func (w *EmailWorker) giveUp(ctx context.Context, em *store.OutboundEmail, msg *store.Message, age time.Duration) error {
	last := "none"
	if em.LastError != nil {
		last = *em.LastError
	}
	err := fmt.Errorf("EmailExpired: not delivered within %s (queued %s ago); last error: %s",
		w.giveUpAfter, age.Round(time.Second), last)
	attempt := &store.AttemptResult{LastError: err.Error(), State: store.DeliveryFailed}
	for _, r := range em.Recipients {
		switch r.State {
		case store.RecipientSent, store.RecipientCaptured:
			attempt.State = store.DeliveryPartiallySent
		case store.RecipientPending, store.RecipientUncertain:
			attempt.Recipients = append(attempt.Recipients, store.RecipientResult{Address: r.Address, State: store.RecipientFailed,
				SMTPText: "given up after " + w.giveUpAfter.String()})
		}
	}
	if rerr := w.record(ctx, msg, attempt, nil); rerr != nil {
		return rerr
	}
	w.logger.ErrorContext(ctx, "email given up", slog.Int64("message_id", em.MessageID), slog.String("error", err.Error()))
	return river.JobCancel(err)
}

// render builds the mail from the stored message and its ticket, all
// read in one round trip; deliver keeps the bytes.
func (w *EmailWorker) render(ctx context.Context, from *mail.Address, em *store.OutboundEmail, msg *store.Message) (*mail.Outgoing, []byte, error) {
	if msg.EmailMessageID == nil {
		return nil, nil, w.unsendable(ctx, msg, errors.New("the message has no Message-ID"))
	}
	var (
		ticket   store.Ticket
		customer store.Customer
		thread   store.ThreadIDs
		agent    *store.Agent
		quoted   *store.Message
		files    []*store.AttachmentFile
		reads    store.Batch
	)
	reads.GetTicket(msg.TicketID, &ticket)
	reads.CustomerOfTicket(msg.TicketID, &customer)
	reads.ReplyThread(msg, &thread)
	if name, ok := strings.CutPrefix(msg.Author, "agent:"); ok {
		reads.GetAgent(name, &agent)
	}
	reads.QuotedMessage(msg, &quoted)
	reads.MessageAttachmentFiles(msg.ID, &files)
	if err := store.New(w.pool).Send(ctx, &reads); err != nil {
		return nil, nil, err
	}
	out := &mail.Outgoing{
		From: from, Subject: ticket.Subject, TicketID: ticket.ID, Date: msg.CreatedAt,
		MessageID: *msg.EmailMessageID, InReplyTo: thread.Parent, References: mail.References(thread.Earlier),
		ThreadRoot: thread.Root, ThreadStart: ticket.CreatedAt,
	}
	out.Body, out.HTML = replyBodies(msg, agent, quoted, &customer)
	for _, f := range files {
		out.Attachments = append(out.Attachments, &mail.File{Name: f.Filename, ContentType: f.ContentType, Content: f.Content})
	}
	// Answers come back to the ticket's plus-address (matched on the way
	// in), so a client that drops In-Reply-To still threads.
	if local, domain, ok := strings.Cut(from.Address, "@"); ok {
		out.ReplyTo = &mail.Address{Name: from.Name, Address: local + "+" + ticket.ID + "@" + domain}
	}
	for _, r := range em.Recipients {
		a, err := mail.ParseAddress(r.Address)
		if err != nil {
			return nil, nil, w.unsendable(ctx, msg, err)
		}
		a.Name = r.Name
		if r.Kind == "to" {
			a.Name = customer.Name
			out.To = append(out.To, a)
		} else {
			out.Cc = append(out.Cc, a)
		}
	}
	raw, err := out.Render()
	if err != nil {
		return nil, nil, w.unsendable(ctx, msg, err)
	}
	return out, raw, nil
}

// replyBodies writes a reply's text and HTML: the agent's text, the
// agent's signature, and the customer's message before it, quoted.
func replyBodies(msg *store.Message, agent *store.Agent, quoted *store.Message, customer *store.Customer) (text, html string) {
	var signature string
	if agent != nil {
		signature = agent.Signature
	}
	var quote *mail.Quote
	if quoted != nil {
		name := customer.Name
		if name == "" {
			name = customer.Email
		}
		quote = &mail.Quote{Date: quoted.CreatedAt, Name: name, Text: quoted.Body}
	}
	return mail.ReplyBodies(msg.Body, signature, quote)
}

// record stores an attempt and, when it ends the delivery, its
// message.sent or message.failed event, together: one round trip, as one
// implicit transaction. more, when set, writes in the same transaction.
func (w *EmailWorker) record(ctx context.Context, msg *store.Message, attempt *store.AttemptResult, more func(tx pgx.Tx) error) error {
	queue := func(b *store.Batch) {
		b.RecordAttempt(msg.ID, attempt)
		b.InsertWebhookEvents(desk.Delivered(msg, attempt.State, attempt.LastError))
	}
	if more == nil {
		var b store.Batch
		queue(&b)
		return store.New(w.pool).Send(ctx, &b)
	}
	first := store.BeginBatch()
	queue(first)
	return store.InTx(ctx, w.pool, first, more)
}

// unsendable fails a message whose stored data cannot make a valid mail.
func (w *EmailWorker) unsendable(ctx context.Context, msg *store.Message, cause error) error {
	err := fmt.Errorf("InvalidMessage: %w", cause)
	if rerr := w.record(ctx, msg, &store.AttemptResult{State: store.DeliveryFailed, LastError: err.Error()}, nil); rerr != nil {
		return rerr
	}
	return river.JobCancel(err)
}

// countDeliveries counts an attempt's results per recipient by outcome
// and the class of their enhanced status code.
func countDeliveries(results []store.RecipientResult) {
	for _, r := range results {
		outcome := r.State
		if outcome == store.RecipientPending {
			outcome = "retry"
		}
		class := "none"
		if c, _, ok := strings.Cut(r.SMTPEnhanced, "."); ok && (c == "2" || c == "4" || c == "5") {
			class = c
		} else if r.SMTPCode >= 200 && r.SMTPCode < 600 {
			class = strconv.Itoa(r.SMTPCode / 100)
		}
		metrics.SMTPDeliveries.WithLabelValues(outcome, class).Inc()
	}
}

// settle classifies the attempt per recipient, records it, and tells River
// what comes next: done, snooze (slow down: no attempt spent), retry with
// backoff (temporary or uncertain), or stop (permanent).
func (w *EmailWorker) settle(ctx context.Context, job *rivertype.JobRow, em *store.OutboundEmail, msg *store.Message, to []string, res *mail.Result, relayTroubled bool) error {
	outcome := mail.Classify(res, to)
	if outcome.LastError != "" {
		em.LastError = &outcome.LastError // what a delay notice reports
	}
	attempt := &store.AttemptResult{SMTPReply: res.Reply, LastError: outcome.LastError, RelayMessageID: mail.RelayMessageID(res.Reply)}
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
		case store.RecipientSent, store.RecipientCaptured:
			sent++
		case store.RecipientFailed, store.RecipientSuppressed:
			failed++
		case store.RecipientUncertain:
			uncertain++
		default:
			pending++
		}
	}
	// The attempt cap counts only what concerns the message; a relay that
	// is down or slow spends none of it.
	exhausted := job.Attempt >= job.MaxAttempts && !outcome.PausesRelay() && !outcome.Config && pending+uncertain > 0
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
	if w.relay.Captures() {
		// Nothing left the machine: say so wherever the state shows.
		for i, r := range attempt.Recipients {
			if r.State == store.RecipientSent {
				attempt.Recipients[i].State = store.RecipientCaptured
			}
		}
		if attempt.State == store.DeliverySent {
			attempt.State = store.DeliveryCaptured
		}
	}
	// A relay that answered is up again, whatever it said of this message.
	recovered := relayTroubled && !outcome.PausesRelay() && !outcome.Config
	var more func(tx pgx.Tx) error
	if recovered || slices.ContainsFunc(attempt.Recipients, refusedForGood) {
		more = func(tx pgx.Tx) error {
			if err := w.reportRefusals(ctx, tx, msg, attempt.Recipients); err != nil || !recovered {
				return err
			}
			return store.New(tx).RelayRecovered(ctx, w.relay.Name())
		}
	}
	if err := w.record(ctx, msg, attempt, more); err != nil {
		return err
	}
	countDeliveries(attempt.Recipients)

	log := w.logger.With(slog.Int64("job_id", job.ID), slog.Int64("message_id", em.MessageID),
		slog.Int("attempt", job.Attempt), slog.String("state", attempt.State))
	switch {
	case attempt.State == store.DeliverySent:
		log.InfoContext(ctx, "email sent", slog.String("reply", res.Reply))
		return nil
	case attempt.State == store.DeliveryCaptured:
		log.InfoContext(ctx, "email captured, not sent: no relay is configured")
		return nil
	case exhausted:
		return errors.New(outcome.LastError) // River makes it a dead letter
	case outcome.Config, pending+uncertain == 0:
		log.WarnContext(ctx, "email failed; a retry would get the same answer", slog.String("error", outcome.LastError))
		return river.JobCancel(errors.New(outcome.LastError))
	case outcome.PausesRelay():
		until, err := store.New(w.pool).RecordRelayFault(ctx, w.relay.Name(), outcome.LastError, w.backoff.Base, w.backoff.Cap)
		if err != nil {
			return err
		}
		if err := w.noticeDelay(ctx, em); err != nil {
			return err
		}
		log.InfoContext(ctx, "relay is down or asks to slow down; waiting without spending an attempt",
			slog.Time("until", until), slog.String("reply", outcome.LastError))
		wait := max(time.Until(until), time.Millisecond)
		return river.JobSnooze(wait + time.Duration(w.backoff.rand(int64(wait/10)+1)))
	default:
		if err := w.noticeDelay(ctx, em); err != nil {
			return err
		}
		if uncertain > 0 {
			log.WarnContext(ctx, "email outcome unknown; it will be sent again with the same Message-ID and bytes",
				slog.String("error", outcome.LastError))
		}
		return errors.New(outcome.LastError)
	}
}
