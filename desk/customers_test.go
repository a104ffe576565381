package desk_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
)

func TestCreateCustomer(t *testing.T) {
	t.Parallel()

	t.Run("ANewCustomerGetsTheNextNumber", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		c, err := w.desk.CreateCustomer(w.ctx, "walter@example.com", "  Walter Skinner ")
		if err != nil || c.ID == "" || c.Name != "Walter Skinner" {
			t.Errorf("customer %+v (%v)", c, err)
		}
	})

	t.Run("AnAddressTakenInAnyCaseIsRefused", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		_, err := w.desk.CreateCustomer(w.ctx, "ADA.LOVELACE@example.com", "Ada again")
		if !errors.Is(err, desk.ErrCustomerExists) {
			t.Errorf("err = %v, want ErrCustomerExists", err)
		}
		if _, err := w.st.CustomerByEmail(w.ctx, "ada.lovelace@example.com"); err != nil {
			t.Error(err)
		}
	})
}

func TestUploads(t *testing.T) {
	t.Parallel()

	t.Run("AnUploadOverTheLimitIsRefusedAndOneWithinIsSentWithTheReply", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.AttachmentMaxBytes = 10 })
		err := store.Run(w.ctx, w.pool, func(tx *store.Tx) error {
			_, err := w.desk.StoreUploadTx(w.ctx, tx, &desk.Upload{Agent: "alice", Filename: "big.bin", Content: make([]byte, 11)})
			return err
		})
		if !errors.Is(err, desk.ErrAttachmentTooLarge) {
			t.Errorf("err = %v, want ErrAttachmentTooLarge", err)
		}
		var up *store.Attachment
		if err := store.Run(w.ctx, w.pool, func(tx *store.Tx) (err error) {
			up, err = w.desk.StoreUploadTx(w.ctx, tx, &desk.Upload{Agent: "alice", Filename: "a.txt", ContentType: "text/plain", Content: []byte("hi")})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ticket := w.open(t, "Files", "Hi.")
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: "agent:bilal", Body: "Here.", Attachments: []int64{up.ID}}); !errors.Is(err, desk.ErrAttachmentUnavailable) {
			t.Errorf("another agent's upload: err = %v", err)
		}
		msg, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: "agent:alice", Body: "Here.", Attachments: []int64{up.ID}})
		if err != nil {
			t.Fatal(err)
		}
		w.deliverAll(t)
		files, _ := w.st.MessageAttachmentFiles(w.ctx, msg.ID)
		if len(files) != 1 || len(w.smtp.Deliveries()) != 1 {
			t.Errorf("%d files on the reply, %d mails", len(files), len(w.smtp.Deliveries()))
		}
	})
	t.Run("AnUploadsNameMustSurviveAMailHeaderAndItsTypeIsKeptWellFormed", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		upload := func(name, contentType string) (*store.Attachment, error) {
			var up *store.Attachment
			err := store.Run(w.ctx, w.pool, func(tx *store.Tx) (err error) {
				up, err = w.desk.StoreUploadTx(w.ctx, tx, &desk.Upload{Agent: "alice", Filename: name, ContentType: contentType, Content: []byte("hi")})
				return err
			})
			return up, err
		}
		for _, name := range []string{"", " ", "\xff.txt", "a\x00b.txt", "a\r\nb.txt", strings.Repeat("x", desk.MaxFilenameBytes+1)} {
			if _, err := upload(name, "text/plain"); !errors.Is(err, desk.ErrInvalidFilename) {
				t.Errorf("name %.12q: err = %v, want ErrInvalidFilename", name, err)
			}
		}
		for given, kept := range map[string]string{"text/plain; charset=UTF-8": "text/plain; charset=UTF-8", "\xff/\xfe": "application/octet-stream",
			"nonsense": "application/octet-stream", "": "application/octet-stream"} {
			if up, err := upload("a.txt", given); err != nil || up.ContentType != kept {
				t.Errorf("type %q kept as %v (%v), want %q", given, up, err, kept)
			}
		}
	})
}
