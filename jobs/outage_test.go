package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/faulttest"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// relayBehindProxy points the queue's relay at a proxy in front of the fake
// SMTP server, so the test can take the relay away and bring it back.
func relayBehindProxy(t *testing.T, b *emailBundle) *faulttest.Proxy {
	t.Helper()
	proxy := faulttest.Start(t, b.smtp.Addr)
	relay, err := mail.NewRelay(mail.RelayConfig{URL: "smtp://" + proxy.Addr + "?tls=none", HeloName: "helpdesk.example.com",
		DialTimeout: 5 * time.Second, CommandTimeout: 5 * time.Second, BodyTimeout: 5 * time.Second, ReplyTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.Relay, b.DeskConfig.Delivery.Sender = relay, relay
	return proxy
}

func TestRelayOutage(t *testing.T) {
	t.Parallel()

	t.Run("AnOutageOfAHundredBackoffsSpendsNoAttemptAndEveryReplyGoesOnce", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		proxy := relayBehindProxy(t, b)
		// Settings of this test: base 20ms, cap 200ms, 2 attempts; the
		// relay is down for 2s = 100 × base, longer than every attempt's
		// backoff added up, so a single counted attempt would show.
		const base, outage, replies = 20 * time.Millisecond, 2 * time.Second, 10
		b.Config.EmailBackoff = backoff.Backoff{Base: base, Cap: 10 * base}
		b.Config.EmailMaxAttempts = 2
		proxy.Refuse()
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		var jobIDs []int64
		for i := range replies {
			_, jobID := b.Reply(t, q, ticketID, fmt.Sprintf("Reply %d.", i))
			jobIDs = append(jobIDs, jobID)
		}
		// The outage is under way once the relay has been found down and
		// every reply has been tried or is waiting for it.
		waitAllSnoozed(t, q, jobIDs)
		time.Sleep(outage)
		for _, id := range jobIDs {
			// A job shows attempt 1 while it runs: River counts it when it
			// fetches the job and gives it back when the job snoozes.
			if s, err := q.Get(b.Ctx, id); err != nil || (s.State != jobs.StateRunning && s.Attempt != 0) || s.State == jobs.StateDeadLetter {
				t.Errorf("during the outage job %d is %s at attempt %d (%v); want no attempt spent", id, s.State, s.Attempt, err)
			}
		}
		if err := proxy.Pass(); err != nil {
			t.Fatal(err)
		}

		for _, id := range jobIDs {
			s := jobstest.WaitFor(t, q, id, jobs.StateSucceeded, 20*time.Second)
			if s.Attempt != 1 {
				t.Errorf("job %d sent at attempt %d, want 1: the outage spent attempts", id, s.Attempt)
			}
		}
		perBody := map[string]int{}
		for _, d := range b.smtp.Deliveries() {
			for i := range replies {
				if strings.Contains(string(d.Raw), fmt.Sprintf("Reply %d.", i)) {
					perBody[fmt.Sprint(i)]++
				}
			}
		}
		for i := range replies {
			if n := perBody[fmt.Sprint(i)]; n != 1 {
				t.Errorf("reply %d reached the relay %d times, want once", i, n)
			}
		}
		if _, faults, _ := b.Store.RelayPaused(b.Ctx, b.Relay.Name()); faults != 0 {
			t.Errorf("the relay still counts %d faults after it came back", faults)
		}
	})

	t.Run("WhileTheRelayIsDownOneJobAtATimeProbesIt", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		proxy := relayBehindProxy(t, b)
		b.Config.EmailBackoff = backoff.Backoff{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond}
		proxy.Refuse()
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		var jobIDs []int64
		for i := range 20 {
			_, jobID := b.Reply(t, q, ticketID, fmt.Sprintf("Reply %d.", i))
			jobIDs = append(jobIDs, jobID)
		}
		waitAllSnoozed(t, q, jobIDs)
		// Each fault after the first is one probe that found the relay
		// down. Over a second with pauses of 25–200ms, probes go on, a few
		// at most: 20 waiting jobs never all try at once.
		_, before, err := b.Store.RelayPaused(b.Ctx, b.Relay.Name())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		_, after, err := b.Store.RelayPaused(b.Ctx, b.Relay.Name())
		if err != nil {
			t.Fatal(err)
		}
		if probes := after - before; probes > 15 {
			t.Errorf("%d probes in 1s (faults %d → %d); want at most a few, one at a time", probes, before, after)
		}
	})

	t.Run("AReplyUndeliveredPastTheNoticeShowsDelayedWithANoteOnce", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		proxy := relayBehindProxy(t, b)
		b.Config.EmailBackoff = backoff.Backoff{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond}
		b.DeskConfig.Delivery.DelayNotice = 300 * time.Millisecond
		proxy.Refuse()
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "alice", DisplayName: "Alice", Email: "alice@support.example.com"}); err != nil {
			t.Fatal(err)
		}
		if err := b.Store.SetTicketAssignee(b.Ctx, ticketID, "alice"); err != nil {
			t.Fatal(err)
		}
		msg, jobID := b.Reply(t, q, ticketID, "Hello back.")

		deadline := time.Now().Add(15 * time.Second)
		for b.outbound(t, msg.ID).State != store.DeliveryDelayed {
			if time.Now().After(deadline) {
				t.Fatalf("email is %s, never delayed", b.outbound(t, msg.ID).State)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // more waits of the job: still one note
		notes := systemNotes(t, b, ticketID)
		if len(notes) != 1 || !strings.Contains(notes[0], "not delivered after 300ms") || !strings.Contains(notes[0], "SMTPUnavailable") {
			t.Errorf("system notes %q, want one that says the reply is delayed and why", notes)
		}
		if s, _ := q.Get(b.Ctx, jobID); s.State != jobs.StateRunning && s.Attempt != 0 {
			t.Errorf("a delayed reply spent %d attempts", s.Attempt)
		}
		var told int
		if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM messages m JOIN outbound_recipients r ON r.message_id = m.id
			WHERE m.direction = 'notification' AND r.address = 'alice@support.example.com' AND m.body LIKE '%not delivered after%'`).Scan(&told); err != nil || told != 1 {
			t.Errorf("%d mails to the assignee about the delay (%v), want 1", told, err)
		}

		if err := proxy.Pass(); err != nil {
			t.Fatal(err)
		}
		jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 15*time.Second)
		if em := b.outbound(t, msg.ID); em.State != store.DeliverySent {
			t.Errorf("email %s after the relay came back, want sent", em.State)
		}
	})

	t.Run("AReplyIsGivenUpByAgeNotByAttempts", func(t *testing.T) {
		t.Parallel()
		b := setupEmail(t)
		proxy := relayBehindProxy(t, b)
		b.Config.EmailBackoff = backoff.Backoff{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond}
		b.Config.EmailMaxAttempts = 1
		// Long enough for the retry below to be delivered on a busy
		// machine before its age runs out again: with 1s, the retry
		// expired once more in a run of make test (2 cores, -race).
		b.DeskConfig.Delivery.GiveUpAfter = 5 * time.Second
		proxy.Refuse()
		q := b.start(t)
		ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
		msg, jobID := b.Reply(t, q, ticketID, "Hello back.")

		// The relay refused it, and it waits for the relay without spending
		// its one attempt. Its age, which the delivery reads from its row,
		// is then set past GiveUpAfter rather than waited for.
		waitAllSnoozed(t, q, []int64{jobID})
		if _, err := b.Pool.Exec(b.Ctx, `UPDATE outbound_emails SET queued_at = queued_at - interval '1 minute' WHERE message_id = $1`, msg.ID); err != nil {
			t.Fatal(err)
		}
		s := jobstest.WaitFor(t, q, jobID, jobs.StateFailed, 20*time.Second)
		if !strings.HasPrefix(jobstest.Deref(s.LastError), "EmailExpired: not delivered within 5s") {
			t.Errorf("last error %q, want EmailExpired", jobstest.Deref(s.LastError))
		}
		em := b.outbound(t, msg.ID)
		if em.State != store.DeliveryFailed || em.Recipients[0].State != store.RecipientFailed {
			t.Errorf("email %s, recipient %s; want both failed", em.State, em.Recipients[0].State)
		}

		// A person retries once the relay is back: its age starts again.
		if err := proxy.Pass(); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Retry(b.Ctx, jobID); err != nil {
			t.Fatal(err)
		}
		jobstest.WaitFor(t, q, jobID, jobs.StateSucceeded, 15*time.Second)
	})
}

// waitAllSnoozed waits until every job has waited for the relay at least
// once: the outage is under way for all of them.
func waitAllSnoozed(t *testing.T, q *jobs.Queue, jobIDs []int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, id := range jobIDs {
		for {
			s, err := q.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Snoozes > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d is %s and never waited for the relay", id, s.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func systemNotes(t *testing.T, b *emailBundle, ticketID string) []string {
	t.Helper()
	msgs, err := b.Store.ListMessages(b.Ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		if m.Direction == vocab.DirectionNote && m.Author == vocab.System {
			out = append(out, m.Body)
		}
	}
	return out
}
