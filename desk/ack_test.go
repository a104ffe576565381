package desk_test

import (
	"testing"

	"helpdesk/desk"
	"helpdesk/vocab"
)

func TestAcknowledgement(t *testing.T) {
	t.Parallel()

	t.Run("ANewTicketIsAcknowledgedInItsThreadUpToTheDailyLimit", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.Ack = &desk.AckConfig{MaxPerDay: 2} })
		var tickets []string
		for _, subject := range []string{"One", "Two", "Three"} {
			out, err := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<"+subject+"@mail.example.com>", subject, "Hi."), nil)
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
			if _, err := w.desk.FileInbound(w.ctx, support, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		if jobs := w.queue.of("email"); len(jobs) != 0 {
			t.Errorf("%d acknowledgements queued to machines", len(jobs))
		}
	})
}
