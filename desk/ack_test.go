package desk_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestAcknowledgement(t *testing.T) {
	t.Parallel()

	t.Run("ANewTicketIsAcknowledgedInItsThreadUpToTheDailyLimit", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Ack = &desk.AckConfig{MaxPerDay: 2} })
		var tickets []string
		for _, subject := range []string{"One", "Two", "Three"} {
			out, err := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<"+subject+"@mail.example.com>", subject, "Hi."))
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, out.TicketID)
		}
		for i, id := range tickets {
			acks := ofDirection(w.messages(t, id), vocab.DirectionAcknowledgement)
			if want := map[bool]int{true: 1, false: 0}[i < 2]; len(acks) != want {
				t.Errorf("ticket %d has %d acknowledgements, want %d", i+1, len(acks), want)
			}
		}
		w.deliverAll(t)
		if got := w.smtp.Deliveries(); len(got) != 2 {
			t.Errorf("%d acknowledgements sent, want 2", len(got))
		}
	})

	t.Run("NoAcknowledgementAnswersAMachine", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Ack = &desk.AckConfig{} })
		for _, m := range []*desk.InboundMail{
			mailFrom("no-reply@shop.example", "<n1@shop.example>", "Your order", "Thanks."),
			func() *desk.InboundMail {
				m := mailFrom(bram.Email, "<n2@mail.example.com>", "Out of office", "Away.")
				m.Automatic, m.NoAutoReply = true, true
				return m
			}(),
		} {
			if _, err := w.desk.FileInbound(w.ctx, support, m); err != nil {
				t.Fatal(err)
			}
		}
		if jobs := w.queue.of("email"); len(jobs) != 0 {
			t.Errorf("%d acknowledgements queued to machines", len(jobs))
		}
	})

	t.Run("AnAcknowledgementToANewSenderRepeatsNothingItChose", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Ack = &desk.AckConfig{} })
		m := mailFrom("victim@example.org", "<p1@attacker.example>", "Claim your prize at http://evil.example/win", "Hi.")
		m.FromName = "Prize Desk http://evil.example"
		out, err := w.desk.FileInbound(w.ctx, support, m)
		if err != nil {
			t.Fatal(err)
		}
		w.deliverAll(t)
		got := w.smtp.Deliveries()
		if len(got) != 1 {
			t.Fatalf("%d acknowledgements sent, want 1", len(got))
		}
		if raw := string(got[0].Raw); strings.Contains(raw, "evil.example") || !strings.Contains(raw, out.TicketID) {
			t.Errorf("the acknowledgement repeats the sender's words:\n%s", raw)
		}
	})

	t.Run("NoAcknowledgementToAFailVerdictAndFewAnHourToAll", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Ack = &desk.AckConfig{MaxPerHour: 2} })
		forged := mailFrom(ada.Email, "<f1@attacker.example>", "Hello", "Hi.")
		forged.Verdict = vocab.VerdictFail
		if _, err := w.desk.FileInbound(w.ctx, support, forged); err != nil {
			t.Fatal(err)
		}
		if n := len(w.queue.of("email")); n != 0 {
			t.Fatalf("%d acknowledgements of a mail whose sender's domain disowns it", n)
		}
		for i := range 4 {
			from := fmt.Sprintf("sender%d@example.org", i)
			if _, err := w.desk.FileInbound(w.ctx, support, mailFrom(from, fmt.Sprintf("<h%d@example.org>", i), "Hello", "Hi.")); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(w.queue.of("email")); n != 2 {
			t.Errorf("%d acknowledgements to 4 senders in an hour, want the cap of 2", n)
		}
	})

	t.Run("TheDailyLimitHoldsForTicketsOpenedAtOnce", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Ack = &desk.AckConfig{MaxPerDay: 2} })
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if _, _, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "At once", Body: "Hi."}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := len(w.queue.of("email")); n != 2 {
			t.Errorf("%d acknowledgements of 8 tickets opened at once, want the daily limit of 2", n)
		}
	})

	// A customer at its daily limit, as one who writes often is, is
	// refused without the claim's lock: its tickets wait for no other
	// ticket's claim. One under its limit waits, as before.
	t.Run("AnAddressAtItsLimitWaitsForNoClaim", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Ack = &desk.AckConfig{MaxPerDay: 1} })
		w.open(t, "First", "Hi.") // Ada's one acknowledgement today
		for _, tc := range []struct {
			customer store.InsertCustomerParams
			waits    bool
		}{{ada, false}, {bram, true}} {
			holder, err := w.pool.Begin(w.ctx)
			if err != nil {
				t.Fatal(err)
			}
			var pid uint32
			if err := holder.QueryRow(w.ctx, `SELECT pg_backend_pid() FROM pg_advisory_xact_lock(hashtext(current_schema()), hashtext('helpdesk.ack.' || lower($1)))`,
				tc.customer.Email).Scan(&pid); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, _, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: tc.customer.ID, Subject: "Again", Body: "Hi."})
				done <- err
			}()
			storetest.AwaitBlockedBy(t, w.pool, pid, done)
			waited := len(done) == 0 // AwaitBlockedBy puts an outcome back
			_ = holder.Rollback(w.ctx)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			switch {
			case waited && !tc.waits:
				t.Errorf("%s, at its limit, waits for another claim of its address", tc.customer.ID)
			case !waited && tc.waits:
				t.Errorf("%s, under its limit, was acknowledged without waiting for the claim in flight", tc.customer.ID)
			}
		}
		if n := len(w.queue.of("email")); n != 2 {
			t.Errorf("%d acknowledgements, want Ada's first and Bram's", n)
		}
	})
}
