package desk

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
		exec(`INSERT INTO tickets (id, customer_id, subject, embedding) VALUES ($1, 'C-0001', 'S', '{0,0,1}')`, id)
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
	late, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	if _, err := late.Exec(ctx, `UPDATE tickets SET embedding = '{1,0,0}', updated_at = now() WHERE id = 'T-1'`); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE tickets SET embedding = '{0,1,0}', updated_at = now() WHERE id = 'T-2'`)

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
}

// TestASweepTakesOutTicketsNoLongerEmbedded: a ticket deleted, or whose
// vector is taken away, reports no change to a refresh; the sweep every
// sweepEvery takes it out of the index.
func TestASweepTakesOutTicketsNoLongerEmbedded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, exec := customerOnly(t)
	for id, vec := range map[string]string{"T-1": "{1,0,0}", "T-2": "{0,1,0}", "T-3": "{0,0,1}"} {
		exec(`INSERT INTO tickets (id, customer_id, subject, embedding) VALUES ($1, 'C-0001', 'S', $2)`, id, vec)
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
	exec(`UPDATE tickets SET embedding = NULL WHERE id = 'T-2'`)

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
