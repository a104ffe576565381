package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TestATicketNamesTheTransactionThatChangedWhatTheVectorIndexHolds: a
// new vector, or a change of the ticket's status or team, moves the
// vector's changed_xid, which the vector index's refresh reads; an update
// of anything else (a draft, the triage job, the priority), or one that
// sets the team it had, leaves it, so that it writes no index.
func TestATicketNamesTheTransactionThatChangedWhatTheVectorIndexHolds(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	id := newTicket(t, st)
	changedBy := func() int64 {
		t.Helper()
		var v int64
		if err := pool.QueryRow(ctx, `SELECT coalesce((SELECT changed_xid::text::bigint FROM ticket_embeddings WHERE ticket_id = $1), 0)`, id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	embed := func(vec []float32) func() error {
		return func() error {
			return store.Run(ctx, pool, func(tx *store.Tx) error {
				tx.Later(func(b *store.Batch) { b.SetTicketEmbedding(id, vec, "") })
				return nil
			})
		}
	}
	last := changedBy()
	for _, tc := range []struct {
		name  string
		moves bool
		write func() error
	}{
		{"TheTeamBeforeAnyVector", false, func() error { return st.SetTicketTeam(ctx, id, "shipping") }},
		{"TheTriageJob", false, func() error { return st.SetTicketTriageJob(ctx, id, 7) }},
		{"TheDraft", false, func() error { return st.SetTicketDraftReply(ctx, id, "Hello", 7) }},
		{"TheVector", true, embed([]float32{1, 0})},
		{"ANewVector", true, embed([]float32{0, 1})},
		{"ThePriority", false, func() error { return st.SetTicketPriority(ctx, id, 2) }},
		{"TheTeam", true, func() error { return st.SetTicketTeam(ctx, id, "billing") }},
		{"TheSameTeamAgain", false, func() error { return st.SetTicketTeam(ctx, id, "billing") }},
		{"TheStatus", true, func() error { return st.SetTicketStatus(ctx, id, vocab.StatusPending) }},
	} {
		if err := tc.write(); err != nil {
			t.Fatal(err)
		}
		now := changedBy()
		if moved := now != last; moved != tc.moves {
			t.Errorf("%s: changed_xid %d → %d, want moved %v", tc.name, last, now, tc.moves)
		}
		last = now
	}
	page, err := st.EmbeddedVectors(ctx, "", 10)
	if err != nil || len(page) != 1 || page[0].ID != id || page[0].ChangedBy != last || !slices.Equal(page[0].Embedding, []float32{0, 1}) ||
		page[0].Status != vocab.StatusPending || page[0].Team != "billing" {
		t.Errorf("full read %+v (%v), want the one embedded ticket as its last changes left it", page, err)
	}
}

// TestAVectorForATicketThatIsGoneIsNotWritten: triage may embed a ticket
// deleted meanwhile; the save writes nothing and fails nothing, so the job
// is not retried over it.
func TestAVectorForATicketThatIsGoneIsNotWritten(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	id := newTicket(t, st)
	if _, err := pool.Exec(ctx, `DELETE FROM tickets WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := store.Run(ctx, pool, func(tx *store.Tx) error {
		tx.Later(func(b *store.Batch) { b.SetTicketEmbedding(id, []float32{1, 0}, "") })
		return nil
	}); err != nil {
		t.Fatalf("embedding a ticket that is gone: %v, want nothing written and no error", err)
	}
	if ids, err := st.EmbeddedIDs(ctx); err != nil || len(ids) != 0 {
		t.Errorf("embedded tickets %v (%v), want none", ids, err)
	}
}

// TestTheFullReadOfVectorsPagesThroughEveryEmbeddedTicketOnce: pages of
// two, by id, three tickets embedded in two transactions, and none
// without a vector.
func TestTheFullReadOfVectorsPagesThroughEveryEmbeddedTicketOnce(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	a, b, c := newTicket(t, st), newTicket(t, st), newTicket(t, st)
	newTicket(t, st) // not embedded
	for _, ids := range [][]string{{a, c}, {b}} {
		if err := store.Run(ctx, pool, func(tx *store.Tx) error {
			for _, id := range ids {
				tx.Later(func(q *store.Batch) { q.SetTicketEmbedding(id, []float32{1, 0}, "") })
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var read []string
	afterID := ""
	for range 4 {
		page, err := st.EmbeddedVectors(ctx, afterID, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page {
			read = append(read, v.ID)
		}
		if len(page) < 2 {
			break
		}
		afterID = page[len(page)-1].ID
	}
	if want := []string{a, b, c}; !slices.Equal(read, want) {
		t.Errorf("read %v, want %v: each embedded ticket once, by id", read, want)
	}
}

// TestUpdatesOfWhatNoIndexHoldsAreHeapOnly: a draft, the first response's
// time and the triage job change no indexed column of a ticket (not even
// changed_xid or updated_at), so on a page with room PostgreSQL writes
// them without touching the ticket's indexes (HOT; counted for the
// transaction by pg_stat_xact_user_tables). The ticket's four versions,
// its vector kept apart, fit the first page of a table no other test
// writes to.
func TestUpdatesOfWhatNoIndexHoldsAreHeapOnly(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	id := newTicket(t, st)
	var hot int64
	err := store.Run(ctx, pool, func(tx *store.Tx) error {
		tx.Later(func(b *store.Batch) { b.SetTicketEmbedding(id, make([]float32, 384), "") })
		if err := tx.Flush(ctx); err != nil {
			return err
		}
		txs := tx.Store()
		for _, write := range []func() error{
			func() error { return txs.SetTicketTriageJob(ctx, id, 7) },
			func() error { return txs.SetTicketDraftReply(ctx, id, "Hello", 7) },
			func() error { return txs.AgentResponded(ctx, id) },
		} {
			if err := write(); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `SELECT n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relid = 'tickets'::regclass`).Scan(&hot)
	})
	if err != nil {
		t.Fatal(err)
	}
	if hot != 3 {
		t.Errorf("%d of the three updates were heap-only, want all: one of them changed an indexed column", hot)
	}
}

// TestAPossibleDuplicateIsMarkedWithTheVectorAndFollowsAMerge: the embed
// step's mark rides on the vector's row; a later vector without one keeps
// it; merging the ticket it names moves it to the merge's target, or
// takes it away from the target itself, and leaves the merged ticket
// none, each ticket's time of change moved.
func TestAPossibleDuplicateIsMarkedWithTheVectorAndFollowsAMerge(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	first, second, third := newTicket(t, st), newTicket(t, st), newTicket(t, st)
	run := func(f func(b *store.Batch)) {
		t.Helper()
		if err := store.Run(ctx, pool, func(tx *store.Tx) error { tx.Later(f); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	markOf := func(id string) string {
		t.Helper()
		tk, err := st.GetTicket(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.PossibleDuplicateOf == nil {
			return ""
		}
		return *tk.PossibleDuplicateOf
	}
	run(func(b *store.Batch) {
		b.SetTicketEmbedding(first, []float32{1, 0}, "")
		b.SetTicketEmbedding(second, []float32{1, 0}, first)
		b.SetTicketEmbedding(third, []float32{1, 0}, first)
	})
	if got := markOf(second); got != first {
		t.Fatalf("second marked a duplicate of %q, want %s", got, first)
	}
	run(func(b *store.Batch) { b.SetTicketEmbedding(second, []float32{0, 1}, "") })
	if got := markOf(second); got != first {
		t.Errorf("a new vector without a duplicate: second marked %q, want %s kept", got, first)
	}
	before, err := st.GetTicket(ctx, third)
	if err != nil {
		t.Fatal(err)
	}
	run(func(b *store.Batch) {
		b.SetTicketEmbedding(first, []float32{1, 0}, third)
		b.Merge(first, second)
	})
	for _, tc := range []struct{ ticket, want string }{{first, ""}, {second, ""}, {third, second}} {
		if got := markOf(tc.ticket); got != tc.want {
			t.Errorf("after the merge of %s into %s: %s marked a duplicate of %q, want %q", first, second, tc.ticket, got, tc.want)
		}
	}
	if after, err := st.GetTicket(ctx, third); err != nil || !after.UpdatedAt.After(before.UpdatedAt) {
		t.Errorf("the ticket whose mark moved: updated %v, then %v (%v); want later", before.UpdatedAt, after.UpdatedAt, err)
	}
}

// TestARefreshReadsInOneStatementWhatItHasNotSeen: the tickets changed
// since a horizon come with their vectors, but for those the caller saw
// as their last transaction left them; the horizon comes back also when
// nothing changed, and never goes back.
func TestARefreshReadsInOneStatementWhatItHasNotSeen(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	a, b := newTicket(t, st), newTicket(t, st)
	newTicket(t, st) // not embedded
	for _, id := range []string{a, b} {
		if err := store.Run(ctx, pool, func(tx *store.Tx) error {
			tx.Later(func(q *store.Batch) { q.SetTicketEmbedding(id, []float32{1, 0}, "") })
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(since int64, seen []store.TicketChange) ([]store.TicketVector, int64) {
		t.Helper()
		ctx, trips := storetest.CountTrips(ctx)
		changed, next, err := st.VectorsChangedSince(ctx, since, seen)
		if err != nil {
			t.Fatal(err)
		}
		if n := trips.Statements(); len(n) != 1 {
			t.Errorf("%d statements, want 1", len(n))
		}
		return changed, next
	}
	ids := func(vs []store.TicketVector) (out []string) {
		for _, v := range vs {
			out = append(out, v.ID)
		}
		slices.Sort(out)
		return out
	}

	all, first := read(0, nil)
	t.Run("EveryEmbeddedTicketChangedSinceTheStartComesWithItsVector", func(t *testing.T) {
		if want := []string{a, b}; !slices.Equal(ids(all), want) {
			t.Errorf("changed %v, want %v", ids(all), want)
		}
		for _, v := range all {
			if !slices.Equal(v.Embedding, []float32{1, 0}) || v.Status != vocab.StatusOpen || v.ChangedBy == 0 {
				t.Errorf("%+v, want its vector, its status and the transaction that wrote it", v)
			}
		}
		if first == 0 {
			t.Error("no horizon")
		}
	})
	seen := make([]store.TicketChange, len(all))
	for i, v := range all {
		seen[i] = store.TicketChange{ID: v.ID, ChangedBy: v.ChangedBy}
	}
	t.Run("WhatWasSeenAsItsTransactionLeftItIsNotReadAgain", func(t *testing.T) {
		if changed, next := read(0, seen); len(changed) != 0 || next < first {
			t.Errorf("changed %v and horizon %d, want none and a horizon of at least %d", ids(changed), next, first)
		}
	})
	if err := st.SetTicketStatus(ctx, b, vocab.StatusPending); err != nil {
		t.Fatal(err)
	}
	t.Run("ATicketChangedAgainIsReadAgain", func(t *testing.T) {
		changed, next := read(0, seen)
		if len(changed) != 1 || changed[0].ID != b || changed[0].Status != vocab.StatusPending {
			t.Errorf("changed %+v, want %s alone, pending", changed, b)
		}
		if next < first {
			t.Errorf("horizon %d went back from %d", next, first)
		}
	})
}

// TestACustomersChangesAreReadWithoutTheirVectors: which of the
// customer's tickets opened in the window changed at or past the horizon,
// each with its transaction as a refresh reads it; another customer's
// tickets, tickets opened before the window and changes before the
// horizon are not read.
func TestACustomersChangesAreReadWithoutTheirVectors(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	if _, err := st.InsertCustomer(ctx, &store.InsertCustomerParams{ID: "C-0002", Email: "bea@example.com", Name: "Bea"}); err != nil {
		t.Fatal(err)
	}
	embed := func(customer string, opened time.Time) string {
		t.Helper()
		tk, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: customer, Subject: "S"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE tickets SET created_at = $2 WHERE id = $1`, tk.ID, opened); err != nil {
			t.Fatal(err)
		}
		if err := store.Run(ctx, pool, func(tx *store.Tx) error {
			tx.Later(func(q *store.Batch) { q.SetTicketEmbedding(tk.ID, []float32{1, 0}, "") })
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	now := time.Now()
	old := embed("C-0001", now.Add(-2*time.Hour))
	before, err := st.ChangeHorizon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, b := embed("C-0001", now), embed("C-0001", now)
	embed("C-0002", now)
	if _, err := pool.Exec(ctx, `UPDATE tickets SET status = 'pending' WHERE id = $1`, old); err != nil { // changed, but opened before the window
		t.Fatal(err)
	}
	all, _, err := st.VectorsChangedSince(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int64{}
	for _, v := range all {
		by[v.ID] = v.ChangedBy
	}

	changes, whole, err := st.CustomerChangesSince(ctx, "C-0001", now.Add(-time.Hour), before, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.TicketChange{{ID: a, ChangedBy: by[a]}, {ID: b, ChangedBy: by[b]}}
	slices.SortFunc(changes, func(x, y store.TicketChange) int { return strings.Compare(x.ID, y.ID) })
	if !slices.Equal(changes, want) || !whole {
		t.Errorf("changes %+v (whole %t), want %+v, whole", changes, whole, want)
	}
	if changes, whole, err := st.CustomerChangesSince(ctx, "C-0001", now.Add(-time.Hour), by[b]+1, 2); err != nil || len(changes) != 0 || !whole {
		t.Errorf("changes past the last %+v (whole %t, %v), want none, whole", changes, whole, err)
	}
	t.Run("ACustomerWithMoreTicketsInTheWindowThanItLooksAtIsNotWhole", func(t *testing.T) {
		if _, whole, err := st.CustomerChangesSince(ctx, "C-0001", now.Add(-time.Hour), before, 1); err != nil || whole {
			t.Errorf("whole %t (%v), want false: two tickets in the window, one looked at", whole, err)
		}
	})
}

// twentyChanged is a desk of Ada's 20 tickets, each embedded with a vector
// of the simulator's 384 dimensions.
func twentyChanged(b *testing.B) (*pgxpool.Pool, *store.Store) {
	pool, st := team(b)
	vector := make([]float32, 384)
	for i := range vector {
		vector[i] = float32(i%7)/7 - 0.5
	}
	for range 20 {
		id := newTicket(b, st)
		if err := store.Run(context.Background(), pool, func(tx *store.Tx) error {
			tx.Later(func(q *store.Batch) { q.SetTicketEmbedding(id, vector, "") })
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	return pool, st
}

// BenchmarkACustomersChangesRead measures what the duplicate search's
// read of its customer's changes costs, beside BenchmarkARefreshRead: the
// same 20 tickets changed since the last look, another customer's.
func BenchmarkACustomersChangesRead(b *testing.B) {
	pool, st := twentyChanged(b)
	ctx := context.Background()
	opened := time.Now().Add(-time.Hour)
	stop := storetest.MeasureCost(b, pool)
	for b.Loop() {
		if changes, whole, err := st.CustomerChangesSince(ctx, "C-0002", opened, 0, 64); err != nil || len(changes) != 0 || !whole {
			b.Fatalf("%d changes (whole %t, %v), want none", len(changes), whole, err)
		}
	}
	stop().Report(b, b.N, "read")
}

// BenchmarkARefreshRead measures what a vector index's refresh costs
// with 20 tickets changed since its last, each with a vector of the
// simulator's 384 dimensions: the time and the CPU, here and in
// PostgreSQL, of each read.
func BenchmarkARefreshRead(b *testing.B) {
	pool, st := twentyChanged(b)
	ctx := context.Background()
	stop := storetest.MeasureCost(b, pool)
	for b.Loop() {
		changed, _, err := st.VectorsChangedSince(ctx, 0, nil)
		if err != nil || len(changed) != 20 {
			b.Fatalf("%d changed (%v), want 20", len(changed), err)
		}
	}
	stop().Report(b, b.N, "read")
}
