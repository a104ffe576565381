package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Attachment is what is known of one attachment; its bytes are read apart.
type Attachment struct {
	ID          int64     `json:"attachment_id"`
	MessageID   *int64    `json:"-"`
	Filename    string    `json:"filename"`
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size"`
	ContentID   *string   `json:"content_id,omitempty"`
	Inline      bool      `json:"inline"`
	Kept        bool      `json:"kept"`           // false when only its name, type and size were kept
	Note        *string   `json:"note,omitempty"` // why its content was not kept
	CreatedAt   time.Time `json:"created_at"`
	// MessageDirection is its message's, where TicketAttachment reads it.
	MessageDirection vocab.Direction `json:"-"`
}

// NewAttachment is an attachment to store. Content nil keeps only its
// name, type and size, with Note saying why.
type NewAttachment struct {
	Filename    string
	ContentType string
	Size        int64
	Content     *blob.Buffer // nil: not kept
	ContentID   string       // "<…>" or ""
	Inline      bool
	Note        string
	UploadedBy  string // the agent's name, for an upload; "" for a message's part
}

const attachmentColumns = `id, message_id, filename, content_type, size, content_id, inline, sha256 IS NOT NULL, note, created_at`

func scanAttachment(row pgx.Row) (*Attachment, error) {
	var a Attachment
	if err := row.Scan(&a.ID, &a.MessageID, &a.Filename, &a.ContentType, &a.Size, &a.ContentID, &a.Inline, &a.Kept, &a.Note, &a.CreatedAt); err != nil {
		return nil, interpretError(err)
	}
	return &a, nil
}

// InsertAttachments stores attachments of a message, in order, or (with
// messageID nil) one agent's uploads, in one round trip. Equal contents
// are stored once.
func (s *Store) InsertAttachments(ctx context.Context, messageID *int64, list []*NewAttachment) ([]*Attachment, error) {
	out, err := one(ctx, s, func(b *Batch, into *[]*Attachment) { b.InsertAttachments(messageID, list, into) })
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// InsertAttachments queues InsertAttachments; into gets them, in order.
func (b *Batch) InsertAttachments(messageID *int64, list []*NewAttachment, into *[]*Attachment) {
	*into = make([]*Attachment, len(list))
	for i, n := range list {
		var sum []byte
		if n.Content != nil {
			h := sha256.New()
			_, _ = io.Copy(h, n.Content.Reader())
			sum = h.Sum(nil)
			// A content stored already (the same file in another mail) is
			// not stored again, nor are its chunks.
			small, ok := n.Content.Small()
			b.b.Queue(`INSERT INTO attachment_contents (sha256, content) VALUES ($1, $2) ON CONFLICT DO NOTHING`, sum, small)
			if !ok {
				b.bulk = append(b.bulk, bulk{sql: `INSERT INTO attachment_chunks (sha256, seq, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
					key: sum, chunks: n.Content.Chunks()})
			}
		}
		b.b.Queue(`INSERT INTO attachments
				(message_id, position, filename, content_type, size, sha256, content_id, inline, note, uploaded_by)
			VALUES ($1, $2, $3, $4, $5, $6, nullif($7, ''), $8, nullif($9, ''), nullif($10, ''))
			RETURNING `+attachmentColumns,
			messageID, i, n.Filename, n.ContentType, n.Size, sum, n.ContentID, n.Inline, n.Note, n.UploadedBy).
			QueryRow(func(row pgx.Row) error {
				a, err := scanAttachment(row)
				if err != nil {
					return fmt.Errorf("store attachment %q: %w", n.Filename, err)
				}
				(*into)[i] = a
				return nil
			})
	}
}

// AttachmentsOfTicket returns the attachments of the ticket's messages by
// message id, each message's in order.
func (s *Store) AttachmentsOfTicket(ctx context.Context, ticketID string) (map[int64][]*Attachment, error) {
	byMessage := map[int64][]*Attachment{}
	if err := exec(ctx, s, func(b *Batch) { b.AttachmentsOfTicket(ticketID, byMessage) }); err != nil {
		return nil, err
	}
	return byMessage, nil
}

// AttachmentsOfTicket queues AttachmentsOfTicket; into gets them by message id.
func (b *Batch) AttachmentsOfTicket(ticketID string, into map[int64][]*Attachment) {
	queueRows(b, "attachments of "+ticketID, scanAttachment, func(l []*Attachment) {
		for _, a := range l {
			into[*a.MessageID] = append(into[*a.MessageID], a)
		}
	}, `SELECT `+prefixed("a.", attachmentColumns)+`
		FROM attachments a JOIN messages m ON m.id = a.message_id
		WHERE m.ticket_id = $1 ORDER BY a.message_id, a.position, a.id`, ticketID)
}

// TicketAttachment returns an attachment of one of the ticket's messages
// with its content (nil if it was not kept); ErrNotFound if the ticket has
// no such attachment.
func (s *Store) TicketAttachment(ctx context.Context, ticketID string, id int64) (*Attachment, []byte, error) {
	var a Attachment
	var content []byte
	err := s.db.QueryRow(ctx, `SELECT `+prefixed("a.", attachmentColumns)+`, m.direction, `+contentSQL+`
		FROM attachments a JOIN messages m ON m.id = a.message_id
		LEFT JOIN attachment_contents c ON c.sha256 = a.sha256
		WHERE a.id = $1 AND m.ticket_id = $2`, id, ticketID).
		Scan(&a.ID, &a.MessageID, &a.Filename, &a.ContentType, &a.Size, &a.ContentID, &a.Inline, &a.Kept, &a.Note, &a.CreatedAt,
			&a.MessageDirection, &content)
	if err != nil {
		return nil, nil, fmt.Errorf("attachment %d of %s: %w", id, ticketID, interpretError(err))
	}
	return &a, content, nil
}

// AttachmentFile is an attachment with its bytes, as a mail carries it.
type AttachmentFile struct {
	Attachment
	Content []byte
}

// MessageAttachmentFiles returns the attachments of a message whose
// content is kept, with their bytes, in order.
func (s *Store) MessageAttachmentFiles(ctx context.Context, messageID int64) ([]*AttachmentFile, error) {
	files, err := one(ctx, s, func(b *Batch, into *[]*AttachmentFile) { b.MessageAttachmentFiles(messageID, into) })
	if err != nil {
		return nil, err
	}
	return *files, nil
}

// MessageAttachmentFiles queues MessageAttachmentFiles; into gets the files.
func (b *Batch) MessageAttachmentFiles(messageID int64, into *[]*AttachmentFile) {
	b.attachmentFiles(messageAttachmentFilesSQL+attachmentOrder, messageID, into)
}

func (b *Batch) attachmentFiles(sql string, messageID int64, into *[]*AttachmentFile) {
	b.b.Queue(sql, messageID).Query(func(rows pgx.Rows) error {
		files, err := scanAttachmentFiles(rows, messageID)
		*into = files
		return err
	})
}

// FilesToRender queues MessageAttachmentFiles for an outbound message
// whose bytes are not kept yet: a message rendered already reads none, so
// that the read can go before the delivery knows which it is.
func (b *Batch) FilesToRender(messageID int64, into *[]*AttachmentFile) {
	b.attachmentFiles(messageAttachmentFilesSQL+filesToRenderCondition+attachmentOrder, messageID, into)
}

const filesToRenderCondition = ` AND NOT EXISTS (SELECT 1 FROM outbound_emails e WHERE e.message_id = $1 AND e.rendered IS NOT NULL)`

// contentSQL is the content of attachment_contents c, in one value.
const contentSQL = `coalesce(c.content, (SELECT string_agg(k.data, ''::bytea ORDER BY k.seq) FROM attachment_chunks k WHERE k.sha256 = c.sha256))`

var messageAttachmentFilesSQL = `SELECT ` + prefixed("a.", attachmentColumns) + `, ` + contentSQL + `
	FROM attachments a JOIN attachment_contents c ON c.sha256 = a.sha256
	WHERE a.message_id = $1`

const attachmentOrder = ` ORDER BY a.position, a.id`

func scanAttachmentFiles(rows pgx.Rows, messageID int64) ([]*AttachmentFile, error) {
	files, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*AttachmentFile, error) {
		var f AttachmentFile
		a := &f.Attachment
		err := row.Scan(&a.ID, &a.MessageID, &a.Filename, &a.ContentType, &a.Size, &a.ContentID, &a.Inline, &a.Kept, &a.Note, &a.CreatedAt, &f.Content)
		return &f, err
	})
	if err != nil {
		return nil, fmt.Errorf("attachments of message %d: %w", messageID, err)
	}
	return files, nil
}

// AttachUploads gives a message the agent's uploads, in the order given.
// It returns the ids that are not unsent uploads of that agent: unknown,
// another agent's, or sent already; nothing changes then.
func (s *Store) AttachUploads(ctx context.Context, messageID int64, agent string, ids []int64) (missing []int64, err error) {
	rows, err := s.db.Query(ctx, `UPDATE attachments a SET message_id = $1, position = w.ord - 1
		FROM unnest($3::bigint[]) WITH ORDINALITY w(id, ord)
		WHERE a.id = w.id AND a.message_id IS NULL AND a.uploaded_by = $2
		RETURNING a.id`, messageID, agent, ids)
	if err != nil {
		return nil, fmt.Errorf("attach uploads to message %d: %w", messageID, err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("attach uploads to message %d: %w", messageID, err)
	}
	got := map[int64]bool{}
	for _, id := range done {
		got[id] = true
	}
	for _, id := range ids {
		if !got[id] {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// DeleteMessageAttachments forgets a message's attachments (their shared
// contents stay until PruneAttachments), before a reparse stores them anew.
func (s *Store) DeleteMessageAttachments(ctx context.Context, messageID int64) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM attachments WHERE message_id = $1`, messageID); err != nil {
		return fmt.Errorf("attachments of message %d: %w", messageID, err)
	}
	return nil
}

// PruneAttachments deletes uploads no reply sent within maxAge, then the
// contents no attachment refers to any more. It returns how many rows of
// each went.
func (s *Store) PruneAttachments(ctx context.Context, maxAge time.Duration) (uploads, contents int64, err error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM attachments WHERE message_id IS NULL AND created_at < now() - $1::interval`, maxAge)
	if err != nil {
		return 0, 0, fmt.Errorf("prune uploads: %w", err)
	}
	uploads = tag.RowsAffected()
	tag, err = s.db.Exec(ctx, `DELETE FROM attachment_contents c
		WHERE c.created_at < now() - $1::interval AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.sha256 = c.sha256)`, maxAge)
	if err != nil {
		return uploads, 0, fmt.Errorf("prune attachment contents: %w", err)
	}
	return uploads, tag.RowsAffected(), nil
}
