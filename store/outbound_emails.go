package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Delivery states of an outbound message.
const (
	DeliveryQueued        = "queued"
	DeliverySending       = "sending"
	DeliverySent          = "sent"
	DeliveryPartiallySent = "partially_sent"
	DeliveryFailed        = "failed"
	DeliveryUncertain     = "uncertain"
	// DeliveryDelayed: still not delivered after the delay notice; it is
	// still being tried.
	DeliveryDelayed = "delayed"
	// DeliveryCaptured: no relay is configured; the mail was kept, not sent.
	DeliveryCaptured = "captured"
	// DeliverySuppressed: every recipient is on the suppression list; nothing was tried.
	DeliverySuppressed = "suppressed"
)

// Recipient states.
const (
	RecipientPending    = "pending"
	RecipientSent       = "sent"
	RecipientFailed     = "failed"
	RecipientUncertain  = "uncertain"  // the body went out and no reply came back
	RecipientCaptured   = "captured"   // kept, not sent: no relay is configured
	RecipientSuppressed = "suppressed" // bounced for good before: not tried
)

// OutboundEmail is the delivery of one outbound message.
type OutboundEmail struct {
	MessageID        int64
	JobID            *int64
	FromAddress      string
	State            string
	InReplyTo        *string
	References       []string
	Rendered         []byte // nil until the first attempt renders it
	Attempts         int
	UncertainResends int
	LastError        *string
	SMTPReply        *string
	SentAt           *time.Time
	UpdatedAt        time.Time
	QueuedAt         time.Time  // when the reply was written; its age decides when it is given up
	DelayedAt        *time.Time // when it was first shown as delayed
	Recipients       []*Recipient
}

// Recipient is one address of an outbound message and what happened to it.
type Recipient struct {
	Address      string     `json:"address"`
	Name         string     `json:"name,omitempty"` // the display name, for cc
	Kind         string     `json:"kind"`           // to or cc
	State        string     `json:"state"`
	SMTPCode     *int       `json:"smtp_code"`
	SMTPEnhanced *string    `json:"smtp_enhanced"`
	SMTPText     *string    `json:"smtp_text"`
	SentAt       *time.Time `json:"sent_at"`
	// Suppressed: the address is on the suppression list now (read with
	// the recipients, so the delivery needs no query of its own for it).
	Suppressed bool `json:"-"`
}

// InsertOutboundEmailParams are a new outbound delivery and its recipients.
type InsertOutboundEmailParams struct {
	MessageID   int64
	FromAddress string
	Recipients  []Recipient // Address and Kind
	JobID       *int64      // the job that delivers it, when queued first; else SetOutboundJob
	// Rendered, when set, is the mail's bytes, kept with the row so that
	// no later statement writes it again; InReplyTo and References are its
	// thread headers. Without them the first attempt renders the mail.
	Rendered   []byte
	InReplyTo  string
	References []string
}

// InsertOutboundEmail records a delivery to be made, with its
// recipients, in one round trip.
func (s *Store) InsertOutboundEmail(ctx context.Context, p *InsertOutboundEmailParams) error {
	var b Batch
	b.InsertOutboundEmail(p)
	if err := s.Send(ctx, &b); err != nil {
		return fmt.Errorf("insert outbound email %d: %w", p.MessageID, err)
	}
	return nil
}

// InsertOutboundEmail queues InsertOutboundEmail.
func (b *Batch) InsertOutboundEmail(p *InsertOutboundEmailParams) {
	if p.Rendered != nil {
		b.b.Queue(insertRenderedSQL, p.MessageID, p.FromAddress, p.JobID, p.Rendered, p.InReplyTo, p.References)
	} else {
		b.b.Queue(insertOutboundSQL, p.MessageID, p.FromAddress, p.JobID)
	}
	for _, r := range p.Recipients {
		b.b.Queue(insertRecipientSQL, p.MessageID, r.Address, r.Kind, r.Name)
	}
}

const (
	insertOutboundSQL = `INSERT INTO outbound_emails (message_id, from_address, job_id) VALUES ($1, $2, $3)`
	insertRenderedSQL = `INSERT INTO outbound_emails (message_id, from_address, job_id, rendered, in_reply_to, reference_ids, rendered_at)
		VALUES ($1, $2, $3, $4, $5, $6, now())`
	insertRecipientSQL = `INSERT INTO outbound_recipients (message_id, address, kind, display_name) VALUES ($1, $2, $3, $4)`
)

// SetOutboundJob records which job delivers the message.
func (s *Store) SetOutboundJob(ctx context.Context, messageID, jobID int64) error {
	_, err := s.db.Exec(ctx, `UPDATE outbound_emails SET job_id = $2 WHERE message_id = $1`, messageID, jobID)
	if err != nil {
		return fmt.Errorf("set job of outbound email %d: %w", messageID, err)
	}
	return nil
}

const outboundColumns = `message_id, job_id, from_address, state, in_reply_to, reference_ids, rendered, attempts,
	uncertain_resends, last_error, smtp_reply, sent_at, updated_at, queued_at, delayed_at`

func scanOutbound(row pgx.Row) (*OutboundEmail, error) {
	var e OutboundEmail
	err := row.Scan(&e.MessageID, &e.JobID, &e.FromAddress, &e.State, &e.InReplyTo, &e.References, &e.Rendered,
		&e.Attempts, &e.UncertainResends, &e.LastError, &e.SMTPReply, &e.SentAt, &e.UpdatedAt, &e.QueuedAt, &e.DelayedAt)
	if err != nil {
		return nil, interpretError(err)
	}
	return &e, nil
}

// GetOutboundEmail returns a delivery with its recipients, or ErrNotFound.
func (s *Store) GetOutboundEmail(ctx context.Context, messageID int64) (*OutboundEmail, error) {
	var b Batch
	e := &OutboundEmail{}
	b.GetOutboundEmail(messageID, e)
	if err := s.Send(ctx, &b); err != nil {
		return nil, err
	}
	return e, nil
}

// GetOutboundEmail queues GetOutboundEmail; into gets the delivery.
func (b *Batch) GetOutboundEmail(messageID int64, into *OutboundEmail) {
	queueRow(b, "get outbound email", messageID, scanOutbound, into, getOutboundSQL, messageID)
	b.b.Queue(messageRecipientsSQL, messageID).Query(func(rows pgx.Rows) error {
		byMessage, err := scanRecipients(rows)
		into.Recipients = byMessage[messageID]
		return err
	})
}

// GetOutboundEmailOptional queues GetOutboundEmail for a delivery that
// may not be there; into gets nil then.
func (b *Batch) GetOutboundEmailOptional(messageID int64, into **OutboundEmail) {
	queueOptionalRow(b, "get outbound email", messageID, scanOutbound, into, getOutboundSQL, messageID)
	b.b.Queue(messageRecipientsSQL, messageID).Query(func(rows pgx.Rows) error {
		byMessage, err := scanRecipients(rows)
		if *into != nil {
			(*into).Recipients = byMessage[messageID]
		}
		return err
	})
}

const getOutboundSQL = `SELECT ` + outboundColumns + ` FROM outbound_emails WHERE message_id = $1`

// ListOutboundEmails returns the deliveries of a ticket's outbound
// messages, by message id.
func (s *Store) ListOutboundEmails(ctx context.Context, ticketID string) (map[int64]*OutboundEmail, error) {
	out := map[int64]*OutboundEmail{}
	if err := exec(ctx, s, func(b *Batch) { b.ListOutboundEmails(ticketID, out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// ListOutboundEmails queues ListOutboundEmails: the deliveries, then their
// recipients; into gets the deliveries by message id.
func (b *Batch) ListOutboundEmails(ticketID string, into map[int64]*OutboundEmail) {
	queueRows(b, "list outbound emails of "+ticketID, scanOutbound, func(l []*OutboundEmail) {
		for _, e := range l {
			into[e.MessageID] = e
		}
	}, `SELECT `+outboundColumns+` FROM outbound_emails WHERE message_id IN (SELECT id FROM messages WHERE ticket_id = $1)`, ticketID)
	b.b.Queue(ticketRecipientsSQL, ticketID).Query(func(rows pgx.Rows) error {
		byMessage, err := scanRecipients(rows)
		if err != nil {
			return fmt.Errorf("list outbound emails of %s: %w", ticketID, err)
		}
		for id, rs := range byMessage {
			if e := into[id]; e != nil {
				e.Recipients = rs
			}
		}
		return nil
	})
}

// ticketRecipientsSQL reads the recipients of a ticket's messages, in the
// trip that reads their deliveries; messageRecipientsSQL those of one,
// which every delivery reads. Each takes a plain id, so that PostgreSQL
// keeps one plan per connection: an array of message ids (as the first
// read once took) was planned anew for every delivery, at four times what
// running it cost, its plan for an array of unknown length never looking
// cheaper than one for the array given.
const (
	ticketRecipientsSQL = recipientsSelect + ` WHERE message_id IN (SELECT id FROM messages WHERE ticket_id = $1)
		ORDER BY message_id, kind DESC, address`
	messageRecipientsSQL = recipientsSelect + ` WHERE message_id = $1 ORDER BY kind DESC, address`
	recipientsSelect     = `SELECT message_id, address, display_name, kind, state, smtp_code, smtp_enhanced, smtp_text, sent_at,
		` + recipientSuppressed + `
	FROM outbound_recipients r`
	// recipientSuppressed is whether recipient r's address is on the
	// suppression list: bounced for good, not yet cleared or expired.
	recipientSuppressed = `EXISTS (SELECT 1 FROM suppressions p WHERE p.address = lower(r.address) AND p.expires_at > now())`
)

func scanRecipients(rows pgx.Rows) (map[int64][]*Recipient, error) {
	defer rows.Close()
	out := map[int64][]*Recipient{}
	for rows.Next() {
		var id int64
		var r Recipient
		if err := rows.Scan(&id, &r.Address, &r.Name, &r.Kind, &r.State, &r.SMTPCode, &r.SMTPEnhanced, &r.SMTPText, &r.SentAt, &r.Suppressed); err != nil {
			return nil, fmt.Errorf("list recipients: %w", err)
		}
		out[id] = append(out[id], &r)
	}
	return out, rows.Err()
}

// MarkSending records that an attempt starts, and counts it.
func (s *Store) MarkSending(ctx context.Context, messageID int64, resendsUncertain bool) error {
	if err := exec(ctx, s, func(b *Batch) { b.MarkSending(messageID, resendsUncertain) }); err != nil {
		return fmt.Errorf("mark email %d sending: %w", messageID, err)
	}
	return nil
}

// MarkSending queues MarkSending.
func (b *Batch) MarkSending(messageID int64, resendsUncertain bool) {
	b.b.Queue(markSendingSQL, messageID, resendsUncertain, DeliverySending)
}

// MarkSendingUnlessRelayTroubled queues MarkSending for a relay that
// never failed or whose trouble is over (what EnterRelay lets through
// without a lock); marked is false, and nothing is written, when the
// relay is troubled: the job then asks EnterRelay, and marks after.
func (b *Batch) MarkSendingUnlessRelayTroubled(messageID int64, resendsUncertain bool, relay string, marked *bool) {
	q := b.b.Queue(markSendingSQL+` AND `+relayFree("$4"), messageID, resendsUncertain, DeliverySending, relay)
	q.Exec(func(tag pgconn.CommandTag) error {
		*marked = tag.RowsAffected() == 1
		return nil
	})
	b.readOnly(q) // it may go with the commit: its answer checks nothing
}

// MarkSendingIfDue queues, behind the reads of a delivery's first trip,
// MarkSendingUnlessRelayTroubled for a mail that needs nothing else
// before its send: its bytes kept, a recipient to send to and none of
// those on the suppression list, queued no more than giveUpAfter ago, and
// a relay that is not troubled. The attempt's mark then commits with its
// reads, and a mail written rendered (an agent's notification, an
// acknowledgement) or being retried costs its delivery one transaction
// before the send, not two; marked says whether it marked. A mail not
// marked is left as it was, for the attempt to decide as before.
func (b *Batch) MarkSendingIfDue(messageID int64, relay string, giveUpAfter time.Duration, marked *bool) {
	b.b.Queue(markSendingIfDueSQL, messageID, DeliverySending, relay, giveUpAfter, RecipientPending, RecipientUncertain).
		Exec(func(tag pgconn.CommandTag) error {
			*marked = tag.RowsAffected() == 1
			return nil
		})
}

// The recipients' conditions are those the attempt reads: to send to, a
// recipient pending or uncertain; suppressed, one on the list
// (recipientsSelect).
var markSendingIfDueSQL = `WITH due AS (
		SELECT bool_or(r.state = $6) AS uncertain,
			bool_or(` + recipientSuppressed + `) AS suppressed
		FROM outbound_recipients r WHERE r.message_id = $1 AND r.state IN ($5, $6)
		HAVING count(*) > 0
	)
	UPDATE outbound_emails e SET state = $2, attempts = e.attempts + 1,
		uncertain_resends = e.uncertain_resends + CASE WHEN due.uncertain THEN 1 ELSE 0 END, updated_at = now()
	FROM due
	WHERE e.message_id = $1 AND e.rendered IS NOT NULL AND NOT due.suppressed AND e.queued_at >= now() - $4::interval
		AND ` + relayFree("$3")

// Kept is what a delivery's row holds after KeepRenderedAndMarkSending.
type Kept struct {
	Rendered   []byte
	InReplyTo  *string
	References []string
	Marked     bool // the attempt was marked as starting: the relay is not troubled
}

// KeepRenderedAndMarkSending keeps the mail's bytes and thread headers
// and is MarkSendingUnlessRelayTroubled, in one statement, for the first
// attempt that rendered the mail: one new version of the row instead of two. The
// bytes are kept unless an earlier attempt kept some; into gets the bytes
// and thread headers the row holds afterwards, the ones to send whichever
// attempt kept them, or nothing (Rendered nil) when the mail is gone.
//
// Its answer checks nothing (a mail gone wrote nothing), so it may go
// with the commit, and a unit of work of it alone is one implicit
// transaction.
func (b *Batch) KeepRenderedAndMarkSending(messageID int64, inReplyTo string, references []string, rendered []byte,
	resendsUncertain bool, relay string, into *Kept) {
	q := b.b.Queue(keepAndMarkSQL, messageID, rendered, inReplyTo, references, resendsUncertain, DeliverySending, relay)
	q.QueryRow(func(row pgx.Row) error {
		err := row.Scan(&into.Rendered, &into.InReplyTo, &into.References, &into.Marked)
		if errors.Is(err, pgx.ErrNoRows) {
			*into = Kept{}
			return nil
		}
		if err != nil {
			return fmt.Errorf("keep email %d: %w", messageID, interpretError(err))
		}
		return nil
	})
	b.readOnly(q)
}

// SET reads the row as it was; RETURNING, as it is now.
var keepAndMarkSQL = `WITH relay AS (
		SELECT ` + relayFree("$7") + ` AS free
	)
	UPDATE outbound_emails e SET
		rendered = coalesce(e.rendered, $2),
		in_reply_to = CASE WHEN e.rendered IS NULL THEN $3 ELSE e.in_reply_to END,
		reference_ids = CASE WHEN e.rendered IS NULL THEN $4 ELSE e.reference_ids END,
		rendered_at = coalesce(e.rendered_at, now()),
		state = CASE WHEN relay.free THEN $6 ELSE e.state END,
		attempts = e.attempts + CASE WHEN relay.free THEN 1 ELSE 0 END,
		uncertain_resends = e.uncertain_resends + CASE WHEN relay.free AND $5 THEN 1 ELSE 0 END,
		updated_at = now()
	FROM relay WHERE e.message_id = $1
	RETURNING e.rendered, e.in_reply_to, e.reference_ids, relay.free`

const markSendingSQL = `UPDATE outbound_emails
	SET state = $3, attempts = attempts + 1,
	    uncertain_resends = uncertain_resends + CASE WHEN $2 THEN 1 ELSE 0 END, updated_at = now()
	WHERE message_id = $1`

// RecipientResult is what an attempt did to one recipient.
type RecipientResult struct {
	Address      string
	State        string
	SMTPCode     int    // 0: no reply
	SMTPEnhanced string // "5.1.1", or empty
	SMTPText     string
}

// AttemptResult is what an attempt did to the whole message.
type AttemptResult struct {
	State     string
	LastError string // empty keeps the previous one
	SMTPReply string // the final reply when the server took the message
	// RelayMessageID is the relay's own id for the message, when its reply named one.
	RelayMessageID string
	Recipients     []RecipientResult
}

// RecordAttempt stores an attempt's outcome for the message and its
// recipients, in one statement.
func (s *Store) RecordAttempt(ctx context.Context, messageID int64, r *AttemptResult) error {
	if err := exec(ctx, s, func(b *Batch) { b.RecordAttempt(messageID, r) }); err != nil {
		return fmt.Errorf("record attempt of %d: %w", messageID, err)
	}
	return nil
}

// RecordAttempt queues RecordAttempt.
func (b *Batch) RecordAttempt(messageID int64, r *AttemptResult) {
	b.b.Queue(recordAttemptSQL, recordAttemptArgs(messageID, r)...)
}

// A delayed message stays delayed while it is still being tried.
//
// Each recipient's results are looked up by its place in the arrays
// (recipientAt), not joined from unnest: a plan kept for the statement
// cannot know how long the arrays are, costs an unnest at a hundred rows,
// and looked so much dearer than one planned for the array given that
// PostgreSQL planned every attempt anew (300 µs of planning to 820 of
// running it, in the email benchmark) until the tables were analysed.
const recordAttemptSQL = `WITH recipients AS (
		UPDATE outbound_recipients o
		SET state = ($7::text[])[` + recipientAt + `], smtp_code = NULLIF(($8::int[])[` + recipientAt + `], 0),
		    smtp_enhanced = NULLIF(($9::text[])[` + recipientAt + `], ''), smtp_text = NULLIF(($10::text[])[` + recipientAt + `], ''),
		    sent_at = CASE WHEN ($7::text[])[` + recipientAt + `] IN ('sent', 'captured') THEN now() ELSE o.sent_at END,
		    updated_at = now()
		WHERE o.message_id = $1 AND ` + recipientAt + ` IS NOT NULL
	)
	UPDATE outbound_emails
	SET state = CASE WHEN delayed_at IS NOT NULL AND $2 IN ('queued', 'sending', 'uncertain') THEN 'delayed' ELSE $2 END,
	    last_error = COALESCE(NULLIF($3, ''), last_error), smtp_reply = COALESCE(NULLIF($4, ''), smtp_reply),
	    relay_message_id = COALESCE(NULLIF($5, ''), relay_message_id),
	    sent_at = CASE WHEN $2 IN ('sent', 'partially_sent', 'captured') AND sent_at IS NULL THEN now() ELSE sent_at END,
	    updated_at = now()
	WHERE message_id = $1`

// recipientAt is the place of the row's recipient in RecordAttempt's arrays.
const recipientAt = `array_position($6::text[], o.address)`

// recordAttemptArgs lists each recipient once, its last result winning.
func recordAttemptArgs(messageID int64, r *AttemptResult) []any {
	var addresses, states, enhanced, texts []string
	var codes []int32
	at := map[string]int{}
	for _, rr := range r.Recipients {
		if i, ok := at[rr.Address]; ok {
			states[i], codes[i], enhanced[i], texts[i] = rr.State, int32(rr.SMTPCode), rr.SMTPEnhanced, rr.SMTPText
			continue
		}
		at[rr.Address] = len(addresses)
		addresses, states, codes = append(addresses, rr.Address), append(states, rr.State), append(codes, int32(rr.SMTPCode))
		enhanced, texts = append(enhanced, rr.SMTPEnhanced), append(texts, rr.SMTPText)
	}
	return []any{messageID, r.State, r.LastError, r.SMTPReply, r.RelayMessageID, addresses, states, codes, enhanced, texts}
}

// MarkDelayed shows the message as delayed and, for a reply to the
// customer, adds a system note to its ticket saying why, once: marked is false when it was marked before or is
// no longer waiting. Run it in a transaction, so the note and the state
// come together.
func (s *Store) MarkDelayed(ctx context.Context, messageID int64, note string) (ticketID string, direction vocab.Direction, marked bool, err error) {
	err = s.db.QueryRow(ctx, `UPDATE outbound_emails e SET state = 'delayed', delayed_at = now(), updated_at = now()
		FROM messages m
		WHERE e.message_id = $1 AND m.id = e.message_id AND e.delayed_at IS NULL
		  AND e.state IN ('queued', 'sending', 'uncertain')
		RETURNING m.ticket_id, m.direction`, messageID).Scan(&ticketID, &direction)
	if err = interpretError(err); errors.Is(err, ErrNotFound) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("mark email %d delayed: %w", messageID, err)
	}
	// The note is for replies to the customer; late mail to agents only shows its state.
	if direction == vocab.DirectionOutbound {
		if _, err := s.InsertMessage(ctx, &InsertMessageParams{TicketID: ticketID, Direction: vocab.DirectionNote, Author: vocab.System, Body: note}); err != nil {
			return "", "", false, err
		}
	}
	return ticketID, direction, true, nil
}

// ResetFailedRecipients makes failed recipients pending again and the
// message queued, for a retry that a person asked for.
func (s *Store) ResetFailedRecipients(ctx context.Context, messageID int64) error {
	_, err := s.db.Exec(ctx, `UPDATE outbound_recipients SET state = 'pending', updated_at = now()
		WHERE message_id = $1 AND state = 'failed'`, messageID)
	if err == nil {
		// Its age starts again, or a message given up for its age would be
		// given up again at once.
		_, err = s.db.Exec(ctx, `UPDATE outbound_emails SET state = 'queued', queued_at = now(), delayed_at = NULL, updated_at = now()
			WHERE message_id = $1 AND state IN ('failed', 'partially_sent')`, messageID)
	}
	if err != nil {
		return fmt.Errorf("reset failed recipients of %d: %w", messageID, err)
	}
	return nil
}

// OutboundMessageOfJob returns the message that an email job delivers, or ErrNotFound.
func (s *Store) OutboundMessageOfJob(ctx context.Context, jobID int64) (int64, error) {
	var id int64
	if err := s.db.QueryRow(ctx, `SELECT message_id FROM outbound_emails WHERE job_id = $1`, jobID).Scan(&id); err != nil {
		return 0, fmt.Errorf("outbound message of job %d: %w", jobID, interpretError(err))
	}
	return id, nil
}

// IsRecipientOf says whether outbound message messageID went to address
// (compared without regard to case, as RecordBounceOf does).
func (s *Store) IsRecipientOf(ctx context.Context, messageID int64, address string) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbound_recipients
		WHERE message_id = $1 AND lower(address) = lower($2))`, messageID, address).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("is %s a recipient of %d: %w", address, messageID, err)
	}
	return ok, nil
}

// RecordBounceOf marks the recipient of outbound message messageID as
// failed, as a delivery report to its bounce address said; found is false
// when the message went to no such address.
func (s *Store) RecordBounceOf(ctx context.Context, messageID int64, address, status string) (found bool, err error) {
	tag, err := s.db.Exec(ctx, `UPDATE outbound_recipients SET state = 'failed', smtp_text = $3, updated_at = now()
		WHERE message_id = $1 AND lower(address) = lower($2)`, messageID, address, "bounced: "+status)
	if err != nil {
		return false, fmt.Errorf("record bounce of %s: %w", address, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	_, err = s.db.Exec(ctx, `UPDATE outbound_emails e SET
			state = CASE WHEN EXISTS (SELECT 1 FROM outbound_recipients WHERE message_id = e.message_id AND state = 'sent')
			             THEN 'partially_sent' ELSE 'failed' END,
			last_error = $2, updated_at = now()
		WHERE e.message_id = $1`, messageID, "bounced: "+address+": "+status)
	if err != nil {
		return false, fmt.Errorf("record bounce of %s: %w", address, err)
	}
	return true, nil
}
