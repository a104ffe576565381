package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestTx(t *testing.T) {
	t.Parallel()
	pool, _ := withAda(t)
	tickets := func(t *testing.T) (n int) {
		t.Helper()
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM tickets`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("BeginGoesWithTheFirstStatementsAndLaterWithTheNext", func(t *testing.T) {
		ctx, trips := storetest.CountTrips(context.Background())
		var claim store.Claim
		var ticket store.Ticket
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			tx.Later(func(b *store.Batch) {
				b.ClaimIdempotencyKey("customer:C-0001", "t1", []byte("fp"), time.Hour, &claim)
			})
			if trips.N() != 0 {
				t.Errorf("Later went to the database at once:\n%s", trips)
			}
			got, err := tx.Store().GetCustomer(ctx, "C-0001")
			if err != nil || got.Name != "Ada" || !claim.Claimed {
				t.Errorf("read %+v (%v), claimed %v: want the customer and the claim done with it", got, err, claim.Claimed)
			}
			tx.Later(func(b *store.Batch) {
				b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Later"}, &ticket)
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// BEGIN with the claim and the read; the insert with… the commit's own trip.
		if trips.N() != 3 || ticket.ID == "" {
			t.Errorf("%d trips, ticket %q; want 3 (BEGIN+claim+read, insert, COMMIT) and the ticket written:\n%s", trips.N(), ticket.ID, trips)
		}
	})

	t.Run("AUnitOfWorkThatNeverWentOutCostsNothing", func(t *testing.T) {
		ctx, trips := storetest.CountTrips(context.Background())
		if err := store.Run(ctx, pool, func(*store.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if trips.N() != 0 {
			t.Errorf("an empty unit of work made %d trips:\n%s", trips.N(), trips)
		}
	})

	t.Run("RollbackDropsWhatWaitsAndWhatWasSent", func(t *testing.T) {
		before := tickets(t)
		ctx := context.Background()
		var sent, waiting store.Ticket
		boom := errors.New("boom")
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			var b store.Batch
			b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Sent"}, &sent)
			if err := tx.Store().Send(ctx, &b); err != nil {
				return err
			}
			tx.Later(func(b *store.Batch) {
				b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Waiting"}, &waiting)
			})
			return boom
		})
		if !errors.Is(err, boom) || tickets(t) != before || waiting.ID != "" {
			t.Errorf("err %v, %d tickets (want %d), waiting %q: want nothing kept", err, tickets(t), before, waiting.ID)
		}
	})

	t.Run("DirectQueriesSeeWhatWaited", func(t *testing.T) {
		ctx := context.Background()
		tx := store.Begin(pool)
		defer tx.Rollback(ctx)
		var ticket store.Ticket
		tx.Later(func(b *store.Batch) {
			b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Seen"}, &ticket)
		})
		locked, err := tx.Store().LockTicket(ctx, ticket.ID)
		if err == nil || locked != nil {
			// ticket.ID is read before the insert went out: "" locks nothing.
			t.Errorf("locked %v (%v) with an id not yet known", locked, err)
		}
		if ticket.ID == "" {
			t.Fatal("the waiting insert did not go out with the lock")
		}
		msg, err := tx.Store().InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionNote, Author: vocab.System, Body: "n"})
		if err != nil || msg.TicketID != ticket.ID {
			t.Errorf("message %+v (%v) on the ticket written in this transaction", msg, err)
		}
	})

	t.Run("ErrorsOfWhatWaitedAreTheNextTrips", func(t *testing.T) {
		ctx := context.Background()
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			var ticket store.Ticket
			tx.Later(func(b *store.Batch) {
				b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-9999", Subject: "Nobody's"}, &ticket)
			})
			_, err := tx.Store().GetCustomer(ctx, "C-0001")
			return err
		})
		if !errors.Is(err, store.ErrUnknownCustomer) {
			t.Errorf("err = %v, want the waiting insert's ErrUnknownCustomer", err)
		}
	})

	t.Run("TheCommitGoesWithTheLastWritesWhenNothingChecksThem", func(t *testing.T) {
		ctx, trips := storetest.CountTrips(context.Background())
		var claim store.Claim
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			tx.Later(func(b *store.Batch) {
				b.ClaimIdempotencyKey("customer:C-0001", "t2", []byte("fp"), time.Hour, &claim)
			})
			if _, err := tx.Store().GetCustomer(ctx, "C-0001"); err != nil {
				return err
			}
			tx.Later(func(b *store.Batch) { b.SaveIdempotentResponse("customer:C-0001", "t2", 201, []byte(`{"ok": true}`)) })
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if trips.N() != 2 {
			t.Errorf("%d trips, want 2 (BEGIN+claim+read, the answer with COMMIT):\n%s", trips.N(), trips)
		}
		if k, err := store.New(pool).GetIdempotencyKey(context.Background(), "customer:C-0001", "t2", time.Hour); err != nil || k.Status != 201 {
			t.Errorf("key %+v (%v): want the answer kept", k, err)
		}
	})

	t.Run("AUnitOfWorkOfOneTripIsOneImplicitTransaction", func(t *testing.T) {
		ctx, trips := storetest.CountTrips(context.Background())
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			tx.Later(func(b *store.Batch) { b.SaveIdempotentResponse("customer:C-0001", "t2", 202, []byte(`{"ok": 2}`)) })
			return nil
		})
		if err != nil || trips.N() != 1 {
			t.Errorf("err %v, %d trips, want one:\n%s", err, trips.N(), trips)
		}
		if k, _ := store.New(pool).GetIdempotencyKey(context.Background(), "customer:C-0001", "t2", time.Hour); k == nil || k.Status != 202 {
			t.Errorf("key %+v: want the second answer kept", k)
		}
	})

	t.Run("AFailedLastTripRollsBackWhatWentBefore", func(t *testing.T) {
		before := tickets(t)
		ctx := context.Background()
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			var b store.Batch
			var sent store.Ticket
			b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Sent"}, &sent)
			if err := tx.Store().Send(ctx, &b); err != nil {
				return err
			}
			tx.Later(func(b *store.Batch) { b.SaveIdempotentResponse("customer:C-0001", "t2", 200, []byte(`{not JSON`)) })
			return nil
		})
		if err == nil || tickets(t) != before {
			t.Errorf("err %v, %d tickets (want %d): the commit went with a failed statement", err, tickets(t), before)
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Errorf("%d connections still held after the unit of work ended", n)
		}
	})

	t.Run("PgxsFirstQueryTakesWhatWaitsAlong", func(t *testing.T) {
		ctx, trips := storetest.CountTrips(context.Background())
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			if _, err := tx.Store().GetCustomer(ctx, "C-0001"); err != nil {
				return err
			}
			var ticket store.Ticket
			tx.Later(func(b *store.Batch) {
				b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Carried"}, &ticket)
			})
			ptx, err := tx.Pgx(ctx)
			if err != nil {
				return err
			}
			if trips.N() != 1 {
				t.Errorf("Pgx made a trip of its own:\n%s", trips)
			}
			var n int
			if err := ptx.QueryRow(ctx, `SELECT count(*) FROM tickets WHERE subject = 'Carried'`).Scan(&n); err != nil {
				return err
			}
			if n != 1 || ticket.ID == "" || trips.N() != 2 {
				t.Errorf("count %d, ticket %q, %d trips: want the waiting insert seen by the query in the same trip:\n%s", n, ticket.ID, trips.N(), trips)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("AnErrorOfWhatWaitedIsPgxsQuerysError", func(t *testing.T) {
		ctx := context.Background()
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			if _, err := tx.Store().GetCustomer(ctx, "C-0001"); err != nil {
				return err
			}
			var ticket store.Ticket
			tx.Later(func(b *store.Batch) {
				b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-9999", Subject: "Nobody's"}, &ticket)
			})
			ptx, err := tx.Pgx(ctx)
			if err != nil {
				return err
			}
			var n int
			return ptx.QueryRow(ctx, `SELECT 1`).Scan(&n)
		})
		if !errors.Is(err, store.ErrUnknownCustomer) {
			t.Errorf("err = %v, want the waiting insert's ErrUnknownCustomer", err)
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Errorf("%d connections still held", n)
		}
	})

	// CommitWith's work stands for River's InsertTx: a library's insert on
	// the pgx.Tx it is given, after which it may send more.
	carried := func(sql string) bool {
		return strings.HasPrefix(sql, "INSERT INTO tickets (customer_id, subject) VALUES ('C-0001', 'Carried")
	}
	insertCarried := func(subject string, after ...string) func(ctx context.Context, tx pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO tickets (customer_id, subject) VALUES ('C-0001', '`+subject+`')`); err != nil {
				return err
			}
			for _, sql := range after {
				if _, err := tx.Exec(ctx, sql); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// commitCarried runs a unit of work, begun, whose tickets waiting go
	// with work's carried insert and the commit.
	commitCarried := func(ctx context.Context, work func(ctx context.Context, tx pgx.Tx) error, waiting ...*store.InsertTicketParams) error {
		return store.Run(ctx, pool, func(tx *store.Tx) error {
			if err := tx.Flush(ctx); err != nil {
				return err
			}
			for _, p := range waiting {
				tx.Later(func(b *store.Batch) { b.InsertTicket(p, nil) })
			}
			tx.CommitWith(carried, work)
			return nil
		})
	}
	subjects := func(t *testing.T, subjects ...string) (n int) {
		t.Helper()
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM tickets WHERE subject = ANY($1)`, subjects).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("TheCommitGoesBehindTheLastQueryWithWhatWaits", func(t *testing.T) {
		ctx, trips := storetest.CountTrips(context.Background())
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			if _, err := tx.Store().GetCustomer(ctx, "C-0001"); err != nil {
				return err
			}
			tx.Later(func(b *store.Batch) {
				b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Waited 1"}, nil)
			})
			tx.CommitWith(carried, insertCarried("Carried 1", `SELECT pg_notify('after', 'the commit')`))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// BEGIN with the read; what waited, the carried insert and COMMIT;
		// what the work sent after its insert, on its own.
		if trips.N() != 3 || !trips.Together("INSERT INTO tickets (id", "INSERT INTO tickets (customer_id", "commit") {
			t.Errorf("%d trips, want 3, what waited and the carried insert with the commit:\n%s", trips.N(), trips)
		}
		if n := subjects(t, "Waited 1", "Carried 1"); n != 2 {
			t.Errorf("%d of the two tickets kept", n)
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Errorf("%d connections still held after the unit of work ended", n)
		}
	})

	t.Run("TheWorkKnowsItsQueriesAfterTheCommitAreOutsideTheTransaction", func(t *testing.T) {
		ctx := context.Background()
		var during, after bool
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			if err := tx.Flush(ctx); err != nil {
				return err
			}
			tx.CommitWith(carried, func(ctx context.Context, ptx pgx.Tx) error {
				during = store.Committed(ptx)
				err := insertCarried("Carried 2")(ctx, ptx)
				after = store.Committed(ptx)
				// The committed transaction had an id, for its insert; a new one has none yet.
				var inTx bool
				if err := ptx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned() IS NOT NULL`).Scan(&inTx); err != nil {
					return err
				}
				if inTx {
					t.Error("a query after the one that carried the commit ran in a transaction")
				}
				return err
			})
			return nil
		})
		if err != nil || during || !after || subjects(t, "Carried 2") != 1 {
			t.Errorf("err %v, committed before the query %v, after %v, kept %d: want false, true, 1", err, during, after, subjects(t, "Carried 2"))
		}
	})

	t.Run("AFailureBeforeTheCarriedQueryKeepsNothing", func(t *testing.T) {
		err := commitCarried(context.Background(), insertCarried("Carried 3"),
			&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Waited 3"}, &store.InsertTicketParams{CustomerID: "C-9999", Subject: "Nobody's"})
		if !errors.Is(err, store.ErrUnknownCustomer) || subjects(t, "Waited 3", "Carried 3") != 0 {
			t.Errorf("err %v, %d kept: want ErrUnknownCustomer and nothing kept", err, subjects(t, "Waited 3", "Carried 3"))
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Errorf("%d connections still held", n)
		}
	})

	t.Run("AFailedCarriedQueryKeepsNothing", func(t *testing.T) {
		err := commitCarried(context.Background(), insertCarried("Carried 4', 'no such column"), // three values for two columns
			&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Waited 4"})
		if err == nil || subjects(t, "Waited 4") != 0 {
			t.Errorf("err %v, %d kept: want the insert's error and nothing kept", err, subjects(t, "Waited 4"))
		}
	})

	t.Run("AnAnswerToCheckKeepsTheCommitInItsOwnTrip", func(t *testing.T) {
		// A check that fails after the trip must still roll back what the
		// carried query wrote, so the commit waits for it.
		ctx, trips := storetest.CountTrips(context.Background())
		boom := errors.New("boom")
		err := store.Run(ctx, pool, func(tx *store.Tx) error {
			if err := tx.Flush(ctx); err != nil {
				return err
			}
			var waited store.Ticket
			tx.Later(func(b *store.Batch) {
				b.InsertTicket(&store.InsertTicketParams{CustomerID: "C-0001", Subject: "Waited 5"}, &waited)
			})
			tx.CommitWith(carried, func(ctx context.Context, ptx pgx.Tx) error {
				if err := insertCarried("Carried 5")(ctx, ptx); err != nil {
					return err
				}
				if waited.ID != "" && !store.Committed(ptx) {
					return boom // what the check of the waiting answer would say
				}
				return nil
			})
			return nil
		})
		if !errors.Is(err, boom) || subjects(t, "Waited 5", "Carried 5") != 0 || trips.Together("INSERT INTO tickets (customer_id", "commit") {
			t.Errorf("err %v, %d kept: want boom, nothing kept, and no commit with the carried query:\n%s", err, subjects(t, "Waited 5", "Carried 5"), trips)
		}
	})

	t.Run("AQueryNotCarriedLeavesTheCommitItsOwnTrip", func(t *testing.T) {
		ctx, trips := storetest.CountTrips(context.Background())
		err := commitCarried(ctx, insertCarried("Not carried 6"))
		if err != nil || subjects(t, "Not carried 6") != 1 || trips.N() != 3 || trips.Together("INSERT INTO tickets (customer_id", "commit") {
			t.Errorf("err %v, %d kept, %d trips: want it kept in 3 (BEGIN, the insert, COMMIT):\n%s", err, subjects(t, "Not carried 6"), trips.N(), trips)
		}
	})
}
