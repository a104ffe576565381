package desk_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestDeliver(t *testing.T) {
	t.Parallel()

	t.Run("TheBytesAreKeptBeforeTheFirstSendAndASecondDeliveryIsDone", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		w.smtp.Script(smtptest.Fault{DropAfterBody: true}) // the lost acknowledgement
		ticket := w.open(t, "Parcel", "Where is it?")
		msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "On its way."})
		if err != nil {
			t.Fatal(err)
		}
		first := w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobID, MessageID: msg.ID, Attempt: 1, MaxAttempts: 3})
		if first.Step != desk.Retry {
			t.Fatalf("after a lost acknowledgement: %+v, want a retry", first)
		}
		if em, _ := w.st.GetOutboundEmail(w.ctx, msg.ID); em.State != store.DeliveryUncertain || em.Rendered == nil {
			t.Fatalf("delivery %s with %d bytes kept, want uncertain with its bytes", em.State, len(em.Rendered))
		}
		second := w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobID, MessageID: msg.ID, Attempt: 2, MaxAttempts: 3})
		again := w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobID, MessageID: msg.ID, Attempt: 3, MaxAttempts: 3})
		got := w.smtp.Deliveries()
		if second.Step != desk.Done || again.Step != desk.Done || len(got) != 2 || !bytes.Equal(got[0].Raw, got[1].Raw) {
			t.Fatalf("steps %+v then %+v, %d deliveries: want the same bytes twice, then nothing", second, again, len(got))
		}
		if id := *msg.EmailMessageID; !bytes.Contains(got[1].Raw, []byte("Message-Id: "+id)) ||
			bytes.Contains(got[1].Raw, []byte("References: "+id)) {
			t.Errorf("the resend does not carry its own Message-ID %s, or cites it", id)
		}
	})

	// deliverHeld delivers each reply while the deliveries' combiner has
	// its one transaction held at the database, lets it go once every
	// delivery waits in it (or has ended), and returns their steps, in the
	// replies' order. between runs while they wait.
	deliverHeld := func(t *testing.T, w *world, ticketID string, msgs []*store.Message, jobs []int64, between func()) []desk.Next {
		t.Helper()
		c := w.desk.CombineDeliveries(1, 32)
		held, release, busy := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() { busy <- c.Run(w.ctx, func(*store.Tx) error { close(held); <-release; return nil }) }()
		<-held
		steps := make([]chan desk.Next, len(msgs))
		ended := func() (n int) {
			for _, s := range steps {
				n += len(s)
			}
			return n
		}
		for i := range msgs {
			steps[i] = make(chan desk.Next, 1)
			go func() {
				steps[i] <- w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobs[i], MessageID: msgs[i].ID, Attempt: 1, MaxAttempts: 3, TicketID: ticketID})
			}()
		}
		for c.Waiting()+ended() < len(msgs) {
			time.Sleep(time.Millisecond)
		}
		if between != nil {
			between()
		}
		close(release)
		if err := <-busy; err != nil {
			t.Fatal(err)
		}
		out := make([]desk.Next, len(msgs))
		for i, s := range steps {
			out[i] = <-s
		}
		return out
	}

	// Replies delivered while the combiner's one transaction is held: each
	// reply's bytes, kept, and how many transactions kept them all.
	deliverAtOnce := func(t *testing.T, attachment []byte) (transactions int) {
		t.Helper()
		w := newWorld(t, true)
		ticket := w.open(t, "Parcel", "Where is it?")
		const n = 6
		msgs, jobs := make([]*store.Message, n), make([]int64, n)
		for i := range n {
			p := &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: fmt.Sprintf("Reply number %d.", i)}
			if attachment != nil {
				err := store.Run(w.ctx, w.pool, func(tx *store.Tx) error {
					up, err := w.desk.StoreUploadTx(w.ctx, tx, &desk.Upload{Agent: "alice", Filename: "scan.bin",
						ContentType: "application/octet-stream", Content: attachment})
					if err == nil {
						p.Attachments = []int64{up.ID}
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if msgs[i], jobs[i], err = w.reply(t, p); err != nil {
				t.Fatal(err)
			}
		}
		for _, step := range deliverHeld(t, w, ticket.ID, msgs, jobs, nil) {
			if step.Step != desk.Done {
				t.Errorf("step %+v, want done", step)
			}
		}
		sent := map[string]int{}
		for _, d := range w.smtp.Deliveries() {
			sent[string(d.Raw)]++
		}
		ids := []int64{}
		for i, m := range msgs {
			ids = append(ids, m.ID)
			em, err := w.st.GetOutboundEmail(w.ctx, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if em.State != store.DeliverySent || em.Attempts != 1 || sent[string(em.Rendered)] != 1 ||
				!bytes.Contains(em.Rendered, []byte(fmt.Sprintf("Reply number %d.", i))) {
				t.Errorf("reply %d: %s after %d attempts, its bytes sent %d times: want sent once, as its own",
					i, em.State, em.Attempts, sent[string(em.Rendered)])
			}
		}
		// now() is its transaction's start: one time, one transaction.
		if err := w.pool.QueryRow(w.ctx, `SELECT count(DISTINCT rendered_at) FROM outbound_emails WHERE message_id = ANY($1)`,
			ids).Scan(&transactions); err != nil {
			t.Fatal(err)
		}
		return transactions
	}

	t.Run("RepliesDeliveredAtOnceKeepTheirBytesInOneTransactionEachSentAsItsOwn", func(t *testing.T) {
		t.Parallel()
		if n := deliverAtOnce(t, nil); n != 1 {
			t.Errorf("the bytes were kept in %d transactions, want one", n)
		}
	})

	// A group's parameters are copied whole into one buffer: a large mail's
	// bytes are not held with 31 others.
	t.Run("RepliesOfMoreThanAQuarterMiBKeepTheirBytesEachAlone", func(t *testing.T) {
		t.Parallel()
		if n := deliverAtOnce(t, bytes.Repeat([]byte("scan\x00\xff"), 300<<10/6)); n < 2 {
			t.Errorf("the bytes of six large replies were kept in %d transactions, want each in its own", n)
		}
	})

	// The keep's answer checks nothing, so that it may ride with a group's
	// commit: a mail deleted while its keep waits is told by what was kept.
	t.Run("AMailDeletedBeforeItsBytesAreKeptIsCancelledUnsent", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		ticket := w.open(t, "Parcel", "Where is it?")
		msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "On its way."})
		if err != nil {
			t.Fatal(err)
		}
		steps := deliverHeld(t, w, ticket.ID, []*store.Message{msg}, []int64{jobID}, func() {
			if _, err := w.pool.Exec(w.ctx, `DELETE FROM outbound_emails WHERE message_id = $1`, msg.ID); err != nil {
				t.Fatal(err)
			}
		})
		if steps[0].Step != desk.Cancel || !strings.Contains(steps[0].Err.Error(), "MessageNotFound") || len(w.smtp.Deliveries()) != 0 {
			t.Errorf("step %+v after %d deliveries, want MessageNotFound and none", steps[0], len(w.smtp.Deliveries()))
		}
	})

	t.Run("AJobThatNamesAnotherTicketStillRendersTheMessagesOwn", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		ticket := w.open(t, "Parcel", "Where is it?")
		other := w.open(t, "Invoice", "Wrong amount.")
		for _, named := range []string{other.ID, "T-999999"} {
			msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "On its way."})
			if err != nil {
				t.Fatal(err)
			}
			n := w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobID, MessageID: msg.ID, Attempt: 1, MaxAttempts: 3, TicketID: named})
			got := w.smtp.Deliveries()
			if n.Step != desk.Done || len(got) == 0 {
				t.Fatalf("job naming %s: step %+v, want the reply sent", named, n)
			}
			if raw := got[len(got)-1].Raw; !bytes.Contains(raw, []byte("Parcel")) || bytes.Contains(raw, []byte("Invoice")) ||
				!bytes.Contains(raw, []byte("Where is it?")) {
				t.Errorf("job naming %s: the mail is not the reply on %s, quoting its customer:\n%s", named, ticket.ID, raw)
			}
		}
	})

	t.Run("ARefusalForGoodIsABounceAndSuppressesTheAddress", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		w.smtp.SetFallback(smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{ada.Email: smtptest.ErrNoSuchUser}})
		ticket := w.open(t, "Parcel", "Hi.")
		msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Hello."})
		if err != nil {
			t.Fatal(err)
		}
		n := w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobID, MessageID: msg.ID, Attempt: 1, MaxAttempts: 3})
		if n.Step != desk.Cancel {
			t.Fatalf("step %+v, want a cancel: a retry would get the same", n)
		}
		notes := ofDirection(w.messages(t, ticket.ID), vocab.DirectionNote)
		if len(notes) != 1 || !strings.Contains(notes[0].Body, "5.1.1") || w.ticket(t, ticket.ID).Status != vocab.StatusOpen {
			t.Errorf("notes %+v, ticket %s: want a note naming the status, the ticket open again", notes, w.ticket(t, ticket.ID).Status)
		}
		// The next reply to the address fails at once, without SMTP.
		before := w.smtp.Connections()
		next, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Again."})
		if err != nil {
			t.Fatal(err)
		}
		if n := w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobID, MessageID: next.ID, Attempt: 1, MaxAttempts: 3}); n.Step != desk.Cancel {
			t.Errorf("step %+v", n)
		}
		if em, _ := w.st.GetOutboundEmail(w.ctx, next.ID); em.State != store.DeliverySuppressed || w.smtp.Connections() != before {
			t.Errorf("delivery %s after %d connections, want suppressed with none", em.State, w.smtp.Connections()-before)
		}
	})

	t.Run("ARelayThatAsksToSlowDownSnoozesWithoutAnAttempt", func(t *testing.T) {
		t.Parallel()
		// A pause long enough to be seen however slow the machine is.
		w := newWorld(t, true, func(c *desk.Config) { c.Delivery.Backoff = backoff.Backoff{Base: time.Hour, Cap: time.Hour} })
		w.smtp.Script(smtptest.Fault{RejectConnect: smtptest.ErrServiceNotAvailable})
		ticket := w.open(t, "Parcel", "Hi.")
		msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Hello."})
		if err != nil {
			t.Fatal(err)
		}
		n := w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobID, MessageID: msg.ID, Attempt: 1, MaxAttempts: 1})
		if n.Step != desk.Snooze || n.Wait <= 0 {
			t.Errorf("step %+v, want a snooze: a relay's 421 spends no attempt, even the last", n)
		}
		if paused, err := w.st.RelaysPaused(w.ctx); err != nil || paused != 1 {
			t.Errorf("%d relays paused (%v), want the relay", paused, err)
		}
	})

	t.Run("AMailUndeliveredPastItsAgeFails", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Delivery.GiveUpAfter = time.Millisecond })
		ticket := w.open(t, "Parcel", "Hi.")
		msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Hello."})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		n := w.desk.Deliver(w.ctx, desk.Attempt{JobID: jobID, MessageID: msg.ID, Attempt: 1, MaxAttempts: 3})
		if n.Step != desk.Cancel || !strings.Contains(n.Err.Error(), "EmailExpired") || len(w.smtp.Deliveries()) != 0 {
			t.Errorf("step %+v after %d deliveries, want EmailExpired and none", n, len(w.smtp.Deliveries()))
		}
	})
}
