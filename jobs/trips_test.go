package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TestRoundTripsWithRiver counts the trips of the use cases that queue a
// job with River's own insert among them (desk's TestRoundTrips leaves it
// out), and checks what rides together: the statements waiting go with
// River's insert, and writes nothing checks go with the commit. Each
// budget allows one trip more for River's insert notification, which it
// sends at most once a while per queue.
func TestRoundTripsWithRiver(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	b.WithSMTP(t)
	q := b.NewQueue(t)
	ticketID, _ := b.OpenTicket(t, q, "Parcel", "Hi.")
	// The desk asks whether any SLA policy exists once in a while
	// (Config.SLARecheck), with the trip before the commit, which that
	// answer then keeps apart; asked here, and held for the whole test, so
	// that each case counts what it costs the rest of the time.
	b.DeskConfig.SLARecheck = time.Hour
	cases := b.Desk(q)
	if _, err := cases.AddCustomerMessage(b.Ctx, &desk.CustomerMessageParams{TicketID: ticketID, Author: vocab.Customer("C-0001"), Body: "B"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		budget   int
		together []string
		run      func(ctx context.Context) error
	}{
		// BEGIN with the numbers, the job's among them (the ticket row
		// names the job); the rows and River's insert with COMMIT. An API
		// intake's Idempotency-Key goes with the first trip and its answer
		// with the last (api's TestTheKeysClaimCostsNoTripOfItsOwn).
		{"OpenATicket", 2 + 1, []string{"INSERT INTO tickets", "JobInsertFastMany", "commit"}, func(ctx context.Context) error {
			_, _, err := cases.OpenTicket(ctx, &desk.OpenTicketParams{CustomerID: "C-0001", Subject: "S", Body: "B"})
			return err
		}},
		// The ticket locked; the message, its new triage job numbered
		// with it; the rows, River's insert and COMMIT.
		{"ACustomersNextMessage", 3 + 1, []string{"JobInsertFastMany", "commit"}, func(ctx context.Context) error {
			_, err := cases.AddCustomerMessage(ctx, &desk.CustomerMessageParams{TicketID: ticketID, Author: vocab.Customer("C-0001"), Body: "B"})
			return err
		}},
		// BEGIN with the reads and the numbers of the message and its job;
		// the rows with River's insert and COMMIT (the ticket is locked, so
		// its updates check nothing).
		{"AReply", 2 + 1, []string{"INSERT INTO outbound_emails", "JobInsertFastMany", "commit"}, func(ctx context.Context) error {
			return store.Run(ctx, b.Pool, func(tx *store.Tx) error {
				_, _, err := cases.CreateReplyTx(ctx, tx, &desk.ReplyParams{TicketID: ticketID, Author: vocab.Agent("alice"), Body: "B"})
				return err
			})
		}},
		// The jobs a transaction inserts with its commit are one statement.
		{"TwoTicketsInOneTransaction", 3 + 1, []string{"JobInsertFastMany", "commit"}, func(ctx context.Context) error {
			return store.Run(ctx, b.Pool, func(tx *store.Tx) error {
				for range 2 {
					if _, _, err := cases.OpenTicketTx(ctx, tx, &desk.OpenTicketParams{CustomerID: "C-0001", Subject: "S", Body: "B"}); err != nil {
						return err
					}
				}
				return nil
			})
		}},
	} {
		ctx, trips := storetest.CountTrips(b.Ctx)
		if err := tc.run(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if trips.N() > tc.budget {
			t.Errorf("%s: %d round trips, at most %d:\n%s", tc.name, trips.N(), tc.budget, trips)
		}
		if tc.together != nil && !trips.Together(tc.together...) {
			t.Errorf("%s: no trip holds %q together:\n%s", tc.name, tc.together, trips)
		}
		// Each use case inserts its jobs in one of River's statements.
		if n := trips.N() - trips.NWithout("JobInsertFastMany"); n != 1 {
			t.Errorf("%s: River's insert in %d trips, want 1:\n%s", tc.name, n, trips)
		}
		t.Logf("%s: %d round trips:\n%s", tc.name, trips.N(), trips)
	}
}
