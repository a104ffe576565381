package desk

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vectors"
)

// customerOnly is a schema with one customer, C-0001, and a way to run
// SQL on it.
func customerOnly(t *testing.T) (*pgxpool.Pool, func(sql string, args ...any)) {
	t.Helper()
	pool := storetest.NewPool(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO customers (id, email, name) VALUES ('C-0001', 'ada@example.com', 'Ada')`)
	return pool, exec
}

// TestTheVectorIndexFollowsEveryCommit holds the in-memory index to what
// is committed, however late a transaction commits: a refresh goes back
// to the oldest transaction running at the last one, not to a time.
func TestTheVectorIndexFollowsEveryCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, exec := customerOnly(t)
	for _, id := range []string{"T-1", "T-2", "T-3"} {
		embedded(exec, id, "{0,0,1}")
	}
	s := newMemorySimilarity(pool)
	nearest := func(vec []float32) string {
		t.Helper()
		hits, err := s.Similar(ctx, vec, 1, 0.99, func(string, vectors.Meta) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			return ""
		}
		return hits[0].ID
	}
	if got := nearest([]float32{0, 0, 1}); got == "" {
		t.Fatal("the first search found none of the three tickets")
	}

	// T-1 changes in a transaction that begins first and commits last.
	late := uncommitted(t, pool, `UPDATE ticket_embeddings SET embedding = '{1,0,0}', changed_xid = pg_current_xact_id() WHERE ticket_id = 'T-1'`)
	exec(`UPDATE ticket_embeddings SET embedding = '{0,1,0}', changed_xid = pg_current_xact_id() WHERE ticket_id = 'T-2'`)

	t.Run("AChangeCommittedIsSeenByTheNextSearch", func(t *testing.T) {
		if got := nearest([]float32{0, 1, 0}); got != "T-2" {
			t.Errorf("nearest to T-2's new vector: %q", got)
		}
		if got := nearest([]float32{1, 0, 0}); got != "" {
			t.Errorf("an uncommitted vector was found: %q", got)
		}
	})
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("AChangeCommittedAfterALaterOneIsSeenToo", func(t *testing.T) {
		if got := nearest([]float32{1, 0, 0}); got != "T-1" {
			t.Errorf("nearest to T-1's new vector: %q, want T-1 (its transaction committed after T-2's)", got)
		}
	})

	// T-4's first vector is written (as triage writes it) while its status
	// changes in another transaction: that transaction's update waits for
	// the vector's (both lock the ticket first), so its trigger sees the
	// vector's row and names itself there, and a refresh after it commits
	// reads the ticket again, whichever committed last.
	exec(`INSERT INTO tickets (id, customer_id, subject) VALUES ('T-4', 'C-0001', 'S')`)
	vector := store.Begin(pool)
	defer vector.Rollback(ctx)
	vector.Later(func(b *store.Batch) { b.SetTicketEmbedding("T-4", []float32{1, 1, 0}, "") })
	if err := vector.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	status, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer status.Rollback(ctx)
	updated := make(chan error, 1)
	go func() {
		_, err := status.Exec(ctx, `UPDATE tickets SET status = 'pending' WHERE id = 'T-4'`)
		updated <- err
	}()
	holder, err := vector.Pgx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	storetest.AwaitBlockedBy(t, pool, holder.Conn().PgConn().PID(), updated)
	if err := vector.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	all := func(string, vectors.Meta) bool { return true }
	if hits, err := s.Similar(ctx, []float32{1, 1, 0}, 1, 0.99, all); err != nil || len(hits) != 1 || hits[0].ID != "T-4" {
		t.Fatalf("T-4's vector not found once committed: %v, %v", hits, err)
	}
	if err := status.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("AStatusCommittedAfterTheVectorReachesTheIndex", func(t *testing.T) {
		pending := func(_ string, m vectors.Meta) bool { return m.Status == "pending" }
		hits, err := s.Similar(ctx, []float32{1, 1, 0}, 1, 0.99, pending)
		if err != nil || len(hits) != 1 || hits[0].ID != "T-4" {
			t.Errorf("pending tickets near T-4's vector: %v (%v), want T-4, whose status changed after the index read its vector", hits, err)
		}
	})
}

// uncommitted runs sql in a transaction it leaves open, for the test to
// commit when it chooses.
func uncommitted(t *testing.T, pool *pgxpool.Pool, sql string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
	return tx
}

// embedded writes ticket id of customer C-0001 with the vector vec.
func embedded(exec func(string, ...any), id, vec string) {
	exec(`INSERT INTO tickets (id, customer_id, subject) VALUES ($1, 'C-0001', 'S')`, id)
	exec(`INSERT INTO ticket_embeddings (ticket_id, embedding) VALUES ($1, $2)`, id, vec)
}

// TestASweepTakesOutTicketsNoLongerEmbedded: a ticket deleted, or whose
// vector is taken away, reports no change to a refresh; the sweep every
// sweepEvery takes it out of the index.
func TestASweepTakesOutTicketsNoLongerEmbedded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, exec := customerOnly(t)
	for id, vec := range map[string]string{"T-1": "{1,0,0}", "T-2": "{0,1,0}", "T-3": "{0,0,1}"} {
		embedded(exec, id, vec)
	}
	s := newMemorySimilarity(pool)
	found := func(vec []float32) string {
		t.Helper()
		hits, err := s.Similar(ctx, vec, 1, 0.99, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			return ""
		}
		return hits[0].ID
	}
	if found([]float32{1, 0, 0}) != "T-1" || found([]float32{0, 1, 0}) != "T-2" {
		t.Fatal("the index does not hold the tickets to begin with")
	}
	exec(`DELETE FROM tickets WHERE id = 'T-1'`)
	exec(`DELETE FROM ticket_embeddings WHERE ticket_id = 'T-2'`)

	t.Run("UntilTheSweepTheIndexKeepsThem", func(t *testing.T) {
		if found([]float32{1, 0, 0}) != "T-1" {
			t.Error("the deleted ticket left before the sweep: then the sweep is not what takes it out, and this test shows nothing")
		}
	})
	t.Run("TheSweepTakesOutTheDeletedAndTheUnembedded", func(t *testing.T) {
		s.mu.Lock()
		s.swept = time.Now().Add(-sweepEvery - time.Second)
		s.mu.Unlock()
		if got := found([]float32{1, 0, 0}); got != "" {
			t.Errorf("the deleted ticket %s is still found", got)
		}
		if got := found([]float32{0, 1, 0}); got != "" {
			t.Errorf("the ticket without a vector %s is still found", got)
		}
		if got := found([]float32{0, 0, 1}); got != "T-3" {
			t.Errorf("nearest to T-3's vector: %q, want T-3, which stays", got)
		}
		s.mu.Lock()
		swept := s.swept
		s.mu.Unlock()
		if time.Since(swept) > sweepEvery {
			t.Error("the sweep did not record itself")
		}
	})
}

// TestADuplicateIsLookedForAmongTheCustomersNewestTickets: a customer
// with more open tickets than duplicateCandidates (a machine, or a flood
// from one address) has each new ticket compared with its newest ones
// only, so that a ticket's search costs the same whatever the flood.
func TestADuplicateIsLookedForAmongTheCustomersNewestTickets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, exec := customerOnly(t)
	d := New(pool, nil, Config{MailDomain: "helpdesk.example.com"})
	// T-0000, the oldest, is the new ticket's twin; every later one is
	// about something else. The new one is opened last.
	opened := time.Now().Add(-time.Hour)
	open := func(id, vec string) {
		exec(`INSERT INTO tickets (id, customer_id, subject, created_at) VALUES ($1, 'C-0001', 'S', $2)`, id, opened)
		exec(`INSERT INTO ticket_embeddings (ticket_id, embedding) VALUES ($1, $2)`, id, vec)
		opened = opened.Add(time.Second)
	}
	open("T-0000", "{1,0,0}")
	duplicateOfNew := func(t *testing.T, id string) string {
		t.Helper()
		open(id, "{1,0,0}")
		dup, err := d.possibleDuplicate(ctx, &TriageResult{TicketID: id, Embedding: []float32{1, 0, 0}})
		if err != nil {
			t.Fatal(err)
		}
		return dup.of
	}
	for i := 1; i < duplicateCandidates; i++ {
		open(fmt.Sprintf("T-%04d", i), "{0,1,0}")
	}
	// Here T-0000 is among the newest duplicateCandidates before the new one.
	if got := duplicateOfNew(t, "T-NEW1"); got != "T-0000" {
		t.Fatalf("with %d open tickets, the duplicate found is %q; want T-0000", duplicateCandidates, got)
	}
	exec(`UPDATE tickets SET status = 'solved' WHERE id = 'T-NEW1'`)
	exec(`UPDATE ticket_embeddings SET changed_xid = pg_current_xact_id() WHERE ticket_id = 'T-NEW1'`)
	open("T-LAST", "{0,1,0}")
	// One more, and it is not.
	if got := duplicateOfNew(t, "T-NEW2"); got != "" {
		t.Errorf("with %d open tickets, the duplicate found is %q; want none: T-0000 is older than the newest %d",
			duplicateCandidates+1, got, duplicateCandidates)
	}
}

// TestADuplicateSearchRefreshesTheIndexOnlyForItsCustomersChanges: the
// duplicate search needs the index current for its customer's tickets
// alone. It finds a twin committed a moment ago, a twin whose transaction
// began before the last refresh and committed after it, and a status
// changed a moment ago; another customer's new ticket costs it no refresh.
func TestADuplicateSearchRefreshesTheIndexOnlyForItsCustomersChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, exec := customerOnly(t)
	exec(`INSERT INTO customers (id, email, name) VALUES ('C-0002', 'bea@example.com', 'Bea')`)
	embedded(exec, "T-1", "{0,0,1}")
	s := newMemorySimilarity(pool)
	since := time.Now().Add(-time.Hour)
	open := func(_ string, m vectors.Meta) bool { return m.Status == "open" }
	nearestOf := func(customer string, vec []float32) string {
		t.Helper()
		hits, err := s.SimilarOfCustomer(ctx, customer, vec, 1, 0.99, duplicateCandidates, since, open)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			return ""
		}
		return hits[0].ID
	}
	refreshed := func() time.Time {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.refreshed
	}
	if got := nearestOf("C-0001", []float32{0, 0, 1}); got != "T-1" {
		t.Fatalf("the first search found %q, want T-1", got)
	}

	t.Run("AnotherCustomersNewTicketCostsNoRefresh", func(t *testing.T) {
		exec(`INSERT INTO tickets (id, customer_id, subject) VALUES ('T-B', 'C-0002', 'S')`)
		exec(`INSERT INTO ticket_embeddings (ticket_id, embedding) VALUES ('T-B', '{1,1,1}')`)
		before := refreshed()
		if got := nearestOf("C-0001", []float32{0, 0, 1}); got != "T-1" {
			t.Errorf("found %q, want T-1", got)
		}
		if !refreshed().Equal(before) {
			t.Error("the index was refreshed for a change to another customer's ticket")
		}
		if got := nearestOf("C-0002", []float32{1, 1, 1}); got != "T-B" {
			t.Errorf("Bea's own search found %q, want her ticket committed a moment ago, T-B", got)
		}
	})

	t.Run("ATwinCommittedAMomentAgoIsFound", func(t *testing.T) {
		exec(`INSERT INTO tickets (id, customer_id, subject) VALUES ('T-2', 'C-0001', 'S')`)
		exec(`INSERT INTO ticket_embeddings (ticket_id, embedding) VALUES ('T-2', '{0,1,0}')`)
		if got := nearestOf("C-0001", []float32{0, 1, 0}); got != "T-2" {
			t.Errorf("found %q, want T-2, committed a moment ago", got)
		}
	})

	t.Run("ATwinCommittedAfterALaterRefreshIsFound", func(t *testing.T) {
		exec(`INSERT INTO tickets (id, customer_id, subject) VALUES ('T-3', 'C-0001', 'S')`)
		late := uncommitted(t, pool, `INSERT INTO ticket_embeddings (ticket_id, embedding) VALUES ('T-3', '{1,0,0}')`)
		exec(`UPDATE ticket_embeddings SET embedding = '{0,1,1}', changed_xid = pg_current_xact_id() WHERE ticket_id = 'T-2'`)
		if got := nearestOf("C-0001", []float32{0, 1, 1}); got != "T-2" { // a refresh, while T-3's transaction runs
			t.Fatalf("found %q, want T-2's new vector", got)
		}
		if err := late.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := nearestOf("C-0001", []float32{1, 0, 0}); got != "T-3" {
			t.Errorf("found %q, want T-3, whose transaction began before the last refresh and committed after it", got)
		}
	})

	t.Run("AChangeOlderThanTheTicketsTheReadLooksAtIsSeen", func(t *testing.T) {
		// Cy's oldest ticket, then more newer ones than the read looks at,
		// all in the index (a search of every ticket refreshes it, and
		// leaves Cy in nobody's mind as behind).
		exec(`INSERT INTO customers (id, email, name) VALUES ('C-0003', 'cy@example.com', 'Cy')`)
		exec(`INSERT INTO tickets (id, customer_id, subject) VALUES ('T-C0', 'C-0003', 'S')`)
		exec(`INSERT INTO ticket_embeddings (ticket_id, embedding) VALUES ('T-C0', '{1,0,1}')`)
		exec(`INSERT INTO tickets (id, customer_id, subject) SELECT 'T-C' || i, 'C-0003', 'S' FROM generate_series(1, $1::int) i`, maxCustomerCheck+1)
		exec(`INSERT INTO ticket_embeddings (ticket_id, embedding) SELECT 'T-C' || i, '{-1,0,0}' FROM generate_series(1, $1::int) i`, maxCustomerCheck+1)
		if _, err := s.Similar(ctx, []float32{1, 0, 1}, 1, 0.99, open); err != nil {
			t.Fatal(err)
		}
		exec(`UPDATE ticket_embeddings SET embedding = '{1,1,0}', changed_xid = pg_current_xact_id() WHERE ticket_id = 'T-C0'`)
		if got := nearestOf("C-0003", []float32{1, 1, 0}); got != "T-C0" {
			t.Errorf("found %q, want T-C0's new vector: it changed, older than the newest %d tickets the read looks at", got, maxCustomerCheck)
		}
	})

	t.Run("AStatusChangedAMomentAgoIsSeen", func(t *testing.T) {
		exec(`UPDATE tickets SET status = 'solved' WHERE id = 'T-1'`)
		if got := nearestOf("C-0001", []float32{0, 0, 1}); got != "" {
			t.Errorf("found %q, solved a moment ago, among the open tickets", got)
		}
	})
}
