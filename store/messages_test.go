package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// ticketWithMessages makes a ticket of n messages, alternating inbound and
// outbound, each with a Message-ID, and a reply after them.
func ticketWithMessages(tb testing.TB, pool *pgxpool.Pool, n int) (*store.Store, *store.Message, []*store.Message) {
	tb.Helper()
	ctx := context.Background()
	st := store.New(pool)
	addAda(tb, st)
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Hello"})
	if err != nil {
		tb.Fatal(err)
	}
	var msgs []*store.Message
	for i := range n + 1 {
		dir := []vocab.Direction{vocab.DirectionInbound, vocab.DirectionOutbound}[i%2]
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

// agentHeavy is a ticket's mix of messages (replyAfter's direction): one
// inbound message, then only the agents' replies.
const agentHeavy = `CASE WHEN i = 0 THEN 'inbound' ELSE 'outbound' END`

// replyAfter makes a ticket of n messages a second apart, each i of
// generate_series(0, n-1) going the way direction says (an SQL
// expression of i) with a Message-ID unless it is a note, and an agent's
// reply after them, which it returns. One INSERT writes the n.
func replyAfter(tb testing.TB, pool *pgxpool.Pool, st *store.Store, n int, direction string) *store.Message {
	tb.Helper()
	ctx := context.Background()
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Hello"})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO messages (ticket_id, direction, author, body, email_message_id, created_at)
		SELECT $1, `+direction+`, 'x', '…', CASE WHEN `+direction+` <> 'note' THEN '<m' || i || '.' || $1 || '@example.com>' END,
			now() - interval '1 day' + i * interval '1 second'
		FROM generate_series(0, $2 - 1) i`, ticket.ID, n); err != nil {
		tb.Fatal(err)
	}
	id := "<reply." + ticket.ID + "@example.com>"
	reply, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionOutbound,
		Author: "x", Body: "…", EmailMessageID: &id})
	if err != nil {
		tb.Fatal(err)
	}
	return reply
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
			len(thread.Earlier) != 41 || thread.Earlier[1] != *earlier[260].EmailMessageID {
			t.Errorf("read %d ids: %v … %v", len(thread.Earlier), thread.Earlier[:2], thread.Earlier[len(thread.Earlier)-1])
		}
	})
}

// TestAReplysReadsCostAsMuchOnALongTicketAsOnAShortOne: what renders a
// reply (its thread and the message it quotes) reads as many pages on a
// ticket of 5,000 messages as on one of 10, with the plan a pooled
// connection settles on (generic) and the table as a burst of writes
// leaves it: vacuumed, its pages all visible, not analysed since. Before,
// the reply's own time was found by walking the ticket's index entries.
func TestAReplysReadsCostAsMuchOnALongTicketAsOnAShortOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, st := withAda(t)
	if _, err := pool.Exec(ctx, `ALTER TABLE messages SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	replies := map[int]*store.Message{}
	for _, n := range []int{10, 5000} {
		replies[n] = replyAfter(t, pool, st, n, agentHeavy)
	}
	if _, err := pool.Exec(ctx, `VACUUM messages`); err != nil {
		t.Fatal(err)
	}
	// The pages each read takes, by its statement's first words.
	pages := func(t *testing.T, reply *store.Message) map[string]int {
		t.Helper()
		counted, trips := storetest.CountTrips(ctx)
		var reads store.Batch
		read := queueReplyReads(&reads, reply)
		if err := st.Send(counted, &reads); err != nil {
			t.Fatal(err)
		}
		if read.quoted == nil || len(read.thread.Earlier) == 0 {
			t.Fatalf("read no thread (%+v) or no quote", read.thread)
		}
		got := map[string]int{}
		for i, s := range trips.Statements() {
			got[fmt.Sprintf("%d %.40s", i, strings.Join(strings.Fields(s.SQL), " "))] = genericPlanPages(t, pool, s)
		}
		return got
	}
	short, long := pages(t, replies[10]), pages(t, replies[5000])
	for stmt, n := range long {
		if n > short[stmt]+15 {
			t.Errorf("%s…: %d pages on a ticket of 5,000 messages, %d on one of 10", stmt, n, short[stmt])
		}
	}
}

// TestAReplysReadsSettleOnOnePlan: the statements that render a reply
// run on a plan kept for them after their first few runs (plansKept).
// With the thread's window as a parameter (LIMIT $3) a kept plan could
// not know it, looked dearer, and on an agent-heavy desk every read was
// planned anew: 300 µs of planning for 34 of execution.
func TestAReplysReadsSettleOnOnePlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, st := withAda(t)
	short, long := replyAfter(t, pool, st, 10, agentHeavy), replyAfter(t, pool, st, 10000, agentHeavy)
	if _, err := pool.Exec(ctx, `ANALYZE messages`); err != nil { // as autovacuum would have by then
		t.Fatal(err)
	}
	plansKept(t, pool, func(run int, b *store.Batch) {
		queueReplyReads(b, []*store.Message{short, long}[run%2])
	})
}

// replyReads are what renders a reply, as read by its store.
type replyReads struct {
	thread store.ThreadIDs
	quoted *store.Message
}

// queueReplyReads queues what renders reply: its thread and the message
// it quotes.
func queueReplyReads(b *store.Batch, reply *store.Message) *replyReads {
	r := &replyReads{}
	b.ReplyThread(reply.TicketID, reply.ID, &r.thread)
	b.QuotedMessage(reply.TicketID, reply.ID, &r.quoted)
	return r
}

// BenchmarkReplyThread shows that building a reply's thread costs the same
// on a ticket of 10,000 messages as on one of 10, whatever their mix: it
// reports the time of each and their ratio (goal: at most 1.5).
func BenchmarkReplyThread(b *testing.B) {
	mixes := map[string]string{
		"Alternating": `(ARRAY['inbound', 'outbound'])[1 + i % 2]`,
		"AgentHeavy":  agentHeavy,
		// One exchange, then notes and mail to agents.
		"AgentSideHeavy": `CASE WHEN i = 0 THEN 'inbound' WHEN i = 1 THEN 'outbound' ELSE (ARRAY['note', 'notification'])[1 + i % 2] END`,
	}
	for name, direction := range mixes {
		b.Run(name, func(b *testing.B) {
			pool, st := withAda(b)
			ctx := context.Background()
			replies := map[int]*store.Message{}
			for _, n := range []int{10, 10000} {
				replies[n] = replyAfter(b, pool, st, n, direction)
			}
			// As autovacuum would have by then.
			if _, err := pool.Exec(ctx, `ANALYZE messages`); err != nil {
				b.Fatal(err)
			}
			var short, long time.Duration
			for b.Loop() {
				for _, n := range []int{10, 10000} {
					start := time.Now()
					if _, err := st.ReplyThread(ctx, replies[n]); err != nil {
						b.Fatal(err)
					}
					if n == 10 {
						short += time.Since(start)
					} else {
						long += time.Since(start)
					}
				}
			}
			b.ReportMetric(float64(short.Microseconds())/float64(b.N), "µs@10")
			b.ReportMetric(float64(long.Microseconds())/float64(b.N), "µs@10000")
			b.ReportMetric(float64(long)/float64(short), "ratio")
		})
	}
}
