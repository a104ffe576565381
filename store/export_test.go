package store

import (
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TriageReadApart queues what TriageRead reads as the eight statements it
// replaced, one per part, for the tests to hold the one statement to and
// the benchmark to measure it against.
func (b *Batch) TriageReadApart(p *TriageReadParams, into *TriageRead) {
	b.GetTicket(p.TicketID, &into.Ticket)
	queueRow(b, "customer of", p.TicketID, func(row pgx.Row) (*string, error) {
		var name string
		return &name, row.Scan(&name)
	}, &into.CustomerName, `SELECT name FROM customers WHERE id = (SELECT customer_id FROM tickets WHERE id = $1)`, p.TicketID)
	b.texts("results", `SELECT task FROM ai_runs WHERE job_id = $1`, &into.Done, p.JobID)
	b.texts("inbound", newestBodiesOf("$1", "$2", "$3"), &into.Inbound, p.TicketID, vocab.DirectionInbound, p.Inbound)
	b.texts("outbound", newestBodiesOf("$1", "$2", "$3"), &into.Outbound, p.TicketID, vocab.DirectionOutbound, p.Outbound)
	b.Teams(&into.Teams)
	b.ProviderFree(p.Provider, &into.ProviderFree)
	b.b.Queue(`SELECT embedding FROM ticket_embeddings WHERE ticket_id = $1
		AND EXISTS (SELECT 1 FROM ai_runs WHERE job_id = $2 AND task = 'embed')`, p.TicketID, p.JobID).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&into.Embedding); err != nil && !errors.Is(interpretError(err), ErrNotFound) {
			return err
		}
		return nil
	})
}
