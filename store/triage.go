package store

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TriageRead is what a triage job reads before its steps.
type TriageRead struct {
	Ticket       Ticket
	CustomerName string
	// Done are the steps the job has results for.
	Done []string
	// Inbound and Outbound are the bodies of the ticket's newest messages
	// each way, oldest first (newestBodies).
	Inbound, Outbound []string
	// Teams are the teams there are (Teams).
	Teams []string
	// ProviderFree is ProviderFree's answer for the job's provider.
	ProviderFree bool
	// Embedding is the ticket's vector if the job's embed step wrote it,
	// nil otherwise.
	Embedding []float32
}

// TriageReadParams say which job of which ticket reads, through which
// provider, and how many messages each way.
type TriageReadParams struct {
	TicketID string
	JobID    int64
	Provider string
	Inbound  int
	Outbound int
}

// TriageRead queues the read of what triage job p.JobID needs, in one
// statement: the eight reads it replaces, each a statement of its own in
// one trip, cost PostgreSQL an executor, a snapshot and a reply each, and
// the driver a result each. A ticket that is not there is ErrNotFound.
func (b *Batch) TriageRead(p *TriageReadParams, into *TriageRead) {
	b.b.Queue(triageReadSQL, p.TicketID, p.JobID, p.Provider, p.Inbound, p.Outbound,
		vocab.DirectionInbound, vocab.DirectionOutbound).QueryRow(func(row pgx.Row) error {
		var r TriageRead
		if err := row.Scan(append(ticketFields(&r.Ticket),
			&r.CustomerName, &r.Done, &r.Inbound, &r.Outbound, &r.Teams, &r.ProviderFree, &r.Embedding)...); err != nil {
			return fmt.Errorf("triage input of %s: %w", p.TicketID, interpretError(err))
		}
		*into = r
		return nil
	})
}

// The subqueries name their tables' columns, since tickets' are in scope:
// the customer's row is read by id, not joined, for the same reason.
var triageReadSQL = `SELECT ` + ticketColumns + `,
	(SELECT c.name FROM customers c WHERE c.id = tickets.customer_id),
	ARRAY(SELECT r.task FROM ai_runs r WHERE r.job_id = $2),
	ARRAY(` + newestBodiesOf("$1", "$6", "$4") + `),
	ARRAY(` + newestBodiesOf("$1", "$7", "$5") + `),
	ARRAY(` + teamsSQL + `),
	coalesce((` + providerFreeOf("$3") + `), false),
	(SELECT e.embedding FROM ticket_embeddings e WHERE e.ticket_id = tickets.id
		AND EXISTS (SELECT 1 FROM ai_runs r WHERE r.job_id = $2 AND r.task = 'embed'))
	FROM tickets WHERE id = $1`
