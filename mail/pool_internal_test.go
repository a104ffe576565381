package mail

import (
	"context"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

// TestAReturnedSessionClosesThoseIdleTooLong: the sessions of a burst do
// not wait for a burst to come again, which take alone would need to
// find them stale; each one given back closes those idle past the limit.
func TestAReturnedSessionClosesThoseIdleTooLong(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	r, err := NewRelay(RelayConfig{URL: srv.URL(), HeloName: "helpdesk.example.com", DialTimeout: 5 * time.Second,
		CommandTimeout: 5 * time.Second, SessionIdle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	var sessions []*session
	for range 3 {
		s, err := r.fresh(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	old, fresh, back := sessions[0], sessions[1], sessions[2]
	r.pool.put(old)
	r.pool.put(fresh)
	r.pool.mu.Lock()
	old.idle = old.idle.Add(-2 * time.Minute) // idle past the limit, as after a burst
	r.pool.mu.Unlock()

	r.pool.put(back)
	r.pool.mu.Lock()
	kept := append([]*session(nil), r.pool.idle...)
	r.pool.mu.Unlock()
	if len(kept) != 2 || kept[0] != fresh || kept[1] != back {
		t.Errorf("kept %d sessions, want the two idle within the limit, oldest first", len(kept))
	}
	if err := old.c.Noop(); err == nil {
		t.Error("the session idle past the limit still answers: want it closed")
	}
	if err := fresh.c.Noop(); err != nil {
		t.Errorf("a session within the limit: %v", err)
	}
}
