package store

import (
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TriageReadApart queues what TriageRead reads as the eight statements it
// replaced (the customer's read, CustomerOfTicket, among them), one per
// part, for the tests to hold the one statement to and the benchmark to
// measure it against.
func (b *Batch) TriageReadApart(p *TriageReadParams, into *TriageRead) {
	b.GetTicket(p.TicketID, &into.Ticket)
	customer := new(Customer) // its name goes to into with the last answer
	b.CustomerOfTicket(p.TicketID, customer)
	b.texts("results", `SELECT task FROM ai_runs WHERE job_id = $1`, &into.Done, p.JobID)
	b.texts("inbound", newestBodiesOf("$1", "$2", "$3"), &into.Inbound, p.TicketID, vocab.DirectionInbound, p.Inbound)
	b.texts("outbound", newestBodiesOf("$1", "$2", "$3"), &into.Outbound, p.TicketID, vocab.DirectionOutbound, p.Outbound)
	b.Teams(&into.Teams)
	b.ProviderFree(p.Provider, &into.ProviderFree)
	b.b.Queue(`SELECT embedding FROM ticket_embeddings WHERE ticket_id = $1
		AND EXISTS (SELECT 1 FROM ai_runs WHERE job_id = $2 AND task = 'embed')`, p.TicketID, p.JobID).QueryRow(func(row pgx.Row) error {
		into.CustomerName = customer.Name
		if err := row.Scan(&into.Embedding); err != nil && !errors.Is(interpretError(err), ErrNotFound) {
			return err
		}
		return nil
	})
}

// TriagedReadApart queues what TriagedRead reads as the six statements
// it replaced, for the tests to hold the one statement to and the
// benchmark to measure it against.
func (b *Batch) TriagedReadApart(ticketID string, into *Triaged) {
	b.GetTicket(ticketID, &into.Ticket)
	b.CustomerOfTicket(ticketID, &into.Customer)
	queueOptionalRow(b, "newest message of", ticketID, scanMessage, &into.Newest, newestInboundOf("$1"), ticketID)
	b.AgentsToMail(ticketID, false, &into.Agents)
	b.NotificationIDs(ticketID, &into.Thread)
	b.Now(&into.Now)
}

// MigrationLockID is the first key of a schema's migration lock, for a
// test to hold it as a run in progress does.
const MigrationLockID = migrationLockID

// ReadFailingAfterTheCommit queues a read, answered with the statements
// that go with the commit, whose answer fails to be read: a transaction
// that committed and returns err.
func (b *Batch) ReadFailingAfterTheCommit(err error) {
	q := b.b.Queue(`SELECT 1`)
	q.QueryRow(func(row pgx.Row) error {
		var one int
		if scanErr := row.Scan(&one); scanErr != nil {
			return scanErr
		}
		return err
	})
	b.readOnly(q)
}

// Write queues a statement whose answer nothing reads.
func (b *Batch) Write(sql string, args ...any) { b.b.Queue(sql, args...) }
