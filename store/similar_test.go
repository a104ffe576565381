package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TestATicketNamesTheTransactionThatChangedWhatTheVectorIndexHolds: an
// update of its vector, status or team moves changed_xid, which the vector
// index's refresh reads; an update of anything else (a draft, the triage
// job) leaves it, so that it writes none of the ticket's indexes.
func TestATicketNamesTheTransactionThatChangedWhatTheVectorIndexHolds(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	ctx := context.Background()
	id := newTicket(t, st)
	changedBy := func() int64 {
		t.Helper()
		var v int64
		if err := pool.QueryRow(ctx, `SELECT changed_xid::text::bigint FROM tickets WHERE id = $1`, id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	last := changedBy()
	for _, tc := range []struct {
		name  string
		moves bool
		write func() error
	}{
		{"TheTriageJob", false, func() error { return st.SetTicketTriageJob(ctx, id, 7) }},
		{"TheDraft", false, func() error { return st.SetTicketDraftReply(ctx, id, "Hello", 7) }},
		{"TheVector", true, func() error {
			return store.Run(ctx, pool, func(tx *store.Tx) error {
				tx.Later(func(b *store.Batch) { b.SetTicketEmbedding(id, []float32{1, 0}, "") })
				return nil
			})
		}},
		{"ThePriority", false, func() error { return st.SetTicketPriority(ctx, id, 2) }},
		{"TheTeam", true, func() error { return st.SetTicketTeam(ctx, id, "billing") }},
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
	page, err := st.EmbeddedVectors(ctx, 0, "", 10)
	if err != nil || len(page) != 1 || page[0].ID != id || page[0].ChangedBy != last {
		t.Errorf("full read %+v (%v), want the one embedded ticket as its last change left it", page, err)
	}
}

// TestTheFullReadOfVectorsPagesThroughEveryEmbeddedTicketOnce: pages of
// two, by the transaction that changed each and its id, three tickets
// embedded in two transactions, and none without a vector.
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
	var after int64
	afterID := ""
	for range 4 {
		page, err := st.EmbeddedVectors(ctx, after, afterID, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page {
			read = append(read, v.ID)
		}
		if len(page) < 2 {
			break
		}
		after, afterID = page[len(page)-1].ChangedBy, page[len(page)-1].ID
	}
	if want := []string{a, c, b}; !slices.Equal(read, want) {
		t.Errorf("read %v, want %v: each embedded ticket once, by its transaction then its id", read, want)
	}
}
