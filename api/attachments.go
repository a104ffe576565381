package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// uploadAttachment answers POST /v1/attachments (agents): one file in a
// multipart/form-data body under the field "file". It is kept until a
// reply sends it ("attachments": [id]), once per Idempotency-Key.
func (s *Server) uploadAttachment(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "upload attachments"); err != nil {
		return err
	}
	if _, err := idempotencyKey(r); err != nil {
		return err
	}
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" || params["boundary"] == "" {
		return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: "send the file as multipart/form-data, in a field named file"}
	}
	limit := s.desk.AttachmentMaxBytes()
	tooLarge := &Error{Status: http.StatusRequestEntityTooLarge, Code: "attachment_too_large",
		Message: fmt.Sprintf("the file is over %d bytes (HELPDESK_ATTACHMENT_MAX_BYTES)", limit)}
	mr := multipart.NewReader(http.MaxBytesReader(w, r.Body, limit+1<<20), params["boundary"])
	var upload *desk.Upload
	var maxErr *http.MaxBytesError
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.As(err, &maxErr) {
			return tooLarge
		}
		if err != nil {
			return badRequest("invalid_multipart", "the multipart body could not be read: "+err.Error())
		}
		if part.FormName() != "file" {
			return badRequest("unknown_field", fmt.Sprintf("field %q is not accepted; send one field named file", part.FormName()))
		}
		if upload != nil {
			return badRequest("invalid_multipart", "send one file per request")
		}
		content, err := io.ReadAll(io.LimitReader(part, limit+1))
		if errors.As(err, &maxErr) || int64(len(content)) > limit {
			return tooLarge
		}
		if err != nil {
			return badRequest("invalid_multipart", "the file could not be read: "+err.Error())
		}
		name := part.FileName()
		if err := checkFilename(name); err != nil {
			return err
		}
		upload = &desk.Upload{Agent: who.ID(), Filename: name, ContentType: desk.UploadedType(part.Header.Get("Content-Type")), Content: content}
	}
	if upload == nil {
		return badRequest("missing_file", "the body has no field named file")
	}
	sum := sha256.Sum256(upload.Content)
	canonical := map[string]string{"filename": upload.Filename, "content_type": upload.ContentType, "sha256": hex.EncodeToString(sum[:])}
	return s.createOnce(w, r, who, canonical, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		a, err := s.desk.StoreUploadTx(ctx, tx, upload)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, a, nil
	})
}

// checkFilename is desk.CheckFilename in the API's words.
func checkFilename(name string) error {
	if err := desk.CheckFilename(name); err != nil {
		return unprocessable("invalid_filename", "%v", err)
	}
	return nil
}

// getAttachment answers GET /v1/tickets/{id}/attachments/{attachment_id}
// to whoever may read the ticket (customers: of the messages they see).
// It is always a download: Content-Disposition attachment, nosniff and a
// sandbox policy, so that an HTML or SVG file never runs as the API's page.
func (s *Server) getAttachment(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	ctx := r.Context()
	ticket, err := s.visibleTicket(ctx, who, r.PathValue("id"))
	if err != nil {
		return err
	}
	notFound := &Error{Status: http.StatusNotFound, Code: "not_found", Message: "ticket " + ticket.ID + " has no such attachment"}
	id, err := strconv.ParseInt(r.PathValue("attachment_id"), 10, 64)
	if err != nil || id <= 0 {
		return notFound
	}
	a, content, err := store.New(s.pool).TicketAttachment(ctx, ticket.ID, id)
	if isNotFound(err) || (err == nil && !who.IsAgent() && !a.MessageDirection.Public()) {
		return notFound
	}
	if err != nil {
		return err
	}
	if !a.Kept {
		note := "only its name, type and size were kept"
		if a.Note != nil {
			note = *a.Note
		}
		return &Error{Status: http.StatusGone, Code: "attachment_not_kept", Message: note}
	}
	h := w.Header()
	h.Set("Content-Type", desk.UploadedType(a.ContentType))
	h.Set("Content-Disposition", ContentDisposition(a.Filename))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=0")
	http.ServeContent(w, r, "", a.CreatedAt, bytes.NewReader(content))
	return nil
}

// ContentDisposition is an RFC 6266 attachment header for a file name: an
// ASCII fallback in filename, the exact name in filename* (RFC 8187). The
// fallback has no % either: some browsers decode %XX in it (Appendix D).
func ContentDisposition(name string) string {
	var fallback, exact strings.Builder
	for _, r := range name {
		switch {
		case r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == '%' || r > 0x7e:
			fallback.WriteByte('_')
		default:
			fallback.WriteRune(r)
		}
	}
	const attrChar = "!#$&+-.^_`|~"
	for _, b := range []byte(name) {
		if b < 0x80 && (('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') || ('0' <= b && b <= '9') || strings.IndexByte(attrChar, b) >= 0) {
			exact.WriteByte(b)
		} else {
			fmt.Fprintf(&exact, "%%%02X", b)
		}
	}
	v := `attachment; filename="` + fallback.String() + `"`
	if fallback.String() != name {
		v += "; filename*=UTF-8''" + exact.String()
	}
	return v
}
