package desk_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// triage saves the three steps of the ticket's triage job, as the worker
// would with the provider's answers; the vector is the simulator's of the
// subject.
func (w *world) triage(t *testing.T, ticketID, team string) {
	t.Helper()
	ticket := w.ticket(t, ticketID)
	jobID := *ticket.TriageJobID
	for _, r := range []*desk.TriageResult{
		{Task: desk.TaskClassify, Output: `{"team":"` + team + `"}`, Classification: &provider.Classification{Team: team, Priority: 2}},
		{Task: desk.TaskEmbed, Output: "vector", Embedding: simulator.Embed(ticket.Subject)},
		{Task: desk.TaskDraftReply, Output: "Dear Ada", Draft: "Dear Ada, it is on its way.", Last: true},
	} {
		r.JobID, r.TicketID = jobID, ticketID
		if _, err := w.desk.SaveTriageStep(w.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTriage(t *testing.T) {
	t.Parallel()

	t.Run("TheInputIsTheTicketAsTheProviderIsToldIt", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		w.agent(t, "alice", "billing")
		ticket := w.open(t, "Refund", "Please refund order 4711.")
		in, err := w.desk.TriageInput(w.ctx, *ticket.TriageJobID, ticket.ID, "provider")
		if err != nil {
			t.Fatal(err)
		}
		if in.Ticket.Subject != "Refund" || in.Ticket.CustomerName != ada.Name || len(in.Ticket.Messages) != 1 ||
			!strings.Contains(in.Ticket.Messages[0], "4711") || len(in.Done) != 0 || len(in.Ticket.Teams) != 1 {
			t.Errorf("input %+v", in)
		}
	})

	t.Run("APromptHoldsNoHeldMailAndNamesAParticipant", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Refund", "Please refund order 4711.")
		plus := []string{"support+" + ticket.ID + "@" + supportDomain}
		if _, err := w.desk.FileInbound(w.ctx, plus, mailFrom("evil@attacker.example", "<e1@attacker.example>", "x", "Pay at http://evil.example")); err != nil {
			t.Fatal(err)
		}
		out, err := w.desk.FileInbound(w.ctx, plus, mailFrom("grace@example.com", "<g1@example.com>", "x", "I am her colleague."))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.desk.AcceptHeld(w.ctx, vocab.Agent("alice"), ticket.ID, out.MessageID, desk.AcceptAsParticipant); err != nil {
			t.Fatal(err)
		}
		jobs := w.queue.of("triage")
		in, err := w.desk.TriageInput(w.ctx, jobs[len(jobs)-1].ID, ticket.ID, "provider")
		if err != nil {
			t.Fatal(err)
		}
		prompt := strings.Join(in.Ticket.Messages, "\n")
		if strings.Contains(prompt, "evil.example") || !strings.Contains(prompt, "(grace@example.com wrote:) I am her colleague.") {
			t.Errorf("the prompt's messages: %q", in.Ticket.Messages)
		}
	})

	t.Run("StepsSavedAtOnceAreEachSavedOnceAndToldOnce", func(t *testing.T) {
		// Steps saved at once commit together (store.Combiner): two
		// deliveries of each of twelve jobs saving at once leave each
		// ticket as one delivery would, and tell its agent once.
		t.Parallel()
		w := newWorld(t, true)
		w.agent(t, "alice", "billing")
		var tickets []*store.Ticket
		for i := range 12 {
			tickets = append(tickets, w.open(t, fmt.Sprintf("Refund %d", i), "Please refund."))
		}
		var wg sync.WaitGroup
		for _, ticket := range tickets {
			for range 2 {
				wg.Go(func() {
					for _, r := range []*desk.TriageResult{
						{Task: desk.TaskClassify, Output: "billing", Classification: &provider.Classification{Team: "billing", Priority: 2}},
						{Task: desk.TaskEmbed, Output: "vector", Embedding: simulator.Embed(ticket.Subject)},
						{Task: desk.TaskDraftReply, Output: "Dear Ada", Draft: "Dear Ada, it is done.", Last: true},
					} {
						r.JobID, r.TicketID = *ticket.TriageJobID, ticket.ID
						if _, err := w.desk.SaveTriageStep(w.ctx, r); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		for _, ticket := range tickets {
			got := w.ticket(t, ticket.ID)
			runs, _ := w.st.ListAIRuns(w.ctx, ticket.ID)
			vec, _ := w.st.TicketEmbedding(w.ctx, ticket.ID)
			if deref(got.Team) != "billing" || deref(got.DraftReply) != "Dear Ada, it is done." || len(runs) != 3 || len(vec) == 0 {
				t.Errorf("%s: team %v, draft %q, %d results, %d dimensions", ticket.ID, got.Team, deref(got.DraftReply), len(runs), len(vec))
			}
		}
		var told, ticketsTold int
		if err := w.pool.QueryRow(w.ctx, `SELECT count(*), count(DISTINCT ticket_id) FROM messages WHERE direction = $1`,
			vocab.DirectionNotification).Scan(&told, &ticketsTold); err != nil {
			t.Fatal(err)
		}
		if told != len(tickets) || ticketsTold != len(tickets) {
			t.Errorf("%d notifications of %d tickets, want one for each of %d", told, ticketsTold, len(tickets))
		}
		// How many commits held several tickets' results depends on how
		// the saves met; it is said, not required.
		var shared int
		if err := w.pool.QueryRow(w.ctx, `SELECT count(*) FROM (SELECT xmin::text FROM ai_runs GROUP BY xmin::text HAVING count(DISTINCT ticket_id) > 1) s`).Scan(&shared); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d commits saved several tickets' results", shared)
	})

	t.Run("OneResultPerJobAndStepASecondSaveChangesNothing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Refund", "Please refund.")
		w.triage(t, ticket.ID, "billing")
		again := &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskClassify, Output: "other",
			Classification: &provider.Classification{Team: "shipping", Priority: 4}}
		if _, err := w.desk.SaveTriageStep(w.ctx, again); err != nil {
			t.Fatal(err)
		}
		before, _ := w.st.TicketEmbedding(w.ctx, ticket.ID)
		embedAgain := &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskEmbed, Output: "other",
			Embedding: []float32{0, 0, 1}}
		if _, err := w.desk.SaveTriageStep(w.ctx, embedAgain); err != nil {
			t.Fatal(err)
		}
		if now, _ := w.st.TicketEmbedding(w.ctx, ticket.ID); len(before) == 0 || !slices.Equal(now, before) {
			t.Errorf("embedding %v, want %v: the second save changed it", now, before)
		}
		got := w.ticket(t, ticket.ID)
		runs, _ := w.st.ListAIRuns(w.ctx, ticket.ID)
		if deref(got.Team) != "billing" || *got.Priority != 2 || len(runs) != 3 {
			t.Errorf("team %v priority %v, %d results: the second save changed the ticket", got.Team, *got.Priority, len(runs))
		}
		in, _ := w.desk.TriageInput(w.ctx, *ticket.TriageJobID, ticket.ID, "provider")
		if len(in.Done) != 3 {
			t.Errorf("done %v, want every step skipped by a second delivery", in.Done)
		}
	})

	t.Run("ClassifyAssignsTheLeastBusyAgentOfTheTeam", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false, func(c *desk.Config) { c.AutoAssign = true })
		w.agent(t, "alice", "billing")
		w.agent(t, "bilal", "billing")
		busy := w.open(t, "First", "Hi.")
		w.triage(t, busy.ID, "billing")
		next := w.open(t, "Second", "Hi.")
		w.triage(t, next.ID, "billing")
		a, b := deref(w.ticket(t, busy.ID).Assignee), deref(w.ticket(t, next.ID).Assignee)
		if a == "" || b == "" || a == b {
			t.Errorf("assigned %q then %q: want each agent one", a, b)
		}
		if events := w.events(t, next.ID); len(events) != 1 || events[0] != "assignee:→"+b {
			t.Errorf("events %v", events)
		}
	})

	t.Run("TheLastStepNotifiesTheAssigneeOnce", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.AutoAssign = true })
		w.agent(t, "alice", "billing")
		ticket := w.open(t, "Refund", "Please refund order 4711.")
		w.triage(t, ticket.ID, "billing")
		last := &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskDraftReply, Output: "racing", Draft: "racing", Last: true}
		if _, err := w.desk.SaveTriageStep(w.ctx, last); err != nil {
			t.Fatal(err)
		}
		notes := ofDirection(w.messages(t, ticket.ID), vocab.DirectionNotification)
		if len(notes) != 1 || len(w.queue.of("notify")) != 1 || !strings.Contains(notes[0].Body, "order 4711") ||
			!strings.Contains(notes[0].Body, "Dear Ada") {
			t.Errorf("%d notifications (%d jobs): want one, with the message and the draft", len(notes), len(w.queue.of("notify")))
		}
		w.deliverAll(t)
		if got := w.smtp.Deliveries(); len(got) != 1 || got[0].To[0] != "alice@support.example.com" {
			t.Errorf("deliveries %+v, want the notification to alice", got)
		}
	})

	t.Run("ANotificationOfATicketAnAgentOpenedNamesTheAgentAndTheCustomer", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, true, func(c *desk.Config) { c.AutoAssign = true })
		w.agent(t, "alice", "billing")
		opened, _, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: "Refund",
			Body: "Ada called: please refund order 4711.", Author: vocab.Agent("alice")})
		if err != nil {
			t.Fatal(err)
		}
		ticket := w.ticket(t, opened.ID)
		w.triage(t, ticket.ID, "billing")
		last := &desk.TriageResult{JobID: *ticket.TriageJobID, TicketID: ticket.ID, Task: desk.TaskDraftReply, Output: "draft", Draft: "draft", Last: true}
		if _, err := w.desk.SaveTriageStep(w.ctx, last); err != nil {
			t.Fatal(err)
		}
		notes := ofDirection(w.messages(t, ticket.ID), vocab.DirectionNotification)
		want := "Agent alice, for " + ada.Name + " <" + ada.Email + ">, wrote on " + ticket.ID + ":"
		if len(notes) != 1 {
			t.Fatalf("%d notifications, want one", len(notes))
		}
		if !strings.HasPrefix(notes[0].Body, want) {
			t.Errorf("the notification reads %q; want it to begin %q", notes[0].Body, want)
		}
	})

	t.Run("AJobACustomerMessageReplacedWritesNoDraft", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, false)
		ticket := w.open(t, "Refund", "Please refund.")
		old := *ticket.TriageJobID
		if _, err := w.desk.AddCustomerMessage(w.ctx, &desk.CustomerMessageParams{TicketID: ticket.ID, Author: vocab.Customer(ada.ID), Body: "Order 5150 too."}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.desk.SaveTriageStep(w.ctx, &desk.TriageResult{JobID: old, TicketID: ticket.ID, Task: desk.TaskDraftReply,
			Output: "old", Draft: "An answer to the first message only."}); err != nil {
			t.Fatal(err)
		}
		if got := w.ticket(t, ticket.ID); got.DraftReply != nil {
			t.Errorf("draft %q written by the replaced job", *got.DraftReply)
		}
	})
}
