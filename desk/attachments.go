package desk

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/store"
)

// DefaultAttachmentMaxBytes is the largest file kept when the
// configuration names no other size: 20 MiB.
const DefaultAttachmentMaxBytes = 20 << 20

// ErrAttachmentTooLarge is an upload over the size limit.
var ErrAttachmentTooLarge = errors.New("the file is larger than the attachment limit")

// ErrAttachmentUnavailable names attachments a reply cannot send: not an
// upload of the replying agent, or sent with another reply already.
var ErrAttachmentUnavailable = errors.New("not an unsent upload of yours")

// File is a file that came with a mail: an attached file, an inline image
// (which an HTML part shows through its cid: Content-ID), a forwarded
// message.
type File struct {
	Name      string       // a file name without any folder
	Type      string       // the media type, lower case
	Content   *blob.Buffer // decoded; nil when it was over the bound, and only its size is known
	Size      int64        // its size, decoded
	Note      string       // why its content was not kept, when it was not
	ContentID string       // "<…>", or ""
	Inline    bool
}

// keepable is the files as the store keeps them: the content of one over
// AttachmentMaxBytes is dropped, its name, type and size kept with a note
// that says why.
func (d *Desk) keepable(files []*File) []*store.NewAttachment {
	out := make([]*store.NewAttachment, 0, len(files))
	for _, f := range files {
		size := max(f.Size, f.Content.Len())
		a := &store.NewAttachment{Filename: f.Name, ContentType: f.Type, Size: size, Content: f.Content,
			ContentID: f.ContentID, Inline: f.Inline}
		if limit := d.config.AttachmentMaxBytes; f.Content == nil || size > limit {
			a.Content, a.Note = nil, f.Note
			if a.Note == "" || size > limit {
				a.Note = fmt.Sprintf("content not kept: %d bytes, over the limit of %d (HELPDESK_ATTACHMENT_MAX_BYTES)", a.Size, limit)
			}
		}
		out = append(out, a)
	}
	return out
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
func (d *Desk) StoreUploadTx(ctx context.Context, tx *store.Tx, u *Upload) (*store.Attachment, error) {
	if int64(len(u.Content)) > d.config.AttachmentMaxBytes {
		return nil, fmt.Errorf("%w: %d bytes; at most %d", ErrAttachmentTooLarge, len(u.Content), d.config.AttachmentMaxBytes)
	}
	if err := CheckFilename(u.Filename); err != nil {
		return nil, err
	}
	list, err := tx.Store().InsertAttachments(ctx, nil, []*store.NewAttachment{{Filename: FileName(u.Filename), ContentType: UploadedType(u.ContentType),
		Size: int64(len(u.Content)), Content: blob.FromBytes(u.Content), UploadedBy: u.Agent}})
	if err != nil {
		return nil, err
	}
	return list[0], nil
}

// MaxFilenameBytes bounds an uploaded file's name.
const MaxFilenameBytes = 255

// ErrInvalidFilename is an upload's name that would not survive a mail
// header or a file system.
var ErrInvalidFilename = errors.New("invalid filename")

// CheckFilename refuses an upload's name that is empty, too long, not
// UTF-8 or has control characters, or whose file name (FileName) is none.
func CheckFilename(name string) error {
	switch base := FileName(name); {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("%w: the file needs a name", ErrInvalidFilename)
	case strings.TrimSpace(base) == "" || base == "." || base == "..":
		return fmt.Errorf("%w: %q names a folder, not a file", ErrInvalidFilename, name)
	case len(base) > MaxFilenameBytes: // the name kept and mailed, not the folders before it
		return fmt.Errorf("%w: the name has %d bytes; at most %d", ErrInvalidFilename, len(base), MaxFilenameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: the name is not UTF-8", ErrInvalidFilename)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: the name has control characters", ErrInvalidFilename)
	}
	return nil
}

// FileName is the name of the file an upload's name names: what follows
// its last slash or backslash. A client may send a path (RFC 7578 §4.2;
// an old Windows browser sends C:\Users\…), and a name is kept and mailed
// without one, as a recipient would strip it anyway (RFC 6266 §4.3).
func FileName(name string) string {
	return name[strings.LastIndexAny(name, `/\`)+1:]
}

// UploadedType is the type a client named for its file, as a well-formed
// media type, or application/octet-stream: what the file is kept and
// served with.
func UploadedType(t string) string {
	mt, params, err := mime.ParseMediaType(t)
	if err != nil || !strings.Contains(mt, "/") {
		return "application/octet-stream"
	}
	if v := mime.FormatMediaType(mt, params); v != "" {
		return v
	}
	return mt
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
