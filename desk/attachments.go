package desk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"helpdesk/store"
)

// DefaultAttachmentMaxBytes is the largest file kept when the
// configuration names no other size: 20 MiB.
const DefaultAttachmentMaxBytes = 20 << 20

// ErrAttachmentTooLarge is an upload over the size limit.
var ErrAttachmentTooLarge = errors.New("the file is larger than the attachment limit")

// ErrAttachmentUnavailable names attachments a reply cannot send: not an
// upload of the replying agent, or sent with another reply already.
var ErrAttachmentUnavailable = errors.New("not an unsent upload of yours")

// KeepAttachments drops the content of every attachment over max bytes,
// keeping its name, type and size with a note that says why.
func KeepAttachments(list []*store.NewAttachment, max int64) []*store.NewAttachment {
	for _, a := range list {
		if a.Content != nil && int64(len(a.Content)) > max {
			a.Content = nil
			a.Note = fmt.Sprintf("content not kept: %d bytes, over the limit of %d (HELPDESK_ATTACHMENT_MAX_BYTES)", a.Size, max)
		}
	}
	return list
}

func (d *Desk) keepable(list []*store.NewAttachment) []*store.NewAttachment {
	return KeepAttachments(list, d.config.AttachmentMaxBytes)
}

// AttachmentMaxBytes is the largest file whose content is kept.
func (d *Desk) AttachmentMaxBytes() int64 { return d.config.AttachmentMaxBytes }

// Upload is a file an agent uploads to send with a reply.
type Upload struct {
	Agent       string // the agent's name
	Filename    string
	ContentType string
	Content     []byte
}

// StoreUploadTx keeps an agent's file, in the caller's transaction, until
// a reply sends it (or the prune job deletes it, unsent, after a day).
func (d *Desk) StoreUploadTx(ctx context.Context, tx pgx.Tx, u *Upload) (*store.Attachment, error) {
	if int64(len(u.Content)) > d.config.AttachmentMaxBytes {
		return nil, fmt.Errorf("%w: %d bytes; at most %d", ErrAttachmentTooLarge, len(u.Content), d.config.AttachmentMaxBytes)
	}
	list, err := store.New(tx).InsertAttachments(ctx, nil, []*store.NewAttachment{{Filename: u.Filename, ContentType: u.ContentType,
		Size: int64(len(u.Content)), Content: u.Content, UploadedBy: u.Agent}})
	if err != nil {
		return nil, err
	}
	return list[0], nil
}

// MaxSignatureBytes bounds an agent's signature.
const MaxSignatureBytes = 2000

// CheckSignature refuses a signature a reply cannot carry: too long, not
// UTF-8, or with control characters other than new lines and tabs.
func CheckSignature(s string) error {
	switch {
	case len(s) > MaxSignatureBytes:
		return fmt.Errorf("the signature has %d bytes; at most %d", len(s), MaxSignatureBytes)
	case !utf8.ValidString(s):
		return errors.New("the signature is not UTF-8")
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0:
		return errors.New("the signature has control characters; only new lines and tabs are allowed")
	}
	return nil
}
