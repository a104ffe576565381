package jobs_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// The answers of the solved tickets the tests draw on.
const (
	refundAnswer   = "Dear Nora Quist, we have refunded the kettle in full: the money is back on your card within five days."
	shippingAnswer = "Hello, your parcel left our warehouse yesterday; the courier delivers it on Monday."
)

// openAs opens a ticket of a customer of the name and address, made if
// new, with its triage job.
func openAs(t *testing.T, b *jobstest.Bundle, q *jobs.Queue, name, email, subject, body string) (string, int64) {
	t.Helper()
	c, err := b.Store.CustomerByEmail(b.Ctx, email)
	if err != nil {
		if c, err = b.Store.InsertCustomerByEmail(b.Ctx, email, name); err != nil {
			t.Fatal(err)
		}
	}
	ticket, jobID, err := b.Desk(q).OpenTicket(b.Ctx, &desk.OpenTicketParams{CustomerID: c.ID, Subject: subject, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return ticket.ID, jobID
}

// solve answers the ticket as alice and marks it solved.
func solve(t *testing.T, b *jobstest.Bundle, q *jobs.Queue, ticketID, answer string) {
	t.Helper()
	err := store.Run(b.Ctx, b.Pool, func(tx *store.Tx) error {
		_, _, err := b.Desk(q).CreateReplyTx(b.Ctx, tx, &desk.ReplyParams{TicketID: ticketID, Author: vocab.Agent("alice"), Body: answer,
			Status: vocab.StatusSolved})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// solvedHistory triages and solves a refund ticket and a shipping one
// with workers of their own, stopped before it returns: the refund's id.
func solvedHistory(t *testing.T, b *jobstest.Bundle) (refund, shipping string) {
	t.Helper()
	q := b.NewQueue(t)
	w := b.NewWorkers(t, q)
	if err := w.Start(b.Ctx); err != nil {
		t.Fatal(err)
	}
	refund, refundJob := openAs(t, b, q, "Nora Quist", "nora.quist@example.com", "Refund for a broken kettle",
		"Dear support, I was charged for a kettle I sent back two days later. I would like a refund of the charge please. Nora Quist")
	shipping, shippingJob := openAs(t, b, q, "Otto Berg", "otto@example.com", "Where is my parcel",
		"My parcel has not arrived and the tracking page shows nothing for a week.")
	jobstest.WaitFor(t, q, refundJob, jobs.StateSucceeded, 30*time.Second)
	jobstest.WaitFor(t, q, shippingJob, jobs.StateSucceeded, 30*time.Second)
	solve(t, b, q, refund, refundAnswer)
	solve(t, b, q, shipping, shippingAnswer)
	if err := w.Stop(b.Ctx); err != nil {
		t.Fatal(err)
	}
	return refund, shipping
}

// examplesOf is the examples part of the draft requests made for a
// ticket.
func examplesOf(b *jobstest.Bundle, ticketID string) string {
	var out []string
	for _, p := range b.Sim.Prompts(ticketID) {
		if _, after, ok := strings.Cut(p, provider.ExamplesHeader); ok {
			out = append(out, after)
		}
	}
	return strings.Join(out, "\n")
}

func TestEmbeddingsInUse(t *testing.T) {
	t.Parallel()

	t.Run("ANewRefundQuestionIsNearestTheSolvedRefundAndItsDraftDrawsOnIt", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		b.WithSMTP(t)
		refund, shipping := solvedHistory(t, b)

		q := b.StartQueue(t)
		asked, job := openAs(t, b, q, "Pia Lund", "pia@example.com", "Refund please",
			"I sent my kettle back but I was charged for it. Can I get a refund?")
		jobstest.WaitFor(t, q, job, jobs.StateSucceeded, 30*time.Second)

		similar, err := b.Desk(q).SimilarTickets(b.Ctx, asked, "solved", 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(similar) != 2 || similar[0].TicketID != refund || similar[1].TicketID != shipping || similar[0].Score <= similar[1].Score {
			t.Fatalf("similar %+v: want the refund %s first, then the shipping %s", similar, refund, shipping)
		}
		ticket, _ := b.Store.GetTicket(b.Ctx, asked)
		if !slices.Equal(ticket.DraftSources, []string{refund}) {
			t.Errorf("draft_sources %v, want [%s]: the solved refund of the same team", ticket.DraftSources, refund)
		}
		examples := examplesOf(b, asked)
		if !strings.Contains(examples, "we have refunded the kettle in full") || strings.Contains(examples, shippingAnswer) {
			t.Errorf("the draft request's examples %q: want the refund's answer, not the shipping one", examples)
		}
		if strings.Contains(examples, "Nora") || strings.Contains(examples, "Quist") || strings.Contains(examples, "nora.quist") {
			t.Errorf("the examples %q name the other customer", examples)
		}
		if !strings.Contains(jobstest.Deref(ticket.DraftReply), "we have refunded the kettle") {
			t.Errorf("draft %q: the simulator's draft quotes the example it was given", jobstest.Deref(ticket.DraftReply))
		}
	})

	t.Run("ExamplesTurnedOffLeaveTheDraftToItsOwnTicket", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		b.WithSMTP(t)
		b.DeskConfig.DraftExamples = -1
		solvedHistory(t, b)
		q := b.StartQueue(t)
		asked, job := openAs(t, b, q, "Pia Lund", "pia@example.com", "Refund please", "My kettle broke after a week. Can I get a refund?")
		jobstest.WaitFor(t, q, job, jobs.StateSucceeded, 30*time.Second)
		ticket, _ := b.Store.GetTicket(b.Ctx, asked)
		if len(ticket.DraftSources) != 0 || examplesOf(b, asked) != "" {
			t.Errorf("draft_sources %v, examples %q: want none", ticket.DraftSources, examplesOf(b, asked))
		}
	})

	t.Run("ASecondTicketOfTheSameCustomerAboutTheSameThingIsFlagged", func(t *testing.T) {
		t.Parallel()
		b := jobstest.Setup(t)
		q := b.StartQueue(t)
		first, job := openAs(t, b, q, "Pia Lund", "pia@example.com", "Order 4711 has not arrived",
			"I ordered a kettle two weeks ago, order 4711, and it has not arrived yet.")
		jobstest.WaitFor(t, q, job, jobs.StateSucceeded, 30*time.Second)
		other, job := openAs(t, b, q, "Otto Berg", "otto@example.com", "Order 4712 has not arrived",
			"I ordered a kettle two weeks ago, order 4712, and it has not arrived yet.")
		jobstest.WaitFor(t, q, job, jobs.StateSucceeded, 30*time.Second)
		second, job := openAs(t, b, q, "Pia Lund", "pia@example.com", "Still no kettle",
			"My kettle, order 4711, has still not arrived. Where is it?")
		jobstest.WaitFor(t, q, job, jobs.StateSucceeded, 30*time.Second)

		if got, _ := b.Store.GetTicket(b.Ctx, second); jobstest.Deref(got.PossibleDuplicateOf) != first {
			t.Errorf("possible_duplicate_of %s, want %s", jobstest.Deref(got.PossibleDuplicateOf), first)
		}
		if got, _ := b.Store.GetTicket(b.Ctx, other); got.PossibleDuplicateOf != nil {
			t.Errorf("another customer's ticket is named a duplicate of %s", *got.PossibleDuplicateOf)
		}
		if got, _ := b.Store.GetTicket(b.Ctx, first); got.PossibleDuplicateOf != nil || got.Status != vocab.StatusOpen {
			t.Errorf("the first ticket: duplicate of %v, %s; want untouched: nothing is merged by itself", got.PossibleDuplicateOf, got.Status)
		}
		events, _ := b.Store.ListTicketEvents(b.Ctx, second)
		if !slices.ContainsFunc(events, func(e *store.TicketEvent) bool {
			return e.What == "possible_duplicate" && jobstest.Deref(e.To) == first
		}) {
			t.Errorf("events %v: want possible_duplicate → %s", events, first)
		}
	})
}
