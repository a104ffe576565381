package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestPruneAttachments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, st := withAda(t)
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Hello"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionInbound, Author: "x", Body: "…",
		Attachments: []*store.NewAttachment{{Filename: "kept.pdf", ContentType: "application/pdf", Size: 4, Content: blob.FromBytes([]byte("kept"))}}})
	if err != nil {
		t.Fatal(err)
	}
	// Two unsent uploads: one of the same bytes as the message's file, one of its own.
	if _, err := st.InsertAttachments(ctx, nil, []*store.NewAttachment{
		{Filename: "same.pdf", ContentType: "application/pdf", Size: 4, Content: blob.FromBytes([]byte("kept")), UploadedBy: "alice"},
		{Filename: "alone.pdf", ContentType: "application/pdf", Size: 5, Content: blob.FromBytes([]byte("alone")), UploadedBy: "alice"},
	}); err != nil {
		t.Fatal(err)
	}

	t.Run("NothingYoungerThanTheAgeGoes", func(t *testing.T) {
		if uploads, contents, err := st.PruneAttachments(ctx, 24*time.Hour); err != nil || uploads != 0 || contents != 0 {
			t.Errorf("pruned %d uploads, %d contents (%v), want none", uploads, contents, err)
		}
	})
	t.Run("UnsentUploadsGoAndOnlyTheContentNobodyUses", func(t *testing.T) {
		uploads, contents, err := st.PruneAttachments(ctx, 0)
		if err != nil || uploads != 2 || contents != 1 {
			t.Errorf("pruned %d uploads, %d contents (%v), want the 2 uploads and the content only they used", uploads, contents, err)
		}
		files, err := st.MessageAttachmentFiles(ctx, msg.ID)
		if err != nil || len(files) != 1 || string(files[0].Content) != "kept" {
			t.Errorf("the message's file after the prune: %+v (%v)", files, err)
		}
	})
}

func TestLargeBytesGoInChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, st := withAda(t)
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Hello"})
	if err != nil {
		t.Fatal(err)
	}
	file := make([]byte, 3*blob.ChunkSize+17)
	_, _ = rand.Read(file)
	raw := []byte("From: ada@example.com\r\n\r\n" + strings.Repeat("a long mail ", 200_000))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	gzBlob := &blob.Buffer{}
	_, _ = gzBlob.Write(gz.Bytes())

	var msg *store.Message
	err = store.Run(ctx, pool, func(tx *store.Tx) (err error) {
		msg, err = tx.Store().InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionInbound,
			Author: "x", Body: "…", RawEmailGzip: gzBlob,
			Attachments: []*store.NewAttachment{{Filename: "big.bin", ContentType: "application/octet-stream", Size: int64(len(file)),
				Content: blob.FromBytes(file)}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := st.MessageAttachmentFiles(ctx, msg.ID)
	if err != nil || len(files) != 1 || !bytes.Equal(files[0].Content, file) {
		t.Errorf("the file read back differs (%v)", err)
	}
	if back, err := st.RawEmail(ctx, msg.ID); err != nil || !bytes.Equal(back, raw) {
		t.Errorf("the raw mail read back differs (%v)", err)
	}
	var chunks int
	_ = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM attachment_chunks) + (SELECT count(*) FROM raw_email_chunks)`).Scan(&chunks)
	if chunks < 4 {
		t.Errorf("%d chunks stored, want the large values in chunks", chunks)
	}

	t.Run("OnlyInATransaction", func(t *testing.T) {
		_, err := st.InsertAttachments(ctx, nil, []*store.NewAttachment{{Filename: "big.bin", ContentType: "application/octet-stream",
			Size: int64(len(file)), Content: blob.FromBytes(file), UploadedBy: "alice"}})
		if err == nil || !strings.Contains(err.Error(), "transaction") {
			t.Errorf("err = %v, want a clear refusal outside a transaction", err)
		}
	})
}
