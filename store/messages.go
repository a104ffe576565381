package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Message is one entry of a ticket's conversation.
type Message struct {
	ID             int64
	TicketID       string
	Direction      vocab.Direction
	Author         vocab.Actor
	Body           string
	EmailMessageID *string // the RFC 5322 Message-ID, when the message is or was an email
	CreatedAt      time.Time

	// Of inbound mail: the From address as parsed, what its sender
	// authentication said, and, for a held message, why it was held.
	Sender      *string
	AuthVerdict *vocab.Verdict
	AuthDetail  *string
	HeldReason  *string
	Subject     *string
	// ArrivedAt is when a fetched mail reached its mailbox, where that was
	// before it was filed (CreatedAt); nil for any other message.
	ArrivedAt *time.Time
}

// InsertMessageParams are the fields of a new message.
type InsertMessageParams struct {
	ID             int64 // from NextMessageID, or 0 to number it now
	TicketID       string
	Direction      vocab.Direction
	Author         vocab.Actor
	Body           string
	EmailMessageID *string
	Attachments    []*NewAttachment // the email's files and inline images
	AutoSubmitted  bool             // sent by a machine: an auto-reply or bulk mail
	RawEmail       []byte           // the email as it arrived, kept compressed; nil for none
	// RawEmailGzip is RawEmail compressed already (a listener that
	// compressed it as it came); it wins over RawEmail. Past one chunk it
	// is written in chunks, and the message must bring its number.
	RawEmailGzip *blob.Buffer
	Sender       string
	AuthVerdict  vocab.Verdict
	AuthDetail   string
	HeldReason   string
	Subject      string
	// Arrived is when a fetched mail reached the mailbox it was fetched
	// from (its INTERNALDATE); zero for mail filed as it arrives. The
	// customer has waited since then, so the SLA clocks count from it.
	Arrived time.Time
}

const messageColumns = `id, ticket_id, direction, author, body, email_message_id, created_at, sender, auth_verdict, auth_detail, held_reason, subject, arrived_at`

func scanMessage(row pgx.Row) (*Message, error) {
	var m Message
	if err := row.Scan(&m.ID, &m.TicketID, &m.Direction, &m.Author, &m.Body, &m.EmailMessageID, &m.CreatedAt,
		&m.Sender, &m.AuthVerdict, &m.AuthDetail, &m.HeldReason, &m.Subject, &m.ArrivedAt); err != nil {
		return nil, interpretError(err)
	}
	return &m, nil
}

// InsertMessage adds a message to a ticket; a Message-ID already stored
// is ErrConflict. A message with attachments is numbered first, in a round
// trip of its own, unless it brings its number.
func (s *Store) InsertMessage(ctx context.Context, p *InsertMessageParams) (*Message, error) {
	if p.numbered() && p.ID == 0 {
		numbered := *p
		id, err := one(ctx, s, func(b *Batch, id *int64) { b.NextMessageID(id) })
		if err != nil {
			return nil, err
		}
		numbered.ID = *id
		p = &numbered
	}
	return one(ctx, s, func(b *Batch, m *Message) { b.InsertMessage(p, m) })
}

// InsertMessage queues InsertMessage; into gets the message. A message
// with attachments must bring its number (NextMessageID), which they name.
func (b *Batch) InsertMessage(p *InsertMessageParams, into *Message) {
	if p.numbered() && p.ID == 0 {
		b.fail(errBatchedAttachments)
		return
	}
	args, err := insertMessageArgs(p)
	if err != nil {
		b.fail(err)
		return
	}
	if into == nil { // nothing reads the row back (see InsertTicket)
		b.b.Queue(insertMessageUnreadSQL, args...)
	} else {
		// The row read back checks nothing: an insert that fails stops the
		// trip, and one that succeeds returns its row. So the commit may go
		// with it (a reply's).
		b.readOnly(queueRow(b, "insert message on", p.TicketID, scanMessage, into, insertMessageSQL, args...))
	}
	if _, small := p.RawEmailGzip.Small(); p.RawEmailGzip != nil && !small {
		b.bulk = append(b.bulk, bulk{sql: `INSERT INTO raw_email_chunks (message_id, seq, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			key: p.ID, chunks: p.RawEmailGzip.Chunks()})
	}
	if len(p.Attachments) > 0 {
		id := p.ID
		var written []*Attachment
		b.InsertAttachments(&id, p.Attachments, &written)
	}
}

// nextMessageID draws from the sequence of messages' identity column, by
// its name, as nextJobID does River's.
const nextMessageID = `nextval('messages_id_seq')`

// NextMessageID queues the numbering of a message not yet written, so
// that rows that name it can be queued with it.
func (b *Batch) NextMessageID(id *int64) {
	b.b.Queue(`SELECT ` + nextMessageID).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(id); err != nil {
			return fmt.Errorf("number a message: %w", err)
		}
		return nil
	})
}

// The id is an identity column: a number taken by NextMessageID is written
// over the system's value, and COALESCE takes a new one only without it.
// The unread form returns nothing, as InsertTicket's.
const (
	// A time of arrival is kept only when it is before the insert's: one
	// from a server whose clock runs ahead counts as arriving now.
	insertMessageUnreadSQL = `INSERT INTO messages (id, ticket_id, direction, author, body, email_message_id, auto_submitted, raw_email,
		sender, auth_verdict, auth_detail, held_reason, subject, arrived_at)
	OVERRIDING SYSTEM VALUE
	VALUES (COALESCE($1, ` + nextMessageID + `), $2, $3, $4, $5, $6, $7, $8,
		NULLIF($9, ''), NULLIF($10, ''), NULLIF($11, ''), NULLIF($12, ''), NULLIF($13, ''),
		CASE WHEN $14::timestamptz < now() THEN $14::timestamptz END)`
	insertMessageSQL = insertMessageUnreadSQL + ` RETURNING ` + messageColumns
)

// numbered reports whether the message's rows name it: its attachments,
// or the chunks of a large raw mail.
func (p *InsertMessageParams) numbered() bool {
	_, small := p.RawEmailGzip.Small()
	return len(p.Attachments) > 0 || (p.RawEmailGzip != nil && !small)
}

func insertMessageArgs(p *InsertMessageParams) ([]any, error) {
	raw, _ := p.RawEmailGzip.Small() // a large one goes in chunks
	if p.RawEmailGzip == nil && p.RawEmail != nil {
		var err error
		if raw, err = gzipBytes(p.RawEmail); err != nil {
			return nil, fmt.Errorf("insert message on %s: compress: %w", p.TicketID, err)
		}
	}
	var id *int64
	if p.ID != 0 {
		id = &p.ID
	}
	var arrived *time.Time
	if !p.Arrived.IsZero() {
		arrived = &p.Arrived
	}
	return []any{id, p.TicketID, p.Direction, p.Author, p.Body, p.EmailMessageID, p.AutoSubmitted, raw,
		p.Sender, string(p.AuthVerdict), p.AuthDetail, p.HeldReason, p.Subject, arrived}, nil
}

// RawEmail returns the email a message arrived as, byte for byte; nil if
// it did not come by email.
func (s *Store) RawEmail(ctx context.Context, messageID int64) ([]byte, error) {
	var packed []byte
	if err := s.db.QueryRow(ctx, `SELECT coalesce(raw_email,
			(SELECT string_agg(data, ''::bytea ORDER BY seq) FROM raw_email_chunks WHERE message_id = m.id))
		FROM messages m WHERE id = $1`, messageID).Scan(&packed); err != nil {
		return nil, fmt.Errorf("raw email of message %d: %w", messageID, interpretError(err))
	}
	if packed == nil {
		return nil, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return nil, fmt.Errorf("raw email of message %d: %w", messageID, err)
	}
	return io.ReadAll(zr)
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// NotificationIDs returns the Message-IDs of the ticket's earlier mail to
// agents, oldest first (the first and the newest 20): the agent-side thread.
func (s *Store) NotificationIDs(ctx context.Context, ticketID string) ([]string, error) {
	ids, err := one(ctx, s, func(b *Batch, into *[]string) { b.NotificationIDs(ticketID, into) })
	if err != nil {
		return nil, err
	}
	return *ids, nil
}

// NotificationIDs queues NotificationIDs; into gets the ids.
func (b *Batch) NotificationIDs(ticketID string, into *[]string) {
	b.texts("notifications of "+ticketID, notificationIDsOf("$1"), into, ticketID)
}

// notificationIDsOf selects NotificationIDs' ids of ticket, the SQL of
// its id.
func notificationIDsOf(ticket string) string {
	return `SELECT email_message_id FROM (
			(SELECT email_message_id, created_at, id FROM messages WHERE ticket_id = ` + ticket + ` AND direction = 'notification'
			 ORDER BY created_at, id LIMIT 1)
			UNION
			(SELECT email_message_id, created_at, id FROM messages WHERE ticket_id = ` + ticket + ` AND direction = 'notification'
			 ORDER BY created_at DESC, id DESC LIMIT 20)) n
		ORDER BY created_at, id`
}

// Now queues a read of the transaction's time, which is what now() writes
// into the rows queued after it.
func (b *Batch) Now(now *time.Time) {
	b.b.Queue(`SELECT now()`).QueryRow(func(row pgx.Row) error { return row.Scan(now) })
}

// ListMessages returns a ticket's messages, oldest first.
func (s *Store) ListMessages(ctx context.Context, ticketID string) ([]*Message, error) {
	var msgs []*Message
	if err := exec(ctx, s, func(b *Batch) { b.ListMessages(ticketID, &msgs) }); err != nil {
		return nil, err
	}
	return msgs, nil
}

// ListMessages queues ListMessages; into gets the messages.
func (b *Batch) ListMessages(ticketID string, into *[]*Message) {
	queueRows(b, "list messages of "+ticketID, scanMessage, func(l []*Message) { *into = l },
		`SELECT `+messageColumns+` FROM messages WHERE ticket_id = $1 ORDER BY created_at, id`, ticketID)
}

// ThreadIDs are the Message-IDs a reply's thread headers are built from.
type ThreadIDs struct {
	Root    string   // the ticket's first message's, the thread root
	Earlier []string // the root, then the newest earlier messages' (up to threadWindow), oldest first
	Parent  string   // the newest earlier inbound message's, else Root
}

// threadWindow is how many of the newest earlier Message-IDs ReplyThread
// reads. References keeps the root and as many of the newest as fit in one
// 998-character line: 40 ids of 24 characters fill it, and real ids are
// longer (Gmail's, Outlook's and ours are 40 to 80), so reading more would
// only cost time. It is written into the statement, not sent with it: a
// LIMIT that is a parameter is unknown to the plan a connection keeps for
// the statement, which then looks dearer than planning each read anew, and
// on a desk of agent-heavy tickets PostgreSQL did that for every reply
// (300 µs of planning for 34 of execution).
const threadWindow = "40"

// ReplyThread collects the Message-IDs of the messages before reply on its
// ticket: the root, the newest threadWindow, and the newest inbound one.
// Each is an index scan on messages_ticket, so the cost does not grow with
// the ticket's length.
//
// The reply itself is left out explicitly (id <> reply): its Message-ID is
// stored before the first send, so without that clause a retry, or even the
// first attempt, would cite the reply as its own ancestor.
func (s *Store) ReplyThread(ctx context.Context, reply *Message) (*ThreadIDs, error) {
	return one(ctx, s, func(b *Batch, t *ThreadIDs) { b.ReplyThread(reply.TicketID, reply.ID, t) })
}

// ReplyThread queues ReplyThread of reply replyID on ticket ticketID: the
// reply's time is read with it, so that the thread can be read in the
// trip that reads the reply.
func (b *Batch) ReplyThread(ticketID string, replyID int64, into *ThreadIDs) {
	b.b.Queue(replyThreadSQL, ticketID, replyID).Query(func(rows pgx.Rows) error {
		t, err := scanThread(rows, replyID)
		if err == nil {
			*into = *t
		}
		return err
	})
}

// Each part repeats the filter rather than sharing a CTE: a CTE used three
// times is materialised, which reads the whole ticket. Only the customer's
// side of the ticket: agent-side Message-IDs (notifications, agents' mail)
// never appear in mail to the customer. The parent's part leaves out what
// would let it use messages_customer_thread: without statistics (after a
// burst of writes, before autovacuum analyses) the planner took that index
// and walked back through every reply to find the one inbound message
// (8,000 rows a mail in the email benchmark); only messages_ticket_direction
// serves it now. Every inbound message has a Message-ID, minted if need be.
const threadEarlier = `FROM messages
	WHERE ticket_id = $1 AND email_message_id IS NOT NULL AND id <> $2 AND created_at <= ` + replyTime + `
	  AND direction IN ('inbound', 'outbound', 'acknowledgement')`

// replyTime is the time of reply $2 (of ticket $1, else NULL), read once
// per statement (an InitPlan), for the messages before it. Only the
// primary key may find it: with the ticket in the WHERE clause, a table
// vacuumed since its last ANALYZE (its pages all visible, as after a
// burst of writes) makes an index-only scan of messages_ticket_direction
// look cheaper, and that scan walks every message of the ticket to find
// the one id, three times a thread read: 97 buffers against 25 on a
// ticket of 3,500 messages.
const replyTime = `(SELECT CASE WHEN ticket_id = $1 THEN created_at END FROM messages WHERE id = $2)`

const replyThreadSQL = `
	(SELECT 'root', email_message_id, created_at, id ` + threadEarlier + ` ORDER BY created_at, id LIMIT 1)
	UNION ALL
	(SELECT 'parent', email_message_id, created_at, id FROM messages
		WHERE ticket_id = $1 AND direction = 'inbound' AND id <> $2 AND created_at <= ` + replyTime + `
		ORDER BY created_at DESC, id DESC LIMIT 1)
	UNION ALL
	(SELECT * FROM (SELECT 'newest', email_message_id, created_at, id ` + threadEarlier + `
		ORDER BY created_at DESC, id DESC LIMIT ` + threadWindow + `) newest ORDER BY created_at, id)`

func scanThread(rows pgx.Rows, replyID int64) (*ThreadIDs, error) {
	defer rows.Close()
	t := &ThreadIDs{}
	for rows.Next() {
		var part string
		var id *string
		var at time.Time
		var msgID int64
		if err := rows.Scan(&part, &id, &at, &msgID); err != nil {
			return nil, fmt.Errorf("thread of message %d: %w", replyID, err)
		}
		if id == nil {
			continue // a parent without a Message-ID: the root stands in
		}
		switch part {
		case "root":
			t.Root = *id
			t.Earlier = append([]string{*id}, t.Earlier...)
		case "newest":
			if *id != t.Root {
				t.Earlier = append(t.Earlier, *id)
			}
		case "parent":
			t.Parent = *id
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("thread of message %d: %w", replyID, err)
	}
	if t.Parent == "" {
		t.Parent = t.Root
	}
	return t, nil
}

// QuotedMessage returns the customer's newest message before reply, the
// one a reply quotes (machines' mail left out); ErrNotFound if none.
func (s *Store) QuotedMessage(ctx context.Context, reply *Message) (*Message, error) {
	m, err := optional(ctx, s, func(b *Batch, into **Message) { b.QuotedMessage(reply.TicketID, reply.ID, into) })
	if err == nil && m == nil {
		err = fmt.Errorf("message quoted by %d: %w", reply.ID, ErrNotFound)
	}
	return m, err
}

// QuotedMessage queues QuotedMessage of reply replyID on ticket ticketID;
// into gets the message, or nil if none.
func (b *Batch) QuotedMessage(ticketID string, replyID int64, into **Message) {
	queueOptionalRow(b, "message quoted by", replyID, scanMessage, into, quotedMessageSQL, ticketID, replyID)
}

const quotedMessageSQL = `SELECT ` + messageColumns + ` FROM messages
	WHERE ticket_id = $1 AND direction = 'inbound' AND NOT auto_submitted AND id <> $2 AND created_at <= ` + replyTime + `
	ORDER BY created_at DESC, id DESC LIMIT 1`

// GetMessage returns the message with the given id, or ErrNotFound.
func (s *Store) GetMessage(ctx context.Context, id int64) (*Message, error) {
	return one(ctx, s, func(b *Batch, m *Message) { b.GetMessage(id, m) })
}

// GetMessage queues GetMessage; into gets the message.
func (b *Batch) GetMessage(id int64, into *Message) {
	queueRow(b, "get message", id, scanMessage, into, getMessageSQL, id)
}

// GetMessageOptional queues GetMessage for a message that may not be
// there; into gets nil then.
func (b *Batch) GetMessageOptional(id int64, into **Message) {
	queueOptionalRow(b, "get message", id, scanMessage, into, getMessageSQL, id)
}

const getMessageSQL = `SELECT ` + messageColumns + ` FROM messages WHERE id = $1`

// TicketOfMessageIDs returns the ticket that holds the newest of the
// messages with these Message-IDs, sent or received; ErrNotFound if none.
// A held message's id names nothing: a stranger's mail, kept for agents,
// must not plant an id the stranger's next mail could cite.
func (s *Store) TicketOfMessageIDs(ctx context.Context, ids []string) (string, error) {
	// An id may also be the one a relay gave our message and wrote into
	// its Message-ID: <relay-id@relay's domain>.
	locals := make([]string, 0, len(ids))
	for _, id := range ids {
		if local, _, ok := strings.Cut(strings.Trim(id, "<>"), "@"); ok && local != "" {
			locals = append(locals, local)
		}
	}
	var ticketID string
	err := s.db.QueryRow(ctx, `SELECT ticket_id FROM (
			(SELECT ticket_id, created_at, id FROM messages WHERE email_message_id = ANY($1) AND direction <> 'held')
			UNION ALL
			(SELECT m.ticket_id, m.created_at, m.id FROM outbound_emails e JOIN messages m ON m.id = e.message_id
			 WHERE e.relay_message_id = ANY($2))
		) found ORDER BY created_at DESC, id DESC LIMIT 1`, ids, locals).Scan(&ticketID)
	if err != nil {
		return "", fmt.Errorf("find ticket by Message-IDs: %w", interpretError(err))
	}
	return ticketID, nil
}

// MessageIDExists reports whether a message with this Message-ID is stored.
func (s *Store) MessageIDExists(ctx context.Context, emailMessageID string) (exists bool, err error) {
	err = exec(ctx, s, func(b *Batch) { b.MessageIDExists(emailMessageID, &exists) })
	return exists, err
}

// MessageIDExists queues MessageIDExists; exists gets its answer.
func (b *Batch) MessageIDExists(emailMessageID string, exists *bool) {
	b.b.Queue(`SELECT EXISTS (SELECT 1 FROM messages WHERE email_message_id = $1)`, emailMessageID).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(exists); err != nil {
			return fmt.Errorf("look up Message-ID: %w", err)
		}
		return nil
	})
}

// IsTicketParticipant reports whether the address may write into the
// ticket: its customer's, a recipient of one of its outbound messages, one
// an agent let in (AddParticipant), or an active agent's.
func (s *Store) IsTicketParticipant(ctx context.Context, ticketID, address string) (ok bool, err error) {
	err = exec(ctx, s, func(b *Batch) { b.IsTicketParticipant(ticketID, address, &ok) })
	return ok, err
}

// IsTicketParticipant queues IsTicketParticipant; ok gets its answer.
func (b *Batch) IsTicketParticipant(ticketID, address string, ok *bool) {
	b.b.Queue(`SELECT EXISTS (
			SELECT 1 FROM tickets t JOIN customers c ON c.id = t.customer_id
			WHERE t.id = $1 AND lower(c.email) = lower($2))
		OR EXISTS (
			SELECT 1 FROM outbound_recipients r JOIN messages m ON m.id = r.message_id
			WHERE m.ticket_id = $1 AND lower(r.address) = lower($2))
		OR EXISTS (SELECT 1 FROM ticket_participants p WHERE p.ticket_id = $1 AND p.address = lower($2))
		OR EXISTS (SELECT 1 FROM agents a WHERE lower(a.email) = lower($2) AND a.disabled_at IS NULL)`, ticketID, address).
		QueryRow(func(row pgx.Row) error {
			if err := row.Scan(ok); err != nil {
				return fmt.Errorf("participants of %s: %w", ticketID, err)
			}
			return nil
		})
}

// AddParticipant queues letting the address write into the ticket.
func (b *Batch) AddParticipant(ticketID, address string, addedBy vocab.Actor) {
	b.b.Queue(`INSERT INTO ticket_participants (ticket_id, address, added_by) VALUES ($1, lower($2), $3) ON CONFLICT DO NOTHING`,
		ticketID, address, addedBy)
}

// AcceptHeld queues making a held message of the ticket an inbound one,
// by author; a message that is not held on that ticket is ErrNotFound.
func (b *Batch) AcceptHeld(ticketID string, messageID int64, author vocab.Actor, into *Message) {
	queueRow(b, "accept held message", messageID, scanMessage, into, `UPDATE messages SET direction = 'inbound', author = $3
		WHERE id = $2 AND ticket_id = $1 AND direction = 'held' RETURNING `+messageColumns, ticketID, messageID, author)
}

// MoveHeld queues moving a held message of the ticket to another ticket,
// as its first inbound message; ErrNotFound if it is not held there.
func (b *Batch) MoveHeld(ticketID string, messageID int64, to string, author vocab.Actor, into *Message) {
	queueRow(b, "move held message", messageID, scanMessage, into, `UPDATE messages SET ticket_id = $3, direction = 'inbound', author = $4
		WHERE id = $2 AND ticket_id = $1 AND direction = 'held' RETURNING `+messageColumns, ticketID, messageID, to, author)
}

// GetHeld queues the read of a held message of the ticket; ErrNotFound
// if it is not held there.
func (b *Batch) GetHeld(ticketID string, messageID int64, into *Message) {
	queueRow(b, "held message", messageID, scanMessage, into, `SELECT `+messageColumns+` FROM messages
		WHERE id = $2 AND ticket_id = $1 AND direction = 'held'`, ticketID, messageID)
}

// newestInboundOf selects the newest inbound message of ticket, the SQL
// of its id, that a person wrote (messageColumns), if there is one.
func newestInboundOf(ticket string) string {
	return `SELECT ` + messageColumns + ` FROM messages
		WHERE ticket_id = ` + ticket + ` AND direction = 'inbound' AND NOT auto_submitted ORDER BY created_at DESC, id DESC LIMIT 1`
}

// newestBodiesOf selects the bodies of ticket's newest messages in one
// direction (inbound: what the customer and the participants said lately,
// machines' mail left out; outbound: what agents answered), at most limit
// of them, oldest first, read through the (ticket_id, created_at, id)
// index however long the ticket is. Its arguments are the SQL of each.
//
// A message of someone else than the customer (a participant an agent let
// in) says whose it is, so that a prompt does not take it for hers.
func newestBodiesOf(ticket, direction, limit string) string {
	return `SELECT CASE WHEN author LIKE 'email:%' THEN '(' || substr(author, 7) || ' wrote:) ' || body ELSE body END FROM (
		SELECT m.body, m.author, m.created_at, m.id FROM messages m
		WHERE m.ticket_id = ` + ticket + ` AND m.direction = ` + direction + ` AND NOT m.auto_submitted
		ORDER BY m.created_at DESC, m.id DESC LIMIT ` + limit + `) newest
	ORDER BY created_at, id`
}

// MessageByEmailID returns the id of the message with this Message-ID.
func (s *Store) MessageByEmailID(ctx context.Context, emailMessageID string) (int64, error) {
	var id int64
	if err := s.db.QueryRow(ctx, `SELECT id FROM messages WHERE email_message_id = $1`, emailMessageID).Scan(&id); err != nil {
		return 0, fmt.Errorf("message %s: %w", emailMessageID, interpretError(err))
	}
	return id, nil
}

// SetParsedContent replaces what parsing made of an inbound message: its
// text and its attachments. Run it in a transaction.
func (s *Store) SetParsedContent(ctx context.Context, id int64, body string, attachments []*NewAttachment) error {
	tag, err := s.db.Exec(ctx, `UPDATE messages SET body = $2 WHERE id = $1`, id, body)
	if err != nil {
		return fmt.Errorf("reparse message %d: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err := s.DeleteMessageAttachments(ctx, id); err != nil {
		return err
	}
	if _, err := s.InsertAttachments(ctx, &id, attachments); err != nil {
		return fmt.Errorf("reparse message %d: %w", id, err)
	}
	return nil
}
