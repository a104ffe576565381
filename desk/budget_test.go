package desk_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TestRoundTrips holds each use case to the round trips to PostgreSQL it
// takes (River's inserts, made by the queue, are not among them): a change
// that adds one fails here and says which.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget int
		ack    bool
		run    func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips)
	}{
		{"OpenATicket", 2, false, func(ctx context.Context, t *testing.T, w *world, _ *store.Ticket, _ *storetest.Trips) {
			if _, _, err := w.desk.OpenTicket(ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "S", Body: "B"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"OpenATicketAndAcknowledgeIt", 4, true, func(ctx context.Context, t *testing.T, w *world, _ *store.Ticket, trips *storetest.Trips) {
			if _, _, err := w.desk.OpenTicket(ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "S", Body: "B"}); err != nil {
				t.Fatal(err)
			}
			keptInAnInsertEach(t, trips, 1)
		}},
		// A customer at its daily limit of acknowledgements: its limit is
		// read with the numbers, and its ticket's rows go with the commit,
		// as without acknowledgements, with no lock taken for a claim.
		{"OpenATicketOfACustomerAtItsAcknowledgementLimit", 2, true, func(ctx context.Context, t *testing.T, w *world, _ *store.Ticket, trips *storetest.Trips) {
			for range 2 { // the world's first ticket and these make the default three
				w.open(t, "S", "B")
			}
			if _, _, err := w.desk.OpenTicket(ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "S", Body: "B"}); err != nil {
				t.Fatal(err)
			}
			if locks := statementsOn(trips, "pg_advisory_xact_lock"); len(locks) != 0 {
				t.Errorf("the claim's lock taken at the limit:\n%s", strings.Join(locks, "\n"))
			}
		}},
		{"FileANewTicketByMail", 4, false, func(ctx context.Context, t *testing.T, w *world, _ *store.Ticket, _ *storetest.Trips) {
			if _, err := w.desk.FileInbound(ctx, support, mailFrom(bram.Email, "<budget@mail.example.com>", "S", "B")); err != nil {
				t.Fatal(err)
			}
		}},
		// The ticket locked with BEGIN; the message and the job's number; its
		// writes, one update of the ticket among them, with the commit. The
		// message counted is the second: the first asks whether any SLA
		// policy exists, and that answer keeps its commit in a trip of its own.
		{"ACustomersNextMessage", 3, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			for _, counted := range []bool{false, true} {
				trips.Reset()
				if _, err := w.desk.AddCustomerMessage(ctx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: vocab.Customer(ada.ID), Body: "B"}); err != nil {
					t.Fatal(err)
				}
				if counted {
					oneUpdateOfTheTicket(t, trips)
				}
			}
		}},
		// BEGIN with the ticket locked and the numbers; the rows, a change of
		// status among them, with the commit. The reply counted is the second,
		// as above.
		{"AReply", 2, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			for _, status := range []vocab.Status{vocab.StatusPending, vocab.StatusSolved} { // each changes the status
				trips.Reset()
				if err := store.Run(ctx, w.pool, func(tx *store.Tx) error {
					_, _, err := w.desk.CreateReplyTx(ctx, tx, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "B",
						Status: status})
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			if statementsOn(trips, "UPDATE tickets SET status") == nil {
				t.Error("the reply counted changed no status, so its status write is not counted")
			}
		}},
		{"TheTriageInput", 1, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, _ *storetest.Trips) {
			if _, err := w.desk.TriageInput(ctx, *ticket.TriageJobID, ticket.ID, "p"); err != nil {
				t.Fatal(err)
			}
		}},
		// The vector index's first read (its horizon, its vectors) for the duplicate search, and the save; the
		// ticket is the one the job read before its steps (the worker's TriageInput, not counted here).
		{"AnEmbedStep", 3, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			in, err := w.desk.TriageInput(w.ctx, *ticket.TriageJobID, ticket.ID, "p")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.desk.SaveTriageStep(ctx, &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskEmbed,
				Output: "vector", Embedding: []float32{1, 0}, Input: in, ProviderName: "p"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"TheLastTriageStep", 2, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			if _, err := w.desk.SaveTriageStep(ctx, &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskDraftReply,
				Output: "Hello", Draft: "Hello", Last: true, ProviderName: "p"}); err != nil {
				t.Fatal(err)
			}
		}},
		// The last step of a classified ticket mails the team's agents: the
		// step with the notice's reads, which number the mails too, then
		// their rows with the commit (River's insert is jobs'
		// TestRoundTripsWithRiver's), however many agents the team has.
		{"TheLastTriageStepTellingTheTeam", 2, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			w.agent(t, "alice", "billing")
			w.agent(t, "bob", "billing")
			if _, err := w.desk.SaveTriageStep(ctx, &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskClassify,
				Output: "{}", Classification: &provider.Classification{Team: "billing", Priority: 2}, ProviderName: "p"}); err != nil {
				t.Fatal(err)
			}
			trips.Reset()
			if _, err := w.desk.SaveTriageStep(ctx, &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskDraftReply,
				Output: "Hello", Draft: "Hello", Last: true, ProviderName: "p"}); err != nil {
				t.Fatal(err)
			}
			var told int
			if err := w.pool.QueryRow(w.ctx, `SELECT count(*) FROM messages WHERE ticket_id = $1 AND direction = 'notification'`, ticket.ID).Scan(&told); err != nil || told != 2 {
				t.Fatalf("%d notifications (%v), want one to each agent of the team", told, err)
			}
			keptInAnInsertEach(t, trips, 2)
		}},
		{"ATriageStep", 2, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			if _, err := w.desk.SaveTriageStep(ctx, &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskClassify,
				Output: "{}", Classification: &provider.Classification{Team: "billing", Priority: 2}, ProviderName: "p"}); err != nil {
				t.Fatal(err)
			}
		}},
		// The result, the team, priority and assignee written at once, and
		// the pick checked; then the commit.
		{"AClassifyStepGivingTheTicketToAnAgent", 2, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			w.agent(t, "alice", "billing")
			cfg := w.cfg
			cfg.AutoAssign = true
			assigning := desk.New(w.pool, w.queue, cfg)
			trips.Reset()
			if _, err := assigning.SaveTriageStep(ctx, &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskClassify,
				Output: "{}", Classification: &provider.Classification{Team: "billing", Priority: 2}, ProviderName: "p"}); err != nil {
				t.Fatal(err)
			}
			var assignee, team string
			if err := w.pool.QueryRow(w.ctx, `SELECT assignee, team FROM tickets WHERE id = $1`, ticket.ID).Scan(&assignee, &team); err != nil ||
				assignee != "alice" || team != "billing" {
				t.Fatalf("assignee %q, team %q (%v): want alice, billing", assignee, team, err)
			}
			// A ticket's write that changes an indexed column writes an entry in
			// each of its indexes: the classification and the assignee share one.
			oneUpdateOfTheTicket(t, trips)
		}},
		// A mail written rendered (here an agent's notification): the mail
		// with its attempt marked, the outcome.
		{"TheDeliveryOfAMailKeptRendered", 2, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			w.agent(t, "alice", "billing")
			for _, r := range []*desk.TriageResult{
				{Task: desk.TaskClassify, Output: "{}", Classification: &provider.Classification{Team: "billing", Priority: 2}},
				{Task: desk.TaskDraftReply, Output: "Hello", Draft: "Hello", Last: true},
			} {
				r.JobID, r.TicketID, r.ProviderName = *ticket.TriageJobID, ticket.ID, "p"
				if _, err := w.desk.SaveTriageStep(w.ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			var id, jobID int64
			if err := w.pool.QueryRow(w.ctx, `SELECT e.message_id, e.job_id FROM outbound_emails e JOIN messages m ON m.id = e.message_id
				WHERE m.ticket_id = $1 AND m.direction = 'notification'`, ticket.ID).Scan(&id, &jobID); err != nil {
				t.Fatal(err)
			}
			if n := w.desk.Deliver(ctx, desk.Attempt{JobID: jobID, MessageID: id, Attempt: 1, MaxAttempts: 3}); n.Step != desk.Done {
				t.Fatalf("step %+v", n)
			}
			if got := w.smtp.Deliveries(); len(got) != 1 {
				t.Fatalf("%d mails sent, want the notification", len(got))
			}
		}},
		// The mail with what renders it, the bytes kept with the attempt marked, the outcome.
		{"TheFirstDeliveryOfAReply", 3, false, func(ctx context.Context, t *testing.T, w *world, ticket *store.Ticket, trips *storetest.Trips) {
			msg, jobID, err := w.reply(t, &desk.ReplyParams{TicketID: ticket.ID, Author: vocab.Agent("alice"), Body: "B"})
			if err != nil {
				t.Fatal(err)
			}
			trips.Reset()
			if n := w.desk.Deliver(ctx, desk.Attempt{JobID: jobID, MessageID: msg.ID, Attempt: 1, MaxAttempts: 3, TicketID: ticket.ID}); n.Step != desk.Done {
				t.Fatalf("step %+v", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, true, func(c *desk.Config) {
				// The desk's answer on SLA policies, once asked, holds for the
				// whole test: its age never decides a trip.
				c.SLARecheck = time.Hour
				if tc.ack {
					c.Ack = &desk.AckConfig{}
				}
			})
			ticket := w.open(t, "Parcel", "Hi.")
			ctx, trips := storetest.CountTrips(w.ctx)
			start := time.Now()
			tc.run(ctx, t, w, ticket, trips)
			if trips.N() > tc.budget {
				t.Errorf("%d round trips, at most %d (took %s):\n%s", trips.N(), tc.budget, time.Since(start), trips)
			}
			t.Logf("%s: %d round trips:\n%s", tc.name, trips.N(), trips)
		})
	}
}

// oneUpdateOfTheTicket fails when the trips counted wrote the ticket's row
// in more than one statement: each writes a new version of the row.
func oneUpdateOfTheTicket(t *testing.T, trips *storetest.Trips) {
	t.Helper()
	if writes := statementsOn(trips, "UPDATE tickets"); len(writes) != 1 {
		t.Errorf("%d statements write the ticket, want one:\n%s", len(writes), strings.Join(writes, "\n"))
	}
}

// keptInAnInsertEach fails when the mails the desk rendered as it wrote
// them (an acknowledgement, notifications), mails of them, took more than
// an insert each into outbound_emails: their bytes written by a second
// statement.
func keptInAnInsertEach(t *testing.T, trips *storetest.Trips, mails int) {
	t.Helper()
	touching := statementsOn(trips, "outbound_emails")
	inserts := slices.DeleteFunc(slices.Clone(touching), func(s string) bool { return !strings.HasPrefix(s, "INSERT INTO outbound_emails") })
	if len(touching) != mails || len(inserts) != mails {
		t.Errorf("%d statements on outbound_emails, want an insert for each of %d mails:\n%s", len(touching), mails, strings.Join(touching, "\n"))
	}
}

// statementsOn lists the statements counted that contain sql, each on one line.
func statementsOn(trips *storetest.Trips, sql string) []string {
	var out []string
	for _, s := range trips.Statements() {
		if strings.Contains(s.SQL, sql) {
			out = append(out, strings.Join(strings.Fields(s.SQL), " "))
		}
	}
	return out
}
