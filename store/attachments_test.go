package store_test

import (
	"context"
	"testing"
	"time"

	"helpdesk/store"
	"helpdesk/store/storetest"
	"helpdesk/vocab"
)

func TestPruneAttachments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	if _, err := st.InsertCustomer(ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "ada@example.com", Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Hello"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionInbound, Author: "x", Body: "…",
		Attachments: []*store.NewAttachment{{Filename: "kept.pdf", ContentType: "application/pdf", Size: 4, Content: []byte("kept")}}})
	if err != nil {
		t.Fatal(err)
	}
	// Two unsent uploads: one of the same bytes as the message's file, one of its own.
	if _, err := st.InsertAttachments(ctx, nil, []*store.NewAttachment{
		{Filename: "same.pdf", ContentType: "application/pdf", Size: 4, Content: []byte("kept"), UploadedBy: "alice"},
		{Filename: "alone.pdf", ContentType: "application/pdf", Size: 5, Content: []byte("alone"), UploadedBy: "alice"},
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
