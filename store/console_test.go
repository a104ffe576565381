package store_test

import (
	"context"
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
