package desk_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// openOf opens a ticket of the customer, as the API would.
func (w *world) openOf(t *testing.T, customerID, subject, body string) *store.Ticket {
	t.Helper()
	ticket, _, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: customerID, Subject: subject, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return w.ticket(t, ticket.ID)
}

func (w *world) merge(p *desk.MergeParams) (*desk.Merged, error) {
	return w.desk.MergeTicket(w.ctx, vocab.Agent("alice"), p)
}

func TestMergeTicket(t *testing.T) {
	t.Parallel()

	t.Run("TheDuplicatesMessagesMoveAndItClosesWithItsTarget", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		into := w.open(t, "Order 4711 has not arrived", "Where is my kettle?")
		dup := w.open(t, "Still no kettle", "Order 4711, still nothing.")
		if _, err := w.desk.AddNote(w.ctx, vocab.Agent("alice"), dup.ID, "Courier says Tuesday."); err != nil {
			t.Fatal(err)
		}
		triaged := len(w.queue.of("triage"))

		out, err := w.merge(&desk.MergeParams{TicketID: dup.ID, Into: into.ID, Notify: true})
		if err != nil {
			t.Fatal(err)
		}
		if out.TicketID != into.ID || out.Merged != dup.ID || out.TriageJobID == 0 || out.NoticeID == 0 {
			t.Errorf("merged %+v", out)
		}
		if got := w.ticket(t, dup.ID); got.Status != vocab.StatusClosed || deref(got.MergedInto) != into.ID {
			t.Errorf("the duplicate is %s, merged into %q; want closed into %s", got.Status, deref(got.MergedInto), into.ID)
		}
		if left := w.messages(t, dup.ID); len(left) != 0 {
			t.Errorf("%d messages left on the duplicate", len(left))
		}
		msgs := w.messages(t, into.ID)
		bodies := make([]string, len(msgs))
		for i, m := range msgs {
			bodies[i] = m.Body
		}
		joined := strings.Join(bodies, "\n")
		for _, want := range []string{"Where is my kettle?", "Order 4711, still nothing.", "Courier says Tuesday.", "we have joined your request [#" + dup.ID + "]"} {
			if !strings.Contains(joined, want) {
				t.Errorf("the target's thread lacks %q:\n%s", want, joined)
			}
		}
		if notices := ofDirection(msgs, vocab.DirectionOutbound); len(notices) != 1 || notices[0].ID != out.NoticeID {
			t.Errorf("outbound %+v, want the one notice", notices)
		}
		if len(w.queue.of("triage")) != triaged+1 || len(w.queue.of("email")) != 1 {
			t.Errorf("queued %d triage and %d email jobs since, want one of each", len(w.queue.of("triage"))-triaged, len(w.queue.of("email")))
		}
		if ev := w.events(t, dup.ID); !slices.Contains(ev, "merged_into:→"+into.ID) {
			t.Errorf("duplicate's events %v", ev)
		}
		if ev := w.events(t, into.ID); !slices.Contains(ev, "merged:"+dup.ID+"→") {
			t.Errorf("target's events %v", ev)
		}
		if got := w.ticket(t, into.ID); got.FirstResponseAt != nil {
			t.Errorf("the service's notice counts as the first response at %v", got.FirstResponseAt)
		}
	})

	t.Run("WithoutNotifyNobodyIsTold", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true)
		into, dup := w.open(t, "A", "one"), w.open(t, "B", "two")
		out, err := w.merge(&desk.MergeParams{TicketID: dup.ID, Into: into.ID})
		if err != nil || out.NoticeID != 0 || len(w.queue.of("email")) != 0 {
			t.Errorf("merged %+v (%v), %d emails queued", out, err, len(w.queue.of("email")))
		}
	})

	t.Run("AMergeThatCannotBeIsRefusedAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		a, b := w.open(t, "A", "one"), w.open(t, "B", "two")
		closed := w.open(t, "C", "three")
		shut := vocab.StatusClosed
		if _, err := w.desk.ChangeTicket(w.ctx, vocab.Agent("alice"), closed.ID, &desk.Change{Status: &shut}); err != nil {
			t.Fatal(err)
		}
		bramsOwn := w.openOf(t, bram.ID, "D", "four")
		for name, c := range map[string]struct {
			p    desk.MergeParams
			want error
		}{
			"itself":         {desk.MergeParams{TicketID: a.ID, Into: a.ID}, desk.ErrMergeSelf},
			"into closed":    {desk.MergeParams{TicketID: a.ID, Into: closed.ID}, desk.ErrMergeIntoClosed},
			"other customer": {desk.MergeParams{TicketID: bramsOwn.ID, Into: a.ID}, desk.ErrMergeOtherCustomer},
			"unknown":        {desk.MergeParams{TicketID: "T-999999", Into: a.ID}, store.ErrNotFound},
		} {
			if _, err := w.merge(&c.p); !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", name, err, c.want)
			}
		}
		if _, err := w.merge(&desk.MergeParams{TicketID: b.ID, Into: a.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.merge(&desk.MergeParams{TicketID: b.ID, Into: a.ID}); !errors.Is(err, desk.ErrAlreadyMerged) {
			t.Errorf("merging twice: %v, want ErrAlreadyMerged", err)
		}
		if got := w.ticket(t, a.ID); got.Status != vocab.StatusOpen || len(w.messages(t, a.ID)) != 2 {
			t.Errorf("after the refusals the target is %s with %d messages", got.Status, len(w.messages(t, a.ID)))
		}
		if got := w.ticket(t, bramsOwn.ID); got.MergedInto != nil || got.Status != vocab.StatusOpen {
			t.Errorf("a refused merge changed Bram's ticket: %+v", got)
		}
	})

	t.Run("AnotherCustomersTicketMergesOnlyWhenAskedAndThatCustomerMayWriteOn", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		into := w.open(t, "Team order", "Ada here about our order.")
		dup := w.openOf(t, bram.ID, "Team order", "Bram here about the same order.")
		if _, err := w.merge(&desk.MergeParams{TicketID: dup.ID, Into: into.ID, AllowOtherCustomer: true}); err != nil {
			t.Fatal(err)
		}
		out, err := w.desk.FileInbound(w.ctx, support, mailFrom(bram.Email, "<b9@mail.example.com>", "Re: [#"+into.ID+"] Team order", "Any news?"))
		if err != nil || out.Kind != "reply" || out.TicketID != into.ID {
			t.Errorf("Bram writing into the target: %+v (%v), want a reply on %s", out, err, into.ID)
		}
	})

	t.Run("MailAnsweringTheDuplicateLandsInTheTarget", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		into, _ := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<a1@mail.example.com>", "Kettle", "Where is it?"))
		dup, _ := w.desk.FileInbound(w.ctx, support, mailFrom(ada.Email, "<a2@mail.example.com>", "Kettle again", "Still nothing."))
		if _, err := w.merge(&desk.MergeParams{TicketID: dup.TicketID, Into: into.TicketID}); err != nil {
			t.Fatal(err)
		}
		for how, c := range map[string]struct {
			to []string
			m  *desk.InboundMail
		}{
			"headers":      {support, mailFrom(ada.Email, "<a3@mail.example.com>", "Re: Kettle again", "1", "<a2@mail.example.com>")},
			"plus_address": {[]string{"support+" + dup.TicketID + "@" + supportDomain}, mailFrom(ada.Email, "<a4@mail.example.com>", "Hi", "2")},
			"subject":      {support, mailFrom(ada.Email, "<a5@mail.example.com>", "Re: [#"+dup.TicketID+"] Kettle again", "3")},
		} {
			out, err := w.desk.FileInbound(w.ctx, c.to, c.m)
			if err != nil || out.Kind != "reply" || out.TicketID != into.TicketID || out.Matched != how {
				t.Errorf("by %s: filed %+v (%v), want a reply on %s", how, out, err, into.TicketID)
			}
		}
		if got := w.ticket(t, dup.TicketID); got.Status != vocab.StatusClosed || len(w.messages(t, dup.TicketID)) != 0 {
			t.Errorf("the duplicate is %s with %d messages: mail reopened it", got.Status, len(w.messages(t, dup.TicketID)))
		}
	})

	t.Run("AChainOfMergesEndsInOneTicket", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		a, b, c := w.open(t, "A", "one"), w.open(t, "B", "two"), w.open(t, "C", "three")
		if _, err := w.merge(&desk.MergeParams{TicketID: a.ID, Into: b.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.merge(&desk.MergeParams{TicketID: b.ID, Into: c.ID}); err != nil {
			t.Fatal(err)
		}
		if got := w.ticket(t, a.ID); deref(got.MergedInto) != c.ID {
			t.Errorf("the first duplicate points at %q, want %s", deref(got.MergedInto), c.ID)
		}
		if n := len(w.messages(t, c.ID)); n != 3 {
			t.Errorf("the last ticket holds %d messages, want 3", n)
		}
	})
}
