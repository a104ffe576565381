package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/store"
	"helpdesk/store/storetest"
)

// ticketWithMessages makes a ticket of n messages, alternating inbound and
// outbound, each with a Message-ID, and a reply after them.
func ticketWithMessages(tb testing.TB, pool *pgxpool.Pool, n int) (*store.Store, *store.Message, []*store.Message) {
	tb.Helper()
	ctx := context.Background()
	st := store.New(pool)
	if _, err := st.InsertCustomer(ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "ada@example.com", Name: "Ada"}); err != nil {
		tb.Fatal(err)
	}
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Hello"})
	if err != nil {
		tb.Fatal(err)
	}
	var msgs []*store.Message
	for i := range n + 1 {
		dir := []string{store.DirectionInbound, store.DirectionOutbound}[i%2]
		id := fmt.Sprintf("<m%05d@example.com>", i)
		m, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: dir, Author: "x", Body: "…", EmailMessageID: &id})
		if err != nil {
			tb.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	// As autovacuum would have by then: without statistics the planner
	// guesses a few rows and sorts instead of walking the index.
	if _, err := pool.Exec(ctx, `ANALYZE messages`); err != nil {
		tb.Fatal(err)
	}
	return st, msgs[n], msgs[:n]
}

func TestReplyThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("TheReplyIsNeverInItsOwnThread", func(t *testing.T) {
		t.Parallel()
		st, reply, earlier := ticketWithMessages(t, storetest.NewPool(t), 5)
		thread, err := st.ReplyThread(ctx, reply)
		if err != nil {
			t.Fatal(err)
		}
		if thread.Root != *earlier[0].EmailMessageID || len(thread.Earlier) != 5 || thread.Parent != *earlier[4].EmailMessageID {
			t.Errorf("thread %+v", thread)
		}
		for _, id := range append(thread.Earlier, thread.Parent, thread.Root) {
			if id == *reply.EmailMessageID {
				t.Errorf("the reply %s is in its own thread %+v", id, thread)
			}
		}
	})

	t.Run("ALongTicketReadsTheRootAndTheNewestOnly", func(t *testing.T) {
		t.Parallel()
		st, reply, earlier := ticketWithMessages(t, storetest.NewPool(t), 300)
		thread, err := st.ReplyThread(ctx, reply)
		if err != nil {
			t.Fatal(err)
		}
		if thread.Earlier[0] != *earlier[0].EmailMessageID || thread.Earlier[len(thread.Earlier)-1] != *earlier[299].EmailMessageID ||
			len(thread.Earlier) != 101 || thread.Earlier[1] != *earlier[200].EmailMessageID {
			t.Errorf("read %d ids: %v … %v", len(thread.Earlier), thread.Earlier[:2], thread.Earlier[len(thread.Earlier)-1])
		}
	})
}

// BenchmarkReplyThread shows that building a reply's thread does not cost
// more on a long ticket: compare ns/op across the lengths.
func BenchmarkReplyThread(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("Messages%d", n), func(b *testing.B) {
			st, reply, _ := ticketWithMessages(b, storetest.NewPool(b), n)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := st.ReplyThread(ctx, reply); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
