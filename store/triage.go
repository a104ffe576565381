package store

import (
	"fmt"
	"time"

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

// Triaged is what the end of a triage reads to tell the ticket's agents.
type Triaged struct {
	Ticket   Ticket
	Customer Customer
	// Newest is the newest inbound message a person wrote, nil if none
	// (newestInboundOf).
	Newest *Message
	// Agents are who hear of the ticket, each with its mail's numbers
	// (AgentsToMail).
	Agents []AgentToMail
	// Thread are the Message-IDs of the ticket's earlier mail to agents
	// (NotificationIDs), and Now the transaction's time.
	Thread []string
	Now    time.Time
}

// TriagedRead queues, in one statement, the six reads a triage's end
// makes, as TriageRead does its start's (BenchmarkTriagedRead: 4 % less
// CPU than the six; a triaged ticket assigned to an agent, 4 % less in
// all). One row comes back per agent to mail, or one with no agent; a
// ticket that is not there is ErrNotFound.
func (b *Batch) TriagedRead(ticketID string, into *Triaged) {
	b.b.Queue(triagedReadSQL, ticketID).Query(func(rows pgx.Rows) error {
		var (
			r    Triaged
			read bool
		)
		for rows.Next() {
			var (
				m               Message
				mID             *int64
				mTicket, mBody  *string
				mDirection      *vocab.Direction
				mAuthor         *vocab.Actor
				mCreated        *time.Time
				a               Agent
				aName, aDisplay *string
				aEmail, aSign   *string
				aAdmin          *bool
				aCreated        *time.Time
				aMessage, aJob  *int64
			)
			dest := append(ticketFields(&r.Ticket), &r.Customer.ID, &r.Customer.Email, &r.Customer.Name, &r.Customer.CreatedAt,
				&mID, &mTicket, &mDirection, &mAuthor, &mBody, &m.EmailMessageID, &mCreated,
				&m.Sender, &m.AuthVerdict, &m.AuthDetail, &m.HeldReason, &m.Subject, &m.ArrivedAt,
				&r.Thread, &r.Now,
				&aName, &aDisplay, &aEmail, &aSign, &aAdmin, &a.DisabledAt, &aCreated, &a.Teams, &aMessage, &aJob)
			if err := rows.Scan(dest...); err != nil {
				return fmt.Errorf("triaged read of %s: %w", ticketID, interpretError(err))
			}
			read = true
			if mID != nil {
				m.ID, m.TicketID, m.Direction, m.Author, m.Body, m.CreatedAt = *mID, *mTicket, *mDirection, *mAuthor, *mBody, *mCreated
				r.Newest = &m
			}
			if aName != nil {
				a.Name, a.DisplayName, a.Email, a.Signature, a.Admin, a.CreatedAt = *aName, *aDisplay, *aEmail, *aSign, *aAdmin, *aCreated
				r.Agents = append(r.Agents, AgentToMail{Agent: &a, MessageID: *aMessage, JobID: *aJob})
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("triaged read of %s: %w", ticketID, interpretError(err))
		}
		if !read {
			return fmt.Errorf("triaged read of %s: %w", ticketID, ErrNotFound)
		}
		*into = r
		return nil
	})
}

// The thread's ids are read in the select list, once per agent: a lateral
// join of their own would not read them fewer times for the one to three
// agents a ticket has.
var triagedReadSQL = `SELECT ` + ticketColumns + `, c.id, c.email, c.name, c.created_at, n.*,
	ARRAY(` + notificationIDsOf("tickets.id") + `), now(), a.*
	FROM tickets
	JOIN customers c ON c.id = tickets.customer_id
	LEFT JOIN LATERAL (` + newestInboundOf("tickets.id") + `) n ON true
	LEFT JOIN LATERAL (` + agentsToMailOf("tickets", "false") + `) a ON true
	WHERE tickets.id = $1
	ORDER BY a.name`
