package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
)

// serializedAssign is the assignment as it was before migration 022, kept
// as the baseline: a team-wide advisory lock held while the pick counts
// every agent's open tickets.
func serializedAssign(ctx context.Context, tx *store.Tx, ticketID, team string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('helpdesk.assign.' || $1))`, team); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `WITH pick AS (
			SELECT a.name FROM agents a JOIN agent_teams t ON t.agent = a.name
			WHERE t.team = $2 AND a.disabled_at IS NULL
			ORDER BY (SELECT count(*) FROM tickets k WHERE k.assignee = a.name AND k.status IN ('open', 'pending')),
			         a.last_assigned_at NULLS FIRST, a.name
			LIMIT 1
		), assigned AS (
			UPDATE tickets SET assignee = (SELECT name FROM pick), updated_at = now()
			WHERE id = $1 AND assignee IS NULL RETURNING assignee
		)
		UPDATE agents SET last_assigned_at = clock_timestamp() WHERE name = (SELECT assignee FROM assigned)`, ticketID, team)
	return err
}

// BenchmarkAssign opens and assigns tickets of one team from 8 goroutines,
// each in a transaction with the ticket's insert, over a queue of 3,000
// open tickets: the team lock and count before, the kept loads and SKIP
// LOCKED now. It reports assignments/s of each and the ratio.
func BenchmarkAssign(b *testing.B) {
	pool, st := team(b)
	ctx := context.Background()
	if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: "cyd", DisplayName: "cyd", Email: "cyd@example.com", Teams: []string{"billing"}}); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO tickets (id, customer_id, subject, status, team, assignee)
		SELECT 'T-' || (800000 + g), 'C-0001', 'Old ' || g, 'open', 'billing', (ARRAY['ana', 'ben', 'cyd'])[1 + g % 3]
		FROM generate_series(1, 3000) g`); err != nil {
		b.Fatal(err)
	}
	rate := func(b *testing.B, assign func(ctx context.Context, tx *store.Tx, id string) error) float64 {
		const workers, each = 8, 100
		var done atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					err := store.Run(ctx, pool, func(tx *store.Tx) error {
						tk, err := tx.Store().InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: fmt.Sprintf("New %d %d", w, i)})
						if err != nil {
							return err
						}
						return assign(ctx, tx, tk.ID)
					})
					if err != nil {
						b.Error(err)
						return
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(done.Load()) / time.Since(start).Seconds()
	}
	for range b.N {
		before := rate(b, func(ctx context.Context, tx *store.Tx, id string) error {
			return serializedAssign(ctx, tx, id, "billing")
		})
		now := rate(b, func(ctx context.Context, tx *store.Tx, id string) error {
			_, _, err := tx.Store().AssignToTeam(ctx, &store.AssignParams{TicketID: id, Team: "billing", Priority: 2})
			return err
		})
		b.ReportMetric(before, "serialized_assignments/s")
		b.ReportMetric(now, "shipped_assignments/s")
		b.ReportMetric(now/before, "ratio")
	}
}
