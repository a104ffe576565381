package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, st := withAda(t)
	count := func(t *testing.T, table string) (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("NumbersTakenFirstNameTheRowsWrittenLater", func(t *testing.T) {
		var (
			ticketID  string
			messageID int64
			now       time.Time
			claim     store.Claim
			ticket    store.Ticket
			message   store.Message
		)
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			var first store.Batch
			first.ClaimIdempotencyKey("customer:C-0001", "k1", []byte("fp"), time.Hour, &claim)
			first.NextTicketID(&ticketID, &now)
			first.NextMessageID(&messageID)
			if err := tx.Store().Send(ctx, &first); err != nil {
				return err
			}
			if !claim.Claimed || ticketID == "" || messageID == 0 {
				t.Errorf("after the first batch: claimed %v, ticket %q, message %d", claim.Claimed, ticketID, messageID)
			}
			var b store.Batch
			b.InsertTicket(&store.InsertTicketParams{ID: ticketID, CustomerID: "C-0001", Subject: "Hello"}, &ticket)
			b.InsertMessage(&store.InsertMessageParams{ID: messageID, TicketID: ticketID, Direction: vocab.DirectionInbound, Author: "customer:C-0001", Body: "Hi"}, &message)
			b.SaveIdempotentResponse("customer:C-0001", "k1", 202, []byte(`{}`))
			return tx.Store().Send(ctx, &b)
		})
		if err != nil {
			t.Fatal(err)
		}
		if ticket.ID != ticketID || !ticket.CreatedAt.Equal(now) || message.ID != messageID || message.TicketID != ticketID {
			t.Errorf("wrote ticket %s at %v and message %d on %s; numbers were %s at %v and %d",
				ticket.ID, ticket.CreatedAt, message.ID, message.TicketID, ticketID, now, messageID)
		}
		// A message numbered by the database afterwards does not collide.
		next, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticketID, Direction: vocab.DirectionNote, Author: "agent:alice", Body: "n"})
		if err != nil || next.ID <= messageID {
			t.Errorf("next message %v (%v), want an id after %d", next, err, messageID)
		}
		key, err := st.GetIdempotencyKey(ctx, "customer:C-0001", "k1", time.Hour)
		if err != nil || key.Status != 202 {
			t.Errorf("saved key %+v (%v), want status 202", key, err)
		}
	})

	t.Run("AnErrorInTheLastBatchRollsEverythingBack", func(t *testing.T) {
		tickets, keys := count(t, "tickets"), count(t, "idempotency_keys")
		var claim store.Claim
		var ticket store.Ticket
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			tx.Later(func(b *store.Batch) {
				b.ClaimIdempotencyKey("customer:C-0001", "k2", []byte("fp"), time.Hour, &claim)
			})
			var b store.Batch
			b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Kept?"}, &ticket)
			b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-9999", Subject: "Nobody's"}, &ticket)
			return tx.Store().Send(ctx, &b)
		})
		if !errors.Is(err, store.ErrUnknownCustomer) || !errors.Is(err, store.ErrConflict) {
			t.Errorf("err = %v, want ErrUnknownCustomer, an ErrConflict", err)
		}
		if count(t, "tickets") != tickets || count(t, "idempotency_keys") != keys {
			t.Error("a failed transaction left rows behind")
		}
	})

	t.Run("OutsideATransactionABatchIsAllOrNothing", func(t *testing.T) {
		tickets := count(t, "tickets")
		var b store.Batch
		var ticket store.Ticket
		b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Kept?"}, &ticket)
		b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-9999", Subject: "Nobody's"}, &ticket)
		if err := st.Send(ctx, &b); !errors.Is(err, store.ErrUnknownCustomer) {
			t.Errorf("err = %v, want ErrUnknownCustomer", err)
		}
		if n := count(t, "tickets"); n != tickets {
			t.Errorf("%d tickets after a failed batch, want %d: the first statement's row stayed", n, tickets)
		}
	})

	t.Run("AFailureInTheFirstBatchRunsNothing", func(t *testing.T) {
		var ran bool
		var ticket store.Ticket
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			var first store.Batch
			first.InsertTicket(&store.InsertTicketParams{CustomerID: "C-9999", Subject: "Nobody's"}, &ticket)
			if err := tx.Store().Send(ctx, &first); err != nil {
				return err
			}
			ran = true
			return nil
		})
		if !errors.Is(err, store.ErrUnknownCustomer) || ran {
			t.Errorf("err = %v, ran = %v; want ErrUnknownCustomer and nothing run", err, ran)
		}
	})

	t.Run("ABatchedMessageWritesItsAttachmentsOnlyWithItsNumber", func(t *testing.T) {
		files := []*store.NewAttachment{{Filename: "a.txt", ContentType: "text/plain", Size: 1, Content: blob.FromBytes([]byte("a"))}}
		var b store.Batch
		var m store.Message
		b.InsertMessage(&store.InsertMessageParams{TicketID: "T-1", Direction: vocab.DirectionInbound, Author: "x", Body: "b",
			Attachments: files}, &m)
		if err := st.Send(ctx, &b); err == nil {
			t.Error("a batched message with attachments and no number was sent; its attachments would name no message")
		}

		ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Files"})
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		var numbers store.Batch
		numbers.NextMessageID(&id)
		if err := st.Send(ctx, &numbers); err != nil {
			t.Fatal(err)
		}
		b = store.Batch{}
		b.InsertMessage(&store.InsertMessageParams{ID: id, TicketID: ticket.ID, Direction: vocab.DirectionInbound, Author: "x", Body: "b",
			Attachments: files}, &m)
		if err := st.Send(ctx, &b); err != nil {
			t.Fatal(err)
		}
		got, err := st.MessageAttachmentFiles(ctx, id)
		if err != nil || len(got) != 1 || string(got[0].Content) != "a" {
			t.Errorf("attachments of the batched message: %+v (%v), want a.txt with its content", got, err)
		}
	})

	t.Run("AMailsFilesAreReadToRenderItOnlyUntilItsBytesAreKept", func(t *testing.T) {
		ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Invoice"})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionOutbound,
			Author: "agent:alice", Body: "Attached.", Attachments: []*store.NewAttachment{{Filename: "invoice.pdf",
				ContentType: "application/pdf", Size: 3, Content: blob.FromBytes([]byte("pdf"))}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.InsertOutboundEmail(ctx, &store.InsertOutboundEmailParams{MessageID: msg.ID, FromAddress: "support@example.com",
			Recipients: []store.Recipient{{Address: "ada@example.com", Kind: "to"}}}); err != nil {
			t.Fatal(err)
		}
		toRender := func() []*store.AttachmentFile {
			var files []*store.AttachmentFile
			var b store.Batch
			b.FilesToRender(msg.ID, &files)
			if err := st.Send(ctx, &b); err != nil {
				t.Fatal(err)
			}
			return files
		}
		if files := toRender(); len(files) != 1 || string(files[0].Content) != "pdf" {
			t.Fatalf("before the bytes are kept: %+v, want the file with its content", files)
		}
		var kept store.Kept
		var b store.Batch
		b.KeepRenderedAndMarkSending(msg.ID, "", nil, []byte("rendered"), false, "relay", &kept)
		if err := st.Send(ctx, &b); err != nil {
			t.Fatal(err)
		}
		if files := toRender(); len(files) != 0 {
			t.Errorf("after the bytes are kept: %d files read, want none", len(files))
		}
	})

	t.Run("AnAttemptIsMarkedInTheBatchOnlyWhileTheRelayIsHealthy", func(t *testing.T) {
		msg := outboundEmail(t, ctx, st, "Mail")
		mark := func(relay string) bool {
			var marked bool
			var b store.Batch
			b.MarkSendingUnlessRelayTroubled(msg.ID, false, relay, &marked)
			if err := st.Send(ctx, &b); err != nil {
				t.Fatal(err)
			}
			return marked
		}
		attempts := func() int {
			em, err := st.GetOutboundEmail(ctx, msg.ID)
			if err != nil {
				t.Fatal(err)
			}
			return em.Attempts
		}
		if !mark("healthy.example.com:587") || attempts() != 1 {
			t.Errorf("on a relay that never failed: attempts %d, want the attempt marked", attempts())
		}
		if _, err := st.RecordRelayFault(ctx, "down.example.com:587", "421 4.7.0 slow down", time.Minute, time.Hour); err != nil {
			t.Fatal(err)
		}
		if mark("down.example.com:587") || attempts() != 1 {
			t.Errorf("on a paused relay: attempts %d, want nothing marked (EnterRelay decides first)", attempts())
		}
	})

	t.Run("TheFirstBytesKeptAreTheOnesEveryAttemptSends", func(t *testing.T) {
		msg := outboundEmail(t, ctx, st, "Kept")
		keep := func(raw, inReplyTo, relay string) store.Kept {
			var kept store.Kept
			var b store.Batch
			b.KeepRenderedAndMarkSending(msg.ID, inReplyTo, []string{inReplyTo}, []byte(raw), false, relay, &kept)
			if err := st.Send(ctx, &b); err != nil {
				t.Fatal(err)
			}
			return kept
		}
		first := keep("first bytes", "<a@example.com>", "healthy.example.com:587")
		if string(first.Rendered) != "first bytes" || first.InReplyTo == nil || *first.InReplyTo != "<a@example.com>" || !first.Marked {
			t.Errorf("first keep: %+v, want its own bytes and headers, marked", first)
		}
		// A duplicate delivery that rendered again, on a paused relay.
		if _, err := st.RecordRelayFault(ctx, "paused.example.com:587", "421 4.7.0 slow down", time.Minute, time.Hour); err != nil {
			t.Fatal(err)
		}
		second := keep("second bytes", "<b@example.com>", "paused.example.com:587")
		if string(second.Rendered) != "first bytes" || *second.InReplyTo != "<a@example.com>" || len(second.References) != 1 ||
			second.References[0] != "<a@example.com>" || second.Marked {
			t.Errorf("second keep: %+v, want the first bytes and headers, not marked on a paused relay", second)
		}
		em, err := st.GetOutboundEmail(ctx, msg.ID)
		if err != nil || string(em.Rendered) != "first bytes" || em.Attempts != 1 || em.State != store.DeliverySending {
			t.Errorf("row %+v (%v): want the first bytes, one attempt, sending", em, err)
		}
	})

	// Their answers check nothing, so that a delivery's keep or mark goes
	// with the commit of a group (desk's deliveries): a mail gone is told
	// by what was kept, not by an error that would roll back the others.
	t.Run("AKeepAndAMarkGoWithTheCommitAndAMailGoneFailsNothing", func(t *testing.T) {
		msg := outboundEmail(t, ctx, st, "After")
		var (
			kept   store.Kept
			marked bool
		)
		counted, trips := storetest.CountTrips(ctx)
		err := store.Run(counted, pool, func(tx *store.Tx) error {
			if err := tx.Flush(counted); err != nil { // begun, as a group of two is
				return err
			}
			tx.Later(func(b *store.Batch) {
				b.KeepRenderedAndMarkSending(-1, "", nil, []byte("bytes"), false, "relay", &kept)
				b.MarkSendingUnlessRelayTroubled(msg.ID, false, "healthy.example.com:587", &marked)
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if kept.Rendered != nil || kept.Marked || !marked {
			t.Errorf("kept %+v, the next marked %v: want nothing kept and the next mail marked", kept, marked)
		}
		if trips.N() != 2 || !trips.Together("WITH relay AS", "UPDATE outbound_emails SET", "commit") {
			t.Errorf("%d trips, want BEGIN, then the statements with the commit:\n%s", trips.N(), trips)
		}
	})
}

// outboundEmail writes a ticket with an agent's reply to Ada waiting to be
// delivered, and returns the reply.
func outboundEmail(t *testing.T, ctx context.Context, st *store.Store, subject string) *store.Message {
	t.Helper()
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionOutbound, Author: "agent:alice", Body: "Hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.InsertOutboundEmail(ctx, &store.InsertOutboundEmailParams{MessageID: msg.ID, FromAddress: "support@example.com",
		Recipients: []store.Recipient{{Address: "ada@example.com", Kind: "to"}}}); err != nil {
		t.Fatal(err)
	}
	return msg
}
