package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// triageWorld is a ticket of Ada's with what a triage job reads: messages
// each way (one a participant's, one an auto-reply), teams of active and
// disabled agents, the provider's row, job 7's results with its vector,
// and job 9's classification.
func triageWorld(tb testing.TB) (*pgxpool.Pool, *store.Store, *store.Ticket) {
	tb.Helper()
	ctx := context.Background()
	pool, st := withAda(tb)
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Parcel"})
	if err != nil {
		tb.Fatal(err)
	}
	for i, m := range []struct {
		dir    vocab.Direction
		author vocab.Actor
		auto   bool
	}{
		{vocab.DirectionInbound, "customer:C-0001", false},
		{vocab.DirectionOutbound, "agent:alice", false},
		{vocab.DirectionInbound, "email:pat@example.com", false},
		{vocab.DirectionInbound, "customer:C-0001", true},
		{vocab.DirectionOutbound, "agent:alice", false},
		{vocab.DirectionInbound, "customer:C-0001", false},
	} {
		if _, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: m.dir, Author: m.author,
			Body: fmt.Sprintf("m%d", i), AutoSubmitted: m.auto}); err != nil {
			tb.Fatal(err)
		}
	}
	for _, a := range []struct{ name, team string }{{"alice", "billing"}, {"bilal", "shipping"}, {"chloe", "legal"}} {
		if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: a.name, DisplayName: a.name, Email: a.name + "@support.example.com",
			Teams: []string{a.team}}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := st.DisableAgent(ctx, "chloe"); err != nil {
		tb.Fatal(err)
	}
	if _, err := st.EnterProvider(ctx, "p", time.Minute, 0); err != nil {
		tb.Fatal(err)
	}
	var b store.Batch
	for _, task := range []string{"classify", "embed"} {
		b.InsertAIRun(&store.InsertAIRunParams{JobID: 7, TicketID: ticket.ID, Task: task, Output: "o", Model: "m"})
	}
	b.SetTicketEmbedding(ticket.ID, []float32{0.6, 0.8}, "")
	b.InsertAIRun(&store.InsertAIRunParams{JobID: 9, TicketID: ticket.ID, Task: "classify", Output: "o", Model: "m"})
	if err := st.Send(ctx, &b); err != nil {
		tb.Fatal(err)
	}
	return pool, st, ticket
}

// queueTriageRead queues the read as one statement, or apart as the eight
// it replaced.
func queueTriageRead(p *store.TriageReadParams, into *store.TriageRead, apart bool) *store.Batch {
	return queueOneOrApart((*store.Batch).TriageRead, (*store.Batch).TriageReadApart, p, into, apart)
}

// queueOneOrApart queues a read of p into into as one statement, or
// apart as the statements it replaced.
func queueOneOrApart[P, T any](one, apart func(*store.Batch, P, *T), p P, into *T, isApart bool) *store.Batch {
	var b store.Batch
	if isApart {
		apart(&b, p, into)
	} else {
		one(&b, p, into)
	}
	return &b
}

func TestTriageRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, st, ticket := triageWorld(t)
	read := func(ctx context.Context, p store.TriageReadParams, apart bool) (store.TriageRead, error) {
		var r store.TriageRead
		return r, st.Send(ctx, queueTriageRead(&p, &r, apart))
	}

	t.Run("ItReadsWhatTheJobNeedsInOneStatement", func(t *testing.T) {
		t.Parallel()
		counted, trips := storetest.CountTrips(ctx)
		r, err := read(counted, store.TriageReadParams{TicketID: ticket.ID, JobID: 7, Provider: "p", Inbound: 2, Outbound: 5}, false)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(trips.Statements()); n != 1 {
			t.Errorf("%d statements, want one:\n%s", n, trips)
		}
		want := store.TriageRead{Ticket: *ticket, CustomerName: "Ada", Done: []string{"classify", "embed"},
			// The newest two of the customer's side, oldest first, the auto-reply left out and the participant named.
			Inbound: []string{"(pat@example.com wrote:) m2", "m5"}, Outbound: []string{"m1", "m4"},
			Teams: []string{"billing", "shipping"}, ProviderFree: true, Embedding: []float32{0.6, 0.8}}
		// The messages written after the ticket moved these two on.
		r.Ticket.UpdatedAt, r.Ticket.LastCustomerMessageAt = want.Ticket.UpdatedAt, want.Ticket.LastCustomerMessageAt
		if !reflect.DeepEqual(r, want) {
			t.Errorf("read\n%+v\nwant\n%+v", r, want)
		}
	})

	t.Run("ItReadsWhatTheEightStatementsItReplacedRead", func(t *testing.T) {
		t.Parallel()
		for _, p := range []store.TriageReadParams{
			{TicketID: ticket.ID, JobID: 7, Provider: "p", Inbound: 16, Outbound: 4},
			// Other jobs of the ticket, with no results or no vector: the vector is not theirs.
			{TicketID: ticket.ID, JobID: 8, Provider: "p", Inbound: 1, Outbound: 1},
			{TicketID: ticket.ID, JobID: 9, Provider: "p", Inbound: 1, Outbound: 1},
			// A provider never called is not free.
			{TicketID: ticket.ID, JobID: 7, Provider: "never", Inbound: 16, Outbound: 4},
		} {
			one, err := read(ctx, p, false)
			if err != nil {
				t.Fatal(err)
			}
			apart, err := read(ctx, p, true)
			if err != nil {
				t.Fatal(err)
			}
			if p.JobID != 7 && one.Embedding != nil {
				t.Errorf("job %d read the vector job 7 wrote", p.JobID)
			}
			if !reflect.DeepEqual(one, apart) {
				t.Errorf("%+v: one statement read\n%+v\nthe eight\n%+v", p, one, apart)
			}
		}
	})

	t.Run("ATicketThatIsGoneIsNotFound", func(t *testing.T) {
		t.Parallel()
		if _, err := read(ctx, store.TriageReadParams{TicketID: "T-999999", JobID: 7, Provider: "p", Inbound: 1, Outbound: 1}, false); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err %v, want ErrNotFound", err)
		}
	})
}

// triagedWorld is triageWorld's ticket given to the billing team, whose
// agent has been told of it twice already, and a ticket of Ada's with no
// message and no team.
func triagedWorld(tb testing.TB) (*pgxpool.Pool, *store.Store, *store.Ticket, *store.Ticket) {
	tb.Helper()
	ctx := context.Background()
	pool, st, ticket := triageWorld(tb)
	if _, err := pool.Exec(ctx, `UPDATE tickets SET team = 'billing' WHERE id = $1`, ticket.ID); err != nil {
		tb.Fatal(err)
	}
	for _, id := range []string{"<n1@support.example.com>", "<n2@support.example.com>"} {
		if _, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionNotification,
			Author: vocab.System, Body: "told", EmailMessageID: &id}); err != nil {
			tb.Fatal(err)
		}
	}
	bare, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Nothing yet"})
	if err != nil {
		tb.Fatal(err)
	}
	return pool, st, ticket, bare
}

// queueTriagedRead queues the read as one statement, or apart as the six
// it replaced.
func queueTriagedRead(ticketID string, into *store.Triaged, apart bool) *store.Batch {
	return queueOneOrApart((*store.Batch).TriagedRead, (*store.Batch).TriagedReadApart, ticketID, into, apart)
}

func TestTriagedRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, st, ticket, bare := triagedWorld(t)
	read := func(ctx context.Context, ticketID string, apart bool) (store.Triaged, error) {
		var r store.Triaged
		return r, st.Send(ctx, queueTriagedRead(ticketID, &r, apart))
	}

	t.Run("ItReadsWhatTheEndOfATriageTellsInOneStatement", func(t *testing.T) {
		t.Parallel()
		counted, trips := storetest.CountTrips(ctx)
		r, err := read(counted, ticket.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(trips.Statements()); n != 1 {
			t.Errorf("%d statements, want one:\n%s", n, trips)
		}
		// The customer's newest message, not the auto-reply after it nor the
		// participant's before.
		if r.Newest == nil || r.Newest.Body != "m5" || r.Newest.Author != "customer:C-0001" {
			t.Errorf("newest message %+v, want m5, the customer's", r.Newest)
		}
		if got := agentNames(r.Agents); len(got) != 1 || got[0] != "alice" || r.Agents[0].MessageID == 0 || r.Agents[0].JobID == 0 {
			t.Errorf("tells %v (%+v), want alice, with her mail's numbers", got, r.Agents)
		}
		if want := []string{"<n1@support.example.com>", "<n2@support.example.com>"}; !reflect.DeepEqual(r.Thread, want) {
			t.Errorf("thread %v, want %v", r.Thread, want)
		}
		if r.Ticket.ID != ticket.ID || r.Customer.Name != "Ada" || r.Now.IsZero() {
			t.Errorf("ticket %s, customer %+v, now %v", r.Ticket.ID, r.Customer, r.Now)
		}
	})

	t.Run("ItReadsWhatTheSixStatementsItReplacedRead", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{ticket.ID, bare.ID} {
			one, err := read(ctx, id, false)
			if err != nil {
				t.Fatal(err)
			}
			apart, err := read(ctx, id, true)
			if err != nil {
				t.Fatal(err)
			}
			// Each read draws its own numbers for the mails, and has its own
			// time; none to tell is none, however the driver collects them.
			for _, r := range []*store.Triaged{&one, &apart} {
				if len(r.Agents) == 0 {
					r.Agents = nil
				}
				for i := range r.Agents {
					r.Agents[i].MessageID, r.Agents[i].JobID = 0, 0
				}
				r.Now = time.Time{}
			}
			if !reflect.DeepEqual(one, apart) {
				t.Errorf("%s: one statement read\n%+v\nthe six\n%+v", id, one, apart)
			}
		}
		if r, err := read(ctx, bare.ID, false); err != nil || r.Newest != nil || len(r.Agents) != 0 || len(r.Thread) != 0 {
			t.Errorf("a ticket with no message and no team: newest %+v, agents %v, thread %#v (%v)", r.Newest, r.Agents, r.Thread, err)
		}
	})

	t.Run("ATicketThatIsGoneIsNotFound", func(t *testing.T) {
		t.Parallel()
		if _, err := read(ctx, "T-999999", false); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err %v, want ErrNotFound", err)
		}
	})
}

// BenchmarkTriageRead measures the triage job's read, one statement,
// against the eight it replaced (Apart) in the same run: the time and
// the CPU, here and in PostgreSQL, of each read, and (of_apart) the one
// statement's CPU ÷ the eight's.
func BenchmarkTriageRead(b *testing.B) {
	benchOneAgainstApart(b, "EightStatements", func(b *testing.B) (*pgxpool.Pool, func(ctx context.Context, apart bool) error) {
		pool, st, ticket := triageWorld(b)
		p := store.TriageReadParams{TicketID: ticket.ID, JobID: 7, Provider: "p", Inbound: 16, Outbound: 4}
		return pool, func(ctx context.Context, apart bool) error {
			var r store.TriageRead
			return st.Send(ctx, queueTriageRead(&p, &r, apart))
		}
	})
}

// BenchmarkTriagedRead is BenchmarkTriageRead for the read at a
// triage's end, against the six statements it replaced.
func BenchmarkTriagedRead(b *testing.B) {
	benchOneAgainstApart(b, "SixStatements", func(b *testing.B) (*pgxpool.Pool, func(ctx context.Context, apart bool) error) {
		pool, st, ticket, _ := triagedWorld(b)
		return pool, func(ctx context.Context, apart bool) error {
			var r store.Triaged
			return st.Send(ctx, queueTriagedRead(ticket.ID, &r, apart))
		}
	})
}

// benchOneAgainstApart runs a read as the statements it replaced (apart,
// named so) and as one, each in a world of its own, and reports the one's
// CPU ÷ the others' (of_apart).
func benchOneAgainstApart(b *testing.B, apartName string, world func(*testing.B) (*pgxpool.Pool, func(ctx context.Context, apart bool) error)) {
	var before float64 // the statements' CPU per read in this run
	for _, apart := range []bool{true, false} {
		b.Run(map[bool]string{true: apartName, false: "OneStatement"}[apart], func(b *testing.B) {
			ctx := context.Background()
			pool, read := world(b)
			stop := storetest.MeasureCost(b, pool)
			for b.Loop() {
				if err := read(ctx, apart); err != nil {
					b.Fatal(err)
				}
			}
			cpu := stop()
			if !cpu.PostgreSQLRead {
				return
			}
			cpu.Report(b, b.N, "read")
			perRead := float64(cpu.Go+cpu.PostgreSQL) / float64(b.N)
			if apart {
				before = perRead
			} else if before > 0 {
				b.ReportMetric(perRead/before, "of_apart")
			}
		})
	}
}
