package desk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Step is what the queue does with a job after an attempt.
type Step int

// The steps an attempt may end in.
const (
	Done   Step = iota // nothing left to do
	Retry              // try again after the backoff, spending an attempt (the last one makes a dead letter)
	Snooze             // try again after Next.Wait, spending no attempt: slow down, or wait for a relay that is down
	Cancel             // stop: a retry would get the same answer
)

// Deliveries' writes made at once commit together (store.Combiner), as
// triage steps do: up to deliveryGroups transactions at the database,
// each of up to deliveriesAGroup writes, a write being the bytes kept and
// the attempt marked before a send, or the outcome recorded after it. Of
// one, two and four transactions at once, on two cores, one cost the
// least CPU an email (1,098–1,173 µs in five runs, against 1,200–1,268
// with two and 1,258–1,343 with four) at the same rate
// (docs/performance.md, stop 66). A mail of more than groupedMailBytes
// keeps its bytes alone: pgx copies a trip's parameters into one buffer,
// twice, so a group of 32 large mails would hold them all at once.
const (
	deliveryGroups   = 1
	deliveriesAGroup = 32
	groupedMailBytes = 256 << 10
)

// Next is the end of an attempt, for the worker to map onto its queue.
type Next struct {
	Step Step
	Wait time.Duration // for Snooze
	Err  error         // for Retry and Cancel: why
}

func done() Next                     { return Next{Step: Done} }
func retry(err error) Next           { return Next{Step: Retry, Err: err} }
func cancel(err error) Next          { return Next{Step: Cancel, Err: err} }
func snooze(wait time.Duration) Next { return Next{Step: Snooze, Wait: wait} }
func retryIf(err error, n Next) Next {
	if err != nil {
		return retry(err)
	}
	return n
}

// Attempt is one delivery attempt of a stored outbound message, as the
// queue hands it over.
type Attempt struct {
	JobID       int64 // for the log
	MessageID   int64
	Attempt     int // 1 for the first
	MaxAttempts int
	// TicketID, when set, is the ticket of a mail that may still need
	// rendering (a reply's first attempt): what renders it is read in the
	// same trip as the mail, and read for nothing if it was rendered.
	TicketID string
}

// Deliver makes one delivery attempt of a stored outbound message, a reply
// to a customer or a mail to an agent alike, with the Sender. The mail is
// rendered once and its bytes kept before the first send; every later
// attempt sends those bytes, with the same Message-ID, only to the
// recipients not yet served. What comes next is decided here: done; a
// snooze while the relay is down or asks to slow down (no attempt spent);
// a retry for what concerns the message (4xx, an unknown outcome), up to
// the attempts; a cancel for what would repeat. An email undelivered
// after DelayNotice shows as delayed with a note on its ticket, and one
// undelivered after GiveUpAfter fails.
func (d *Desk) Deliver(ctx context.Context, a Attempt) Next {
	dc := &d.config.Delivery
	if dc.Sender == nil {
		return retry(errors.New("this process has no mail sender"))
	}
	st := store.New(d.pool)
	var (
		em    store.OutboundEmail
		msg   store.Message
		reads store.Batch
	)
	reads.GetOutboundEmail(a.MessageID, &em)
	reads.GetMessage(a.MessageID, &msg)
	var (
		early       *replyParts
		markedEarly bool
	)
	if a.TicketID != "" {
		early = queueRenderReads(&reads, a.TicketID, a.MessageID)
	} else {
		// A mail whose bytes are kept, as it most often is here, has its
		// attempt marked with these reads when nothing else comes first.
		reads.MarkSendingIfDue(a.MessageID, dc.Sender.Name(), dc.GiveUpAfter, &markedEarly)
	}
	err := st.Send(ctx, &reads)
	if errors.Is(err, store.ErrNotFound) && early != nil && msg.ID == a.MessageID {
		// The mail is there, the ticket the job named is not (the message
		// moved since): render reads the message's own.
		early, err = nil, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return cancel(fmt.Errorf("MessageNotFound: outbound message %d does not exist", a.MessageID))
	} else if err != nil {
		return retry(err)
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
		return done() // sent to everyone already: a duplicate delivery of the job
	}

	// Bytes another attempt kept after this one read the mail were marked
	// without being read: this attempt keeps and marks as if unmarked (the
	// row keeps the first bytes).
	marked := markedEarly && em.Rendered != nil
	// Marked, the mail was young enough by the database's clock, which
	// this one does not overrule.
	if age := time.Since(em.QueuedAt); age > dc.GiveUpAfter && !marked {
		return d.giveUp(ctx, &em, &msg, age)
	}
	// An address that bounced for good is not tried again until it is
	// cleared or its time is up.
	to, stop := d.dropSuppressed(ctx, &em, &msg, to)
	if stop != nil {
		return *stop
	}
	from, err := mail.ParseAddress(em.FromAddress)
	if err != nil {
		return d.unsendable(ctx, &msg, fmt.Errorf("From: %w", err))
	}

	// The bytes are kept before the first send, and the attempt is marked
	// as starting in the same statement, unless the relay is troubled;
	// bytes kept already were marked with the reads, when nothing came
	// first.
	if !marked {
		var (
			keep func(b *store.Batch)
			kept store.Kept
			run  = d.deliveries.Run
		)
		if em.Rendered == nil {
			out, raw, stop := d.render(ctx, from, &em, &msg, early)
			if stop != nil {
				return *stop
			}
			// Another delivery's bytes, kept first, win: the row says which.
			keep = func(b *store.Batch) {
				b.KeepRenderedAndMarkSending(em.MessageID, out.InReplyTo, out.References, raw, resendsUncertain, dc.Sender.Name(), &kept)
			}
			if len(raw) > groupedMailBytes {
				run = d.runAlone
			}
		} else {
			keep = func(b *store.Batch) {
				b.MarkSendingUnlessRelayTroubled(em.MessageID, resendsUncertain, dc.Sender.Name(), &marked)
			}
		}
		err := run(ctx, func(tx *store.Tx) error {
			tx.Later(keep)
			return nil
		})
		if err != nil {
			return retry(err)
		}
		if em.Rendered == nil {
			if kept.Rendered == nil {
				return cancel(fmt.Errorf("MessageNotFound: outbound message %d was deleted before its send", a.MessageID))
			}
			em.Rendered, em.InReplyTo, em.References, marked = kept.Rendered, kept.InReplyTo, kept.References, kept.Marked
		}
	}

	// A relay that is down, or asked anyone to slow down, is left alone
	// until its pause ends; then one job probes it while the others wait.
	var gate store.RelayGate
	if !marked {
		if gate, err = st.EnterRelay(ctx, dc.Sender.Name(), dc.Lease); err != nil {
			return retry(err)
		}
	}
	if gate.Wait > 0 || gate.Probing {
		wait := gate.Wait
		if gate.Probing {
			// Back soon after the probe succeeds, or about when the next pause would end.
			wait = min(max(wait, dc.Backoff.Base), dc.Backoff.Bound(gate.Faults+1))
		}
		return retryIf(d.noticeDelay(ctx, &em), snooze(dc.Backoff.Jitter(wait)))
	}

	if !marked {
		if err := st.MarkSending(ctx, em.MessageID, resendsUncertain); err != nil {
			return retry(err)
		}
	}
	res := dc.Sender.Send(ctx, mail.Envelope{From: d.envelopeSender(em.MessageID, from), To: to}, em.Rendered)
	if ctx.Err() != nil && res.Err != nil && !res.BodySent {
		return retry(ctx.Err()) // shutting down: the queue puts the job back without spending the attempt
	}
	return d.settle(ctx, a, &em, &msg, to, res, gate.Troubled)
}

// envelopeSender is where reports on a message go (RFC 5321 §4.5.5): its
// own signed bounce address (VERP), so that a report counts only when it
// comes back there; without a secret to sign it, the From address.
func (d *Desk) envelopeSender(messageID int64, from *mail.Address) string {
	switch {
	case d.config.ReplyAddresses == nil:
		return from.Address
	case d.ours(from.Address):
		return d.config.ReplyAddresses.BounceAddress(messageID)
	default:
		// A support address read as a mailbox: the report comes back to
		// the mailbox, at its plus form.
		return d.config.ReplyAddresses.BounceAddressAt(from.Address, messageID)
	}
}

// dropSuppressed marks the recipients on the suppression list suppressed
// and returns the others. With nobody left, the message fails at once.
func (d *Desk) dropSuppressed(ctx context.Context, em *store.OutboundEmail, msg *store.Message, to []string) ([]string, *Next) {
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
		if err := store.New(d.pool).RecordAttempt(ctx, em.MessageID, attempt); err != nil {
			n := retry(err)
			return nil, &n
		}
		return left, nil
	}
	why := fmt.Sprintf("Suppressed: %s bounced for good before; clear it with DELETE /v1/suppressions/ADDRESS to send again", strings.Join(dropped, ", "))
	attempt.State, attempt.LastError = store.DeliverySuppressed, why
	for _, r := range em.Recipients {
		if r.State == store.RecipientSent || r.State == store.RecipientCaptured {
			attempt.State = store.DeliveryPartiallySent
		}
	}
	n := cancel(errors.New(why))
	if err := d.record(ctx, msg, attempt, nil); err != nil {
		n = retry(err)
	} else {
		d.log.WarnContext(ctx, "email not sent: suppressed", "message_id", em.MessageID, "addresses", dropped)
	}
	return nil, &n
}

// reportRefusalsTx tells of every recipient the server refused for good
// (a 5xx at RCPT or after the body), as a bounce (bouncedTx).
func (d *Desk) reportRefusalsTx(ctx context.Context, tx *store.Tx, msg *store.Message, results []store.RecipientResult) error {
	if !bounces(msg.Direction) {
		return nil
	}
	for _, r := range results {
		if !refusedForGood(r) {
			continue
		}
		status := strings.TrimSpace(r.SMTPEnhanced + " " + strconv.Itoa(r.SMTPCode) + " " + r.SMTPText)
		if err := d.bouncedTx(ctx, tx, &Bounce{TicketID: msg.TicketID, Address: r.Address, Status: status, Code: r.SMTPCode, Direction: msg.Direction}); err != nil {
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
// delayed, with a system note on its ticket for the agents, once; the
// assignee hears of a late reply to a customer by mail (late mail to
// agents would only queue behind itself).
func (d *Desk) noticeDelay(ctx context.Context, em *store.OutboundEmail) error {
	dc := &d.config.Delivery
	if em.DelayedAt != nil || time.Since(em.QueuedAt) < dc.DelayNotice {
		return nil
	}
	reason := "the mail relay has not taken it yet"
	if em.LastError != nil {
		reason = *em.LastError
	}
	note := fmt.Sprintf("Reply %d is not delivered after %s (%s). It is still being tried, until %s.",
		em.MessageID, dc.DelayNotice, reason, em.QueuedAt.Add(dc.GiveUpAfter).UTC().Format(time.RFC3339))
	var marked bool
	err := store.Run(ctx, d.pool, func(tx *store.Tx) error {
		st := tx.Store()
		ticketID, direction, m, err := st.MarkDelayed(ctx, em.MessageID, note)
		if err != nil || !m {
			return err
		}
		marked = true
		if direction != vocab.DirectionOutbound {
			return nil
		}
		t, err := st.GetTicket(ctx, ticketID)
		if err != nil {
			return err
		}
		return d.tellAssigneeTx(ctx, tx, t, "Delayed: ", note)
	})
	if err != nil {
		return err
	}
	if marked {
		d.log.WarnContext(ctx, "email delayed", "message_id", em.MessageID, "reason", reason)
	}
	return nil
}

// giveUp fails a message that stayed undelivered for longer than the
// give-up age: whoever was not served is failed, and a person may retry it.
func (d *Desk) giveUp(ctx context.Context, em *store.OutboundEmail, msg *store.Message, age time.Duration) Next {
	last := "none"
	if em.LastError != nil {
		last = *em.LastError
	}
	giveUpAfter := d.config.Delivery.GiveUpAfter
	err := fmt.Errorf("EmailExpired: not delivered within %s (queued %s ago); last error: %s", giveUpAfter, age.Round(time.Second), last)
	attempt := &store.AttemptResult{LastError: err.Error(), State: store.DeliveryFailed}
	for _, r := range em.Recipients {
		switch r.State {
		case store.RecipientSent, store.RecipientCaptured:
			attempt.State = store.DeliveryPartiallySent
		case store.RecipientPending, store.RecipientUncertain:
			attempt.Recipients = append(attempt.Recipients, store.RecipientResult{Address: r.Address, State: store.RecipientFailed,
				SMTPText: "given up after " + giveUpAfter.String()})
		}
	}
	if rerr := d.record(ctx, msg, attempt, nil); rerr != nil {
		return retry(rerr)
	}
	d.log.ErrorContext(ctx, "email given up", "message_id", em.MessageID, "error", err.Error())
	return cancel(err)
}

// render builds the mail from the stored message and its ticket: an
// agent's reply (acknowledgements and mail to agents are rendered when
// they are written). What it reads came with the mail when the job named
// the message's ticket (early), else it is read now, in one round trip. A
// stored message that cannot make a valid mail stops the delivery.
func (d *Desk) render(ctx context.Context, from *mail.Address, em *store.OutboundEmail, msg *store.Message, early *replyParts) (*mail.Outgoing, []byte, *Next) {
	stop := func(err error) (*mail.Outgoing, []byte, *Next) {
		n := d.unsendable(ctx, msg, err)
		return nil, nil, &n
	}
	if msg.EmailMessageID == nil {
		return stop(errors.New("the message has no Message-ID"))
	}
	p := early
	if p == nil || p.ticket.ID != msg.TicketID {
		var reads store.Batch
		p = queueRenderReads(&reads, msg.TicketID, msg.ID)
		if err := store.New(d.pool).Send(ctx, &reads); err != nil {
			n := retry(err)
			return nil, nil, &n
		}
	}
	p.from, p.msg, p.to = from, msg, em.Recipients
	out, raw, err := composeReply(p)
	if err != nil {
		return stop(err)
	}
	return out, raw, nil
}

// queueRenderReads queues the reads that render reply messageID of
// ticketID: its ticket, customer, thread, agent, the message it quotes,
// and its files unless its bytes are kept already (store.Batch.FilesToRender).
func queueRenderReads(reads *store.Batch, ticketID string, messageID int64) *replyParts {
	p := &replyParts{ticket: &store.Ticket{}, customer: &store.Customer{}, thread: &store.ThreadIDs{}}
	reads.GetTicket(ticketID, p.ticket)
	reads.CustomerOfTicket(ticketID, p.customer)
	reads.ReplyThread(ticketID, messageID, p.thread)
	reads.AuthorAgent(messageID, &p.agent)
	reads.QuotedMessage(ticketID, messageID, &p.quoted)
	reads.FilesToRender(messageID, &p.files)
	return p
}

// record stores an attempt and, when it ends the delivery, its
// message.sent or message.failed event, together: one round trip, as one
// implicit transaction, or in a group with other deliveries' writes
// (d.deliveries). more, when set, writes in the same transaction, alone.
func (d *Desk) record(ctx context.Context, msg *store.Message, attempt *store.AttemptResult, more func(tx *store.Tx) error) error {
	queue := func(b *store.Batch) {
		b.RecordAttempt(msg.ID, attempt)
		b.InsertWebhookEvents(delivered(msg, attempt.State, attempt.LastError))
	}
	if more == nil {
		return d.deliveries.Run(ctx, func(tx *store.Tx) error {
			tx.Later(queue)
			return nil
		})
	}
	return store.Run(ctx, d.pool, func(tx *store.Tx) error {
		tx.Later(queue)
		return more(tx)
	})
}

// unsendable fails a message whose stored data cannot make a valid mail.
func (d *Desk) unsendable(ctx context.Context, msg *store.Message, cause error) Next {
	err := fmt.Errorf("InvalidMessage: %w", cause)
	if rerr := d.record(ctx, msg, &store.AttemptResult{State: store.DeliveryFailed, LastError: err.Error()}, nil); rerr != nil {
		return retry(rerr)
	}
	return cancel(err)
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

// settle classifies the attempt per recipient, records it, and decides
// what comes next: done, snooze (slow down: no attempt spent), retry with
// backoff (temporary or uncertain), or stop (permanent).
func (d *Desk) settle(ctx context.Context, a Attempt, em *store.OutboundEmail, msg *store.Message, to []string, res *mail.Result, relayTroubled bool) Next {
	dc := &d.config.Delivery
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
	exhausted := a.Attempt >= a.MaxAttempts && !outcome.PausesRelay() && !outcome.Config && pending+uncertain > 0
	if exhausted {
		// The queue discards the job after this: whoever is left is not served.
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
	if dc.Sender.Captures() {
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
	var more func(tx *store.Tx) error
	if recovered || slices.ContainsFunc(attempt.Recipients, refusedForGood) {
		more = func(tx *store.Tx) error {
			if err := d.reportRefusalsTx(ctx, tx, msg, attempt.Recipients); err != nil || !recovered {
				return err
			}
			return tx.Store().RelayRecovered(ctx, dc.Sender.Name())
		}
	}
	if err := d.record(ctx, msg, attempt, more); err != nil {
		return retry(err)
	}
	countDeliveries(attempt.Recipients)

	log := d.log.With("job_id", a.JobID, "message_id", em.MessageID, "attempt", a.Attempt, "state", attempt.State)
	switch {
	case attempt.State == store.DeliverySent:
		log.InfoContext(ctx, "email sent", "reply", res.Reply)
		return done()
	case attempt.State == store.DeliveryCaptured:
		log.InfoContext(ctx, "email captured, not sent: no relay is configured")
		return done()
	case exhausted:
		return retry(errors.New(outcome.LastError)) // the last attempt: a dead letter
	case outcome.Config, pending+uncertain == 0:
		log.WarnContext(ctx, "email failed; a retry would get the same answer", "error", outcome.LastError)
		return cancel(errors.New(outcome.LastError))
	case outcome.PausesRelay():
		until, err := store.New(d.pool).RecordRelayFault(ctx, dc.Sender.Name(), outcome.LastError, dc.Backoff.Base, dc.Backoff.Cap)
		if err != nil {
			return retry(err)
		}
		if err := d.noticeDelay(ctx, em); err != nil {
			return retry(err)
		}
		log.InfoContext(ctx, "relay is down or asks to slow down; waiting without spending an attempt",
			"until", until, "reply", outcome.LastError)
		return snooze(dc.Backoff.Jitter(time.Until(until)))
	default:
		if err := d.noticeDelay(ctx, em); err != nil {
			return retry(err)
		}
		if uncertain > 0 {
			log.WarnContext(ctx, "email outcome unknown; it will be sent again with the same Message-ID and bytes", "error", outcome.LastError)
		}
		return retry(errors.New(outcome.LastError))
	}
}
