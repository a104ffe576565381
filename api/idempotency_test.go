package api_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// riverNotify is in the statement of River's notification of an insert,
// which it sends at most once a while per queue: not the intake's trip.
const riverNotify = "Notify"

// TestTheKeysClaimCostsNoTripOfItsOwn holds an intake with an
// Idempotency-Key to the trips of one without: its claim goes with the
// transaction's first statements, ahead of the ticket's numbers, and a
// repeat stops there, so that it writes nothing and numbers nothing.
func TestTheKeysClaimCostsNoTripOfItsOwn(t *testing.T) {
	t.Parallel()
	b := setupIntake(t, 0)
	var (
		mu    sync.Mutex
		trips *storetest.Trips
	)
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, tr := storetest.CountTrips(r.Context())
		mu.Lock()
		trips = tr
		mu.Unlock()
		b.server.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(counted.Close)
	b.url = counted.URL
	last := func() *storetest.Trips {
		mu.Lock()
		defer mu.Unlock()
		return trips
	}
	numbers := func(t *testing.T) (ticket, message int64) {
		t.Helper()
		if err := b.Pool.QueryRow(b.Ctx, `SELECT coalesce(pg_sequence_last_value('ticket_number_seq'), 0),
			coalesce(pg_sequence_last_value(pg_get_serial_sequence('messages', 'id')::regclass), 0)`).Scan(&ticket, &message); err != nil {
			t.Fatal(err)
		}
		return ticket, message
	}
	// The API key's first use reads it, and River tells its queue of the
	// first insert: neither is the intake's.
	if s, _, resp := b.do(t, b.c22, "POST", "/v1/tickets", ticketBody("C-0022", "Warm-up"), "warm-up"); s != 202 {
		t.Fatalf("warm-up: %d %v", s, resp)
	}

	body := ticketBody("C-0022", "Late parcel")
	s, _, first := b.do(t, b.c22, "POST", "/v1/tickets", body, "late-parcel")
	if s != 202 {
		t.Fatalf("first: %d %v", s, first)
	}
	// BEGIN with the claim and the numbers, the job's among them; the
	// rows, the answer and River's insert with COMMIT.
	if tr := last(); tr.NWithout(riverNotify) != 2 || !tr.Together("INSERT INTO idempotency_keys", "ticket_number_seq") ||
		!tr.Together("INSERT INTO tickets", "UPDATE idempotency_keys", "JobInsertFastMany", "commit") {
		t.Errorf("a new request: %d trips, want 2, the claim with the numbers, the answer and River's insert with the commit:\n%s",
			tr.NWithout(riverNotify), tr)
	}
	before := b.rows(t)
	ticket, message := numbers(t)

	t.Run("ARepeatTakesTwoTripsAndNoNumber", func(t *testing.T) {
		s, h, again := b.do(t, b.c22, "POST", "/v1/tickets", body, "late-parcel")
		if s != 202 || again["ticket_id"] != first["ticket_id"] || h.Get("Idempotent-Replayed") != "true" {
			t.Errorf("repeat: %d %v (replayed %q), want %v replayed", s, again, h.Get("Idempotent-Replayed"), first)
		}
		// The claim, stopped by the key taken, with the first answer; the rollback.
		if tr := last(); tr.NWithout(riverNotify) > 2 {
			t.Errorf("a repeat: %d trips, want at most 2:\n%s", tr.NWithout(riverNotify), tr)
		}
		if gotT, gotM := numbers(t); gotT != ticket || gotM != message {
			t.Errorf("a repeat took numbers: ticket %d → %d, message %d → %d", ticket, gotT, message, gotM)
		}
		if after := b.rows(t); after != before {
			t.Errorf("rows %+v became %+v", before, after)
		}
	})

	t.Run("AKeyReusedIs422AndTakesNoNumber", func(t *testing.T) {
		status, _, resp := b.do(t, b.c22, "POST", "/v1/tickets", ticketBody("C-0022", "Another subject"), "late-parcel")
		requireError(t, status, resp, 422, "idempotency_key_reused")
		if gotT, gotM := numbers(t); gotT != ticket || gotM != message {
			t.Errorf("a reused key took numbers: ticket %d → %d, message %d → %d", ticket, gotT, message, gotM)
		}
		if after := b.rows(t); after != before {
			t.Errorf("rows %+v became %+v", before, after)
		}
	})
}
