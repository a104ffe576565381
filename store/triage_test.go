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
	var b store.Batch
	if apart {
		b.TriageReadApart(p, into)
	} else {
		b.TriageRead(p, into)
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

// BenchmarkTriageRead measures the triage job's read, one statement,
// against the eight it replaced (Apart) in the same run: the time and
// the CPU, here and in PostgreSQL, of each read, and (of_eight) the one
// statement's CPU ÷ the eight's.
func BenchmarkTriageRead(b *testing.B) {
	var eight float64 // the eight statements' CPU per read in this run
	for _, apart := range []bool{true, false} {
		b.Run(map[bool]string{true: "EightStatements", false: "OneStatement"}[apart], func(b *testing.B) {
			ctx := context.Background()
			pool, st, ticket := triageWorld(b)
			p := store.TriageReadParams{TicketID: ticket.ID, JobID: 7, Provider: "p", Inbound: 16, Outbound: 4}
			stop := storetest.MeasureCost(b, pool)
			for b.Loop() {
				var r store.TriageRead
				if err := st.Send(ctx, queueTriageRead(&p, &r, apart)); err != nil {
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
				eight = perRead
			} else if eight > 0 {
				b.ReportMetric(perRead/eight, "of_eight")
			}
		})
	}
}
