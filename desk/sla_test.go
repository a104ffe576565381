package desk_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

var admin = vocab.Agent("root")

// slaWorld has alice (billing) and the billing admin dora, and a policy
// for priority 2 on the 24x7 calendar: first response 1h, next response
// 2h, resolution 8h.
func slaWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(t, true)
	w.agent(t, "alice", "billing")
	w.agent(t, "dora", "billing")
	if err := w.st.SetAdmin(w.ctx, "dora", true); err != nil {
		t.Fatal(err)
	}
	if _, err := w.desk.SetSLAPolicy(w.ctx, admin, &store.SLAPolicy{Priority: 2, FirstResponse: time.Hour,
		NextResponse: 2 * time.Hour, Resolution: 8 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	return w
}

// openTimed opens a ticket of Ada's and triages it into billing at
// priority 2, assigned to alice.
func (w *world) openTimed(t *testing.T) *store.Ticket {
	t.Helper()
	return w.openFetched(t, time.Time{})
}

// openFetched is openTimed of a mail fetched from a mailbox that it
// reached at arrived (zero: a mail filed as it arrives).
func (w *world) openFetched(t *testing.T, arrived time.Time) *store.Ticket {
	t.Helper()
	ticket, _, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "Charged twice",
		Body: "I was charged twice for order 4711.", Arrived: arrived})
	if err != nil {
		t.Fatal(err)
	}
	w.triage(t, ticket.ID, "billing")
	alice := "alice"
	if _, err := w.desk.ChangeTicket(w.ctx, admin, ticket.ID, &desk.Change{Assignee: &alice}); err != nil {
		t.Fatal(err)
	}
	return w.ticket(t, ticket.ID)
}

// age moves a ticket's past, and its policy's, back by d: as if all of it
// had happened d earlier.
func (w *world) age(t *testing.T, ticketID string, d time.Duration) {
	t.Helper()
	for _, q := range []string{
		`UPDATE tickets SET created_at = created_at - $2::interval WHERE id = $1`,
		`UPDATE messages SET created_at = created_at - $2::interval, arrived_at = arrived_at - $2::interval WHERE ticket_id = $1`,
		`UPDATE ticket_events SET created_at = created_at - $2::interval WHERE ticket_id = $1`,
		`UPDATE sla_policies SET updated_at = updated_at - $2::interval WHERE $1 <> ''`,
	} {
		if _, err := w.pool.Exec(w.ctx, q, ticketID, d.String()); err != nil {
			t.Fatal(err)
		}
	}
}

// agePolicies moves the SLA policies' setting back by d.
func (w *world) agePolicies(t *testing.T, d time.Duration) {
	t.Helper()
	if _, err := w.pool.Exec(w.ctx, `UPDATE sla_policies SET updated_at = updated_at - $1::interval`, d.String()); err != nil {
		t.Fatal(err)
	}
}

func (w *world) retime(t *testing.T, ticketID string) *desk.Retimed {
	t.Helper()
	out, err := w.desk.RetimeTicket(w.ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// slaMail is the subjects and recipients of the SLA mail delivered so far.
func (w *world) slaMail(t *testing.T) []string {
	t.Helper()
	w.deliverAll(t)
	subject := regexp.MustCompile(`(?m)^Subject: (.*SLA.*?)\r?$`)
	var out []string
	for _, d := range w.smtp.Deliveries() {
		if m := subject.FindSubmatch(d.Raw); m != nil {
			out = append(out, strings.Join(d.To, ",")+" "+string(m[1]))
		}
	}
	slices.Sort(out)
	return out
}

func TestSLAClocks(t *testing.T) {
	t.Parallel()

	t.Run("WithoutAPolicyNothingIsTimed", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Hello", "Hi.")
		w.triage(t, ticket.ID, "billing")
		if got := w.queue.of("sla"); len(got) != 0 {
			t.Errorf("sla jobs %v without a policy", got)
		}
		if s, err := w.desk.TicketSLA(w.ctx, ticket.ID); err != nil || s != nil {
			t.Errorf("sla %+v (%v), want none", s, err)
		}
	})

	t.Run("ATriagedTicketGetsItsDueTimesAndItsNextLook", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		ticket := w.openTimed(t)
		if len(w.queue.of("sla")) == 0 {
			t.Fatal("no look at the clocks was queued by the triage")
		}
		out := w.retime(t, ticket.ID)
		s, _ := w.desk.TicketSLA(w.ctx, ticket.ID)
		if s == nil || s.FirstResponseDue == nil || !s.FirstResponseDue.Equal(ticket.CreatedAt.Add(time.Hour)) ||
			!s.ResolutionDue.Equal(ticket.CreatedAt.Add(8*time.Hour)) || s.NextResponseDue != nil || s.Paused {
			t.Fatalf("sla %+v, want first response at +1h and resolution at +8h", s)
		}
		if !out.Next.Equal(ticket.CreatedAt.Add(48 * time.Minute)) {
			t.Errorf("next look at %s, want the first response's warning at +48m", out.Next)
		}
		if q := w.queue.of("sla"); !q[len(q)-1].At.Equal(out.Next) {
			t.Errorf("queued %+v, want a look at %s", q[len(q)-1], out.Next)
		}
	})

	t.Run("ATicketLeftAloneWarnsOnceAndBreachesOnce", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		ticket := w.openTimed(t)
		w.age(t, ticket.ID, 50*time.Minute)
		if out := w.retime(t, ticket.ID); len(out.Warnings) != 1 || len(out.Breaches) != 0 {
			t.Fatalf("at +50m: %+v, want one warning", out)
		}
		if out := w.retime(t, ticket.ID); len(out.Warnings)+len(out.Breaches) != 0 {
			t.Errorf("a second look sent %+v again", out)
		}
		w.age(t, ticket.ID, 15*time.Minute)
		if out := w.retime(t, ticket.ID); len(out.Breaches) != 1 || out.Breaches[0].Target != "first_response" {
			t.Fatalf("at +65m: %+v, want the first response's breach", out)
		}
		w.retime(t, ticket.ID)

		mail := w.slaMail(t)
		want := []string{
			"alice@support.example.com [" + ticket.ID + "] SLA breached: first response was due",
			"alice@support.example.com [" + ticket.ID + "] SLA warning: first response due",
			"dora@support.example.com [" + ticket.ID + "] SLA breached: first response was due",
		}
		if len(mail) != len(want) {
			t.Fatalf("SLA mail %q, want %q", mail, want)
		}
		for i := range want {
			if !strings.HasPrefix(mail[i], want[i]) {
				t.Errorf("mail %d: %q, want %q…", i, mail[i], want[i])
			}
		}
		var warned, breached int
		for _, e := range w.events(t, ticket.ID) {
			warned += strings.Count(e, "sla.warning")
			breached += strings.Count(e, "sla.breached")
		}
		if warned != 1 || breached != 1 {
			t.Errorf("events %v: want one sla.warning and one sla.breached", w.events(t, ticket.ID))
		}
		s, _ := w.desk.TicketSLA(w.ctx, ticket.ID)
		var breaches []desk.SLABreach
		if err := json.Unmarshal(s.Breaches, &breaches); err != nil || len(breaches) != 1 || breaches[0].Target != "first_response" {
			t.Errorf("breaches %s (%v)", s.Breaches, err)
		}
	})

	t.Run("AnAnswerInTimeMeetsTheFirstResponse", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		ticket := w.openTimed(t)
		w.age(t, ticket.ID, 30*time.Minute)
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Refunded."}); err != nil {
			t.Fatal(err)
		}
		w.retime(t, ticket.ID)
		w.age(t, ticket.ID, 2*time.Hour)
		out := w.retime(t, ticket.ID)
		s, _ := w.desk.TicketSLA(w.ctx, ticket.ID)
		if len(out.Breaches) != 0 || s.FirstResponseDue != nil || string(s.Breaches) != "[]" {
			t.Errorf("after an answer at +30m: %+v, sla %+v %s", out, s, s.Breaches)
		}
	})

	t.Run("PendingPausesResolutionAndTheCustomerStartsANextResponse", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		ticket := w.openTimed(t)
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Which card?",
			Status: vocab.StatusPending}); err != nil {
			t.Fatal(err)
		}
		w.retime(t, ticket.ID)
		if s, _ := w.desk.TicketSLA(w.ctx, ticket.ID); !s.Paused || s.ResolutionDue != nil {
			t.Errorf("pending: %+v, want resolution paused", s)
		}
		if _, err := w.desk.AddCustomerMessage(w.ctx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: vocab.Customer(ada.ID),
			Body: "The Visa one."}); err != nil {
			t.Fatal(err)
		}
		w.retime(t, ticket.ID)
		s, _ := w.desk.TicketSLA(w.ctx, ticket.ID)
		if s.Paused || s.ResolutionDue == nil || s.NextResponseDue == nil {
			t.Errorf("after the customer wrote: %+v, want resolution running and a next response due", s)
		}
	})

	t.Run("SolvedStopsTheClocks", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		ticket := w.openTimed(t)
		solved := vocab.StatusSolved
		if _, err := w.desk.ChangeTicket(w.ctx, admin, ticket.ID, &desk.Change{Status: &solved}); err != nil {
			t.Fatal(err)
		}
		out := w.retime(t, ticket.ID)
		s, _ := w.desk.TicketSLA(w.ctx, ticket.ID)
		if !out.Next.IsZero() || s.FirstResponseDue != nil || s.ResolutionDue != nil {
			t.Errorf("solved: next look %s, sla %+v", out.Next, s)
		}
	})

	t.Run("AChangedPolicyRecomputesFromTheStart", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		ticket := w.openTimed(t)
		w.retime(t, ticket.ID)
		queued := len(w.queue.of("sla"))
		if _, err := w.desk.SetSLAPolicy(w.ctx, admin, &store.SLAPolicy{Priority: 2, Team: "billing", FirstResponse: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		if len(w.queue.of("sla")) != queued+1 {
			t.Errorf("setting a policy queued %d looks, want one for the ticket it times", len(w.queue.of("sla"))-queued)
		}
		w.retime(t, ticket.ID)
		if s, _ := w.desk.TicketSLA(w.ctx, ticket.ID); !s.FirstResponseDue.Equal(ticket.CreatedAt.Add(15*time.Minute)) || s.ResolutionDue != nil {
			t.Errorf("under the team's policy: %+v, want first response at +15m and no resolution target", s)
		}
	})

	t.Run("AMailFetchedLateCountsFromWhenItReachedItsMailbox", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		w.agePolicies(t, time.Hour)
		// Fetched 55 minutes after it reached the mailbox: its warning
		// (+48m) came before the desk had it, its breach (+1h) comes after.
		arrived := time.Now().Add(-55 * time.Minute).Truncate(time.Microsecond)
		ticket := w.openFetched(t, arrived)
		out := w.retime(t, ticket.ID)
		s, _ := w.desk.TicketSLA(w.ctx, ticket.ID)
		if s == nil || !s.FirstResponseDue.Equal(arrived.Add(time.Hour)) || !s.ResolutionDue.Equal(arrived.Add(8*time.Hour)) {
			t.Fatalf("sla %+v, want first response at arrival +1h and resolution at arrival +8h (arrived %s, filed %s)",
				s, arrived, ticket.CreatedAt)
		}
		if len(out.Warnings)+len(out.Breaches) != 0 {
			t.Errorf("sent %+v: the warning was due before the desk had the mail", out)
		}
		w.age(t, ticket.ID, 10*time.Minute)
		if out := w.retime(t, ticket.ID); len(out.Breaches) != 1 || out.Breaches[0].Target != "first_response" {
			t.Fatalf("at arrival +65m: %+v, want the first response's breach, due after the mail was filed", out)
		}
		if mail := w.slaMail(t); len(mail) != 2 || strings.Contains(strings.Join(mail, "\n"), "warning") {
			t.Errorf("SLA mail %q, want the breach to alice and dora, no warning", mail)
		}
	})

	t.Run("ABacklogFetchedPastItsTargetsShowsItsBreachesAndMailsNobody", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		w.agePolicies(t, 30*24*time.Hour)
		ticket := w.openFetched(t, time.Now().Add(-72*time.Hour))
		if _, _, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "Sorry for the wait."}); err != nil {
			t.Fatal(err)
		}
		w.age(t, ticket.ID, 5*time.Hour) // the answer went five hours ago
		// The customer's answer, fetched three hours after it came: its
		// next response (2h) was due an hour before the desk had it.
		if _, err := w.desk.AddCustomerMessage(w.ctx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: vocab.Customer(ada.ID),
			Body: "Still charged twice.", Arrived: time.Now().Add(-3 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		out := w.retime(t, ticket.ID)
		w.retime(t, ticket.ID)
		if len(out.Warnings)+len(out.Breaches) != 0 {
			t.Errorf("sent %+v for a backlog", out)
		}
		s, _ := w.desk.TicketSLA(w.ctx, ticket.ID)
		var breached []string
		var breaches []desk.SLABreach
		if err := json.Unmarshal(s.Breaches, &breaches); err != nil {
			t.Fatal(err)
		}
		for _, b := range breaches {
			breached = append(breached, string(b.Target))
		}
		slices.Sort(breached)
		if !s.Breached || strings.Join(breached, ",") != "first_response,next_response,resolution" {
			t.Errorf("breaches %s, want the first response, the next response and the resolution shown", s.Breaches)
		}
		if mail := w.slaMail(t); len(mail) != 0 {
			t.Errorf("SLA mail %q for a backlog", mail)
		}
		for _, e := range w.events(t, ticket.ID) {
			if strings.Contains(e, "sla.") {
				t.Errorf("event %s for a backlog", e)
			}
		}
	})

	t.Run("BadSettingsAreRefused", func(t *testing.T) {
		t.Parallel()
		w := slaWorld(t)
		for name, c := range map[string]struct {
			p    store.SLAPolicy
			want error
		}{
			"priority 9":       {store.SLAPolicy{Priority: 9, FirstResponse: time.Hour}, desk.ErrInvalidSLA},
			"no target":        {store.SLAPolicy{Priority: 1}, desk.ErrInvalidSLA},
			"negative":         {store.SLAPolicy{Priority: 1, FirstResponse: -time.Hour}, desk.ErrInvalidSLA},
			"unknown team":     {store.SLAPolicy{Priority: 1, FirstResponse: time.Hour, Team: "nobody"}, desk.ErrUnknownTeam},
			"unknown calendar": {store.SLAPolicy{Priority: 1, FirstResponse: time.Hour, Calendar: "office"}, desk.ErrUnknownCalendar},
		} {
			if _, err := w.desk.SetSLAPolicy(w.ctx, admin, &c.p); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", name, err, c.want)
			}
		}
		if _, err := w.desk.SetCalendar(w.ctx, admin, &desk.CalendarParams{Name: "office", TimeZone: "Mars/Base", Hours: "Mon 09:00-17:00"}); !errors.Is(err, desk.ErrInvalidSLA) {
			t.Errorf("a bad time zone: %v", err)
		}
		if _, err := w.desk.SetCalendar(w.ctx, admin, &desk.CalendarParams{Name: "24x7", TimeZone: "UTC", Hours: "Mon 09:00-17:00"}); !errors.Is(err, desk.ErrInvalidSLA) {
			t.Errorf("replacing the built-in: %v", err)
		}
		c, err := w.desk.SetCalendar(w.ctx, admin, &desk.CalendarParams{Name: "office", TimeZone: "Europe/Berlin", Hours: "Mon-Fri 09:00-17:00",
			Holidays: []string{"2026-12-25"}})
		if err != nil || c.Hours != "Mon-Fri 09:00-17:00" ||
			!slices.Equal(c.Holidays, []string{"2026-12-25"}) {
			t.Errorf("calendar %+v (%v)", c, err)
		}
		due, err := w.desk.Due(w.ctx, "office", time.Date(2026, 12, 24, 16, 30, 0, 0, time.UTC), time.Hour)
		if err != nil || due.Format(time.RFC3339) != "2026-12-28T10:00:00+01:00" {
			t.Errorf("due %s (%v): Thursday 17:30 in Berlin plus 1h, over Christmas and a weekend, is Monday 10:00", due, err)
		}
	})
}
