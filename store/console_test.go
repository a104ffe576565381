package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// TestAQueuePageIsReadInOneTrip: the page's rows, its count, every view's
// count, whether any ticket is timed, the teams and the agents go to
// PostgreSQL in one batch.
func TestAQueuePageIsReadInOneTrip(t *testing.T) {
	t.Parallel()
	pool, st := team(t)
	id := newTicket(t, st)
	if _, err := assign(context.Background(), pool, id); err != nil {
		t.Fatal(err)
	}
	newTicket(t, st)
	ctx, trips := storetest.CountTrips(context.Background())

	page, err := st.QueuePage(ctx, &store.QueueParams{Agent: "ana", Teams: []string{"billing"}, View: "open", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if trips.N() != 1 {
		t.Errorf("%d trips, want 1:\n%s", trips.N(), trips)
	}
	if len(page.Rows) != 2 || page.Total != 2 || page.Counts["open"] != 2 || page.Counts["all"] != 2 {
		t.Errorf("rows %d, total %d, counts %v: want the two open tickets", len(page.Rows), page.Total, page.Counts)
	}
	mine := page.Counts["mine"] + page.Counts["unassigned"]
	if mine != 2 || page.Timed || len(page.Teams) != 1 || page.Teams[0] != "billing" || len(page.Agents) != 2 {
		t.Errorf("mine+unassigned %d, timed %v, teams %v, %d agents: want 2, false, [billing], 2", mine, page.Timed, page.Teams, len(page.Agents))
	}
}

// TestAQueuePageSettlesOnOnePlan: each view's page runs on a plan kept
// for it after its first few runs (plansKept), on the first page and on a
// later one. With its LIMIT and OFFSET as parameters every view was
// planned anew.
//
// Not "unassigned": its count is still planned anew, since a kept plan
// cannot know how many teams the agent's array holds, guesses ten, and
// costs the count a quarter dearer than the plans for one team. A page
// view plans that one statement; left as it is.
func TestAQueuePageSettlesOnOnePlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := team(t)
	if _, err := pool.Exec(ctx, `INSERT INTO tickets (customer_id, subject, status, team, assignee, created_at)
		SELECT 'C-0001', 'Invoice ' || i, (ARRAY['open', 'pending', 'solved', 'closed'])[1 + i % 4], 'billing',
			CASE WHEN i % 3 = 0 THEN 'ana' END, now() - i * interval '1 minute'
		FROM generate_series(1, 5000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE tickets, customers, ticket_slas`); err != nil { // as autovacuum would have by then
		t.Fatal(err)
	}
	for _, view := range store.Views {
		if view == "unassigned" {
			continue
		}
		for _, offset := range []int{0, 100} {
			t.Run(fmt.Sprintf("%s/from%d", view, offset), func(t *testing.T) {
				plansKept(t, pool, func(run int, b *store.Batch) {
					var (
						rows  []*store.QueueRow
						total int
					)
					b.Queue(&store.QueueParams{Agent: "ana", Teams: []string{"billing"}, View: view, Limit: 50, Offset: offset}, &rows, &total)
				})
			})
		}
	}
}

// TestAQueueCountReadsCustomersOnlyToSearchTheirEmail: a view's count
// reads no customer unless the search is by email, where it must.
func TestAQueueCountReadsCustomersOnlyToSearchTheirEmail(t *testing.T) {
	t.Parallel()
	pool, _ := team(t)
	for _, tc := range []struct {
		search    string
		customers bool
	}{{"", false}, {"invoice", false}, {"ada@", true}} {
		t.Run(fmt.Sprintf("search %q", tc.search), func(t *testing.T) {
			ctx, trips := storetest.CountTrips(context.Background())
			var (
				b     store.Batch
				rows  []*store.QueueRow
				total int
			)
			b.Queue(&store.QueueParams{Agent: "ana", Teams: []string{"billing"}, View: "unassigned", Search: tc.search, Limit: 50}, &rows, &total)
			if err := store.New(pool).Send(ctx, &b); err != nil {
				t.Fatal(err)
			}
			count := trips.Statements()[0]
			plan := explain(t, pool, count.SQL, count.Args)
			if got := strings.Contains(plan, "customers"); got != tc.customers {
				t.Errorf("the count reads customers: %v, want %v\n%s", got, tc.customers, plan)
			}
		})
	}
}
