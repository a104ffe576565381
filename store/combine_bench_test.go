package store_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// BenchmarkTriageWritesCombined measures what saving many tickets'
// triage steps together saves, against saving each alone. Sixteen workers
// write the three steps of tickets of their own, each step a transaction
// (its result saved before the next call, as the floor also does):
//
//   - OneTicketATransaction writes them as the desk did before its steps
//     were combined (desk.SaveTriageStep with no agent to tell and no SLA
//     policy): a transaction a step of a ticket, a statement a row;
//   - SixteenTicketsATransaction writes the same statements of sixteen
//     tickets' step in one transaction;
//   - ThroughACombiner writes each ticket's as the first does, through a
//     store.Combiner as the desk now does (two transactions at once, up to
//     32 steps each, as desk's stepGroups and stepsAGroup, which this
//     package cannot import), which groups whatever the workers save at
//     the same moment;
//   - SixteenTicketsAStatement writes the same rows of sixteen tickets'
//     step in one statement of each kind, one transaction: what could
//     come next, not built (the statements are written here, not in the
//     store).
//
// It reports the CPU a ticket (both sides) and, for the others, that CPU
// ÷ the first's (of_one_a_transaction). The vector index, the provider's
// calls and River are left out: they are the same either way.
func BenchmarkTriageWritesCombined(b *testing.B) {
	const workers = 16
	var one float64 // CPU a ticket, one ticket a transaction, in this run
	for _, v := range []struct {
		name     string
		group    int
		combined bool // the transactions go through a combiner
		write    func(context.Context, runFunc, []ticketToTriage) error
	}{
		{"OneTicketATransaction", 1, false, writeOneTicket},
		{"ThroughACombiner", 1, true, writeOneTicket},
		{"SixteenTicketsATransaction", 16, false, writeOneTransaction},
		{"SixteenTicketsAStatement", 16, false, writeCombined},
	} {
		group := v.group
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			pool, st := withAda(b)
			if _, err := st.EnterProvider(ctx, "p", 0, 0); err != nil {
				b.Fatal(err)
			}
			n := b.N * group
			tickets := writeTicketsToTriage(b, pool, n)
			var run runFunc = func(ctx context.Context, fn func(*store.Tx) error) error { return store.Run(ctx, pool, fn) }
			if v.combined {
				run = store.NewCombiner(pool, 2, 32).Run
			}
			var (
				next atomic.Int64
				wg   sync.WaitGroup
			)
			b.ResetTimer()
			stop := storetest.MeasureCost(b, pool)
			for range workers {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						if err := v.write(ctx, run, tickets[int(i)*group:(int(i)+1)*group]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			cpu := stop()
			b.StopTimer()
			if b.Failed() || !cpu.PostgreSQLRead {
				return
			}
			checkTriageWrites(b, pool, n)
			cpu.Report(b, n, "ticket")
			if perTicket := cpu.PerUnit(n); v.name == "OneTicketATransaction" {
				one = perTicket
			} else if one > 0 {
				b.ReportMetric(perTicket/one, "of_one_a_transaction")
			}
		})
	}
}

// ticketToTriage is a ticket of the benchmark's and its triage job.
type ticketToTriage struct {
	id  string
	job int64
}

// writeTicketsToTriage writes n tickets of Ada's, each with her message
// and its triage job's number.
func writeTicketsToTriage(b *testing.B, pool *pgxpool.Pool, n int) []ticketToTriage {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO tickets (id, customer_id, subject, triage_job_id, last_customer_message_at)
		SELECT 'T-' || i, 'C-0001', 'Charge ' || i, i, now() FROM generate_series(1, $1) i`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO messages (ticket_id, direction, author, body)
		SELECT 'T-' || i, 'inbound', 'customer:C-0001', 'My card was charged twice.' FROM generate_series(1, $1) i`, n); err != nil {
		b.Fatal(err)
	}
	tickets := make([]ticketToTriage, n)
	for i := range tickets {
		tickets[i] = ticketToTriage{id: fmt.Sprintf("T-%d", i+1), job: int64(i + 1)}
	}
	return tickets
}

// benchVector is an embedding of the provider's size.
var benchVector = func() []float32 {
	v := make([]float32, 384)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)))
	}
	return v
}()

// runFunc runs a unit of work: store.Run on the benchmark's pool, or a
// combiner's Run.
type runFunc func(ctx context.Context, fn func(*store.Tx) error) error

// writeOneTicket writes the three steps of one ticket as the desk does,
// each step a unit of work of run's.
func writeOneTicket(ctx context.Context, run runFunc, tickets []ticketToTriage) error {
	for _, step := range ticketSteps(ctx, tickets[0]) {
		if err := run(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// writeOneTransaction writes each step of the tickets in one transaction,
// each ticket's rows as the desk writes them: commits and trips shared,
// statements not (store.Combiner).
func writeOneTransaction(ctx context.Context, run runFunc, tickets []ticketToTriage) error {
	steps := make([][]func(*store.Tx) error, len(tickets))
	for i, t := range tickets {
		steps[i] = ticketSteps(ctx, t)
	}
	for s := range steps[0] {
		if err := run(ctx, func(tx *store.Tx) error {
			for i := range tickets {
				if err := steps[i][s](tx); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// ticketSteps are the three steps' writes of one ticket, as the desk
// queues them in each step's transaction.
func ticketSteps(ctx context.Context, t ticketToTriage) []func(*store.Tx) error {
	run := func(task, output string) *store.InsertAIRunParams {
		return &store.InsertAIRunParams{JobID: t.job, TicketID: t.id, Task: task, Output: output, Model: "m", LatencyMS: 1, PromptTokens: 200, CompletionTokens: 20}
	}
	var free bool
	steps := []func(tx *store.Tx) error{
		func(tx *store.Tx) error {
			tx.Later(func(b *store.Batch) {
				b.InsertAIRun(run("classify", `{"team":"billing","priority":2}`))
				b.ProviderFree("p", &free)
				b.SetTicketClassification(t.id, "billing", 2)
			})
			return nil
		},
		func(tx *store.Tx) error {
			tx.Later(func(b *store.Batch) {
				b.InsertAIRun(run("embed", "vector m, 384 dimensions"))
				b.ProviderFree("p", &free)
				b.SetTicketEmbedding(t.id, benchVector, "")
			})
			return nil
		},
		func(tx *store.Tx) error {
			tx.Later(func(b *store.Batch) {
				b.InsertAIRun(run("draft_reply", "We have refunded the second charge."))
				b.SetTicketDraftReply(t.id, "We have refunded the second charge.", t.job, nil)
			})
			var (
				r     store.Triaged
				reads store.Batch
			)
			reads.TriagedRead(t.id, &r)
			if err := tx.Store().Send(ctx, &reads); err != nil {
				return err
			}
			tx.Later(func(b *store.Batch) {
				b.InsertWebhookEvents([]store.NewWebhookEvent{{Type: "ticket.triaged", Data: map[string]any{"ticket_id": t.id}}})
			})
			return nil
		},
	}
	return steps
}

// The combined statements: each saves the step's results of many jobs,
// skipping a result a job has already, and applies only those it saved.
const (
	combinedRunsSQL = `WITH i AS (
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS i(job_id, ticket_id, output, apply, n)),
	r AS (INSERT INTO ai_runs (job_id, ticket_id, task, output, model, latency_ms, prompt_tokens, completion_tokens)
		SELECT job_id, ticket_id, $5, output, 'm', 1, 200, 20 FROM i ORDER BY n
		ON CONFLICT (job_id, task) DO NOTHING RETURNING job_id)`
	combinedClassifySQL = combinedRunsSQL + `
	UPDATE tickets t SET team = i.apply, priority = 2, updated_at = now() FROM i JOIN r USING (job_id) WHERE t.id = i.ticket_id`
	combinedEmbedSQL = combinedRunsSQL + `
	INSERT INTO ticket_embeddings (ticket_id, embedding)
		SELECT t.id, $6::real[] FROM tickets t JOIN i ON t.id = i.ticket_id JOIN r USING (job_id) ORDER BY i.n FOR NO KEY UPDATE OF t
		ON CONFLICT (ticket_id) DO UPDATE SET embedding = excluded.embedding, changed_xid = pg_current_xact_id()`
	combinedDraftSQL = combinedRunsSQL + `
	UPDATE tickets t SET draft_reply = i.apply, draft_job_id = i.job_id, draft_written_at = now(), updated_at = now(), draft_sources = '{}'
		FROM i JOIN r USING (job_id) WHERE t.id = i.ticket_id AND t.triage_job_id = i.job_id`
)

// writeCombined writes the three steps of the tickets, a statement a kind
// of row. The vector is the same for all, as a parameter of its own: the
// benchmark measures the statements, not how many vectors travel in one.
func writeCombined(ctx context.Context, run runFunc, tickets []ticketToTriage) error {
	var (
		jobs = make([]int64, len(tickets))
		ids  = make([]string, len(tickets))
	)
	for i, t := range tickets {
		jobs[i], ids[i] = t.job, t.id
	}
	each := func(s string) []string {
		out := make([]string, len(tickets))
		for i := range out {
			out[i] = s
		}
		return out
	}
	var free bool
	classify := func(tx *store.Tx) error {
		tx.Later(func(b *store.Batch) {
			b.ProviderFree("p", &free)
		})
		_, err := tx.Exec(ctx, combinedClassifySQL, jobs, ids, each(`{"team":"billing","priority":2}`), each("billing"), "classify")
		return err
	}
	embed := func(tx *store.Tx) error {
		tx.Later(func(b *store.Batch) { b.ProviderFree("p", &free) })
		_, err := tx.Exec(ctx, combinedEmbedSQL, jobs, ids, each("vector m, 384 dimensions"), each(""), "embed", benchVector)
		return err
	}
	draft := func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, combinedDraftSQL, jobs, ids, each("We have refunded the second charge."),
			each("We have refunded the second charge."), "draft_reply"); err != nil {
			return err
		}
		var reads store.Batch
		read := make([]store.Triaged, len(tickets))
		for i, id := range ids {
			reads.TriagedRead(id, &read[i])
		}
		if err := tx.Store().Send(ctx, &reads); err != nil {
			return err
		}
		events := make([]store.NewWebhookEvent, len(tickets))
		for i, id := range ids {
			events[i] = store.NewWebhookEvent{Type: "ticket.triaged", Data: map[string]any{"ticket_id": id}}
		}
		tx.Later(func(b *store.Batch) { b.InsertWebhookEvents(events) })
		return nil
	}
	for _, step := range []func(*store.Tx) error{classify, embed, draft} {
		if err := run(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// checkTriageWrites fails the benchmark unless each of the n tickets has
// its three results, its team, its vector and its draft: both ways must
// write the same rows for their costs to compare.
func checkTriageWrites(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	var runs, classified, embedded, drafted int
	if err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM ai_runs),
		(SELECT count(*) FROM tickets WHERE team = 'billing' AND priority = 2),
		(SELECT count(*) FROM ticket_embeddings),
		(SELECT count(*) FROM tickets WHERE draft_job_id = triage_job_id AND draft_reply <> '')`).Scan(&runs, &classified, &embedded, &drafted); err != nil {
		b.Fatal(err)
	}
	if runs != 3*n || classified != n || embedded != n || drafted != n {
		b.Fatalf("%d tickets: %d results, %d classified, %d embedded, %d drafted", n, runs, classified, embedded, drafted)
	}
}
