package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// A fetcher killed without a word leaves its mailbox's row saying
// connected: it reads so only while the fetcher's lease runs.
func TestAMailboxIsConnectedOnlyWhileItsFetchersLeaseRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	if err := st.UpsertSupportAddress(ctx, &store.SupportAddress{Address: "support@example.org"}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertMailbox(ctx, &store.Mailbox{Name: "support", Address: "support@example.org", IMAPURL: "imaps://imap.example.org",
		Password: "pw", ProcessedFolder: "Processed", AfterImport: "move"}); err != nil {
		t.Fatal(err)
	}
	connected := func(t *testing.T) bool {
		t.Helper()
		m, err := st.GetMailbox(ctx, "support")
		if err != nil {
			t.Fatal(err)
		}
		list, err := st.ListMailboxes(ctx)
		if err != nil || len(list) != 1 || list[0].Connected != m.Connected {
			t.Fatalf("listed %+v (%v), want the one mailbox, as read alone", list, err)
		}
		return m.Connected
	}
	if held, err := st.ClaimMailbox(ctx, "support", "worker-1", time.Hour); err != nil || !held {
		t.Fatalf("claim: %v %v", held, err)
	}
	if err := st.MailboxOK(ctx, "support"); err != nil {
		t.Fatal(err)
	}
	if !connected(t) {
		t.Fatal("not connected while its fetcher holds the lease and said so")
	}
	// The fetcher is killed: nobody renews the lease, which runs out.
	if _, err := pool.Exec(ctx, `UPDATE mailboxes SET lease_until = now() - interval '1 second' WHERE name = 'support'`); err != nil {
		t.Fatal(err)
	}
	if connected(t) {
		t.Error("connected after its fetcher's lease ran out")
	}
}
