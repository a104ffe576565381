package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TicketVector is a ticket's embedding and what a similar search filters on.
type TicketVector struct {
	ID         string
	Embedding  []float32
	Status     vocab.Status
	Team       string
	CustomerID string
	Merged     bool
	CreatedAt  time.Time
	// ChangedBy is the transaction that last changed what the index holds
	// of the ticket (ticket_embeddings.changed_xid): its vector, or its
	// status, team, customer, merge or time, which a trigger on the ticket
	// names there (migration 027).
	ChangedBy int64
}

// EmbeddedVectors returns the embedded tickets after afterID in the order
// of their ids ("" for the first page), at most limit of them: a full
// read, a page at a time. Tickets without an embedding are not read at
// all.
func (s *Store) EmbeddedVectors(ctx context.Context, afterID string, limit int) ([]TicketVector, error) {
	return s.ticketVectors(ctx, `WHERE e.ticket_id > $1 ORDER BY e.ticket_id LIMIT $2`, afterID, limit)
}

// EmbeddedIDs returns the id of every embedded ticket, in one snapshot:
// what a vector index should hold, without the vectors (a sweep for
// tickets deleted, or their vectors taken away, which no change feed
// reports).
func (s *Store) EmbeddedIDs(ctx context.Context) ([]string, error) {
	var ids []string
	if err := s.db.QueryRow(ctx, `SELECT coalesce(array_agg(ticket_id), '{}') FROM ticket_embeddings`).Scan(&ids); err != nil {
		return nil, fmt.Errorf("embedded tickets: %w", err)
	}
	return ids, nil
}

// TicketChange is which transaction last changed a ticket.
type TicketChange struct {
	ID        string
	ChangedBy int64
}

// ChangeHorizon returns the oldest transaction still running: every change
// by an earlier one is committed, or never will be, and any later read
// sees it. A reader that goes back to the horizon of its last read misses
// no change, however late a transaction commits.
func (s *Store) ChangeHorizon(ctx context.Context) (int64, error) {
	var h int64
	if err := s.db.QueryRow(ctx, `SELECT `+horizon).Scan(&h); err != nil {
		return 0, fmt.Errorf("change horizon: %w", err)
	}
	return h, nil
}

// horizon is ChangeHorizon's expression: the xmin of the statement's own
// snapshot.
const horizon = `pg_snapshot_xmin(pg_current_snapshot())::text::bigint`

// VectorsChangedSince returns, in one statement, the embedded tickets
// last changed by transaction since or a later one (a ticket without an
// embedding has nothing for a vector index), each with its vector and
// what a search filters on, except those the caller has seen as that
// transaction left them (seen); and the horizon of the same snapshot, the
// since of the next read. A refresh of a vector index is then one
// statement, not a read of the changes and another of their vectors.
//
// It is planned for its horizon each time (the unnamed statement, sent
// with each run): a plan kept for any horizon guesses a third of the rows
// changed, and at a million PostgreSQL then compiles it (JIT): 400 ms of a
// 440 ms read. Its description is kept (QueryExecModeCacheDescribe), so
// that the vectors come back in binary: in text (QueryExecModeExec) each
// element of each vector was a float to parse.
func (s *Store) VectorsChangedSince(ctx context.Context, since int64, seen []TicketChange) (changed []TicketVector, next int64, err error) {
	ids, by := make([]string, len(seen)), make([]int64, len(seen))
	for i, c := range seen {
		ids[i], by[i] = c.ID, c.ChangedBy
	}
	// The horizon's row joins the changes, so that it comes back, with
	// nulls beside it, when nothing changed.
	rows, err := s.db.Query(ctx, `SELECT h.next, v.* FROM (SELECT `+horizon+` AS next) h
		LEFT JOIN LATERAL (SELECT `+vectorColumns+` FROM `+vectorTables+`
			WHERE e.changed_xid >= $1::bigint::text::xid8
			AND NOT EXISTS (SELECT FROM unnest($2::text[], $3::bigint[]) s (id, by)
				WHERE s.id = e.ticket_id AND s.by = e.changed_xid::text::bigint)) v ON true`,
		pgx.QueryExecModeCacheDescribe, since, ids, by)
	if err != nil {
		return nil, 0, fmt.Errorf("vectors changed: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v TicketVector
		dest := append([]any{&next}, v.fields()...)
		alone := rows.RawValues()[1] == nil // the horizon's row, nulls beside it: nothing changed
		if alone {
			clear(dest[1:]) // a nil destination skips its column
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, 0, fmt.Errorf("vectors changed: %w", err)
		}
		if !alone {
			changed = append(changed, v)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("vectors changed: %w", err)
	}
	return changed, next, nil
}

// CustomerChangesSince returns which transaction last changed each of the
// customer's embedded tickets opened at or after opened, of those last
// changed by transaction since or a later one: without the vectors, what a
// vector index needs to know whether it is current for one customer's
// tickets. It looks at most at the customer's newest limit tickets in the
// window, and whole is false when there are more: for a customer who
// opened that many, a refresh is the cheaper way to be current. The tickets are read through
// their index (customer, opened) and each one's vector row by its key: one
// plan serves every customer and horizon, where one that went by the
// transaction was planned anew each time, and without statistics scanned
// every vector's row.
func (s *Store) CustomerChangesSince(ctx context.Context, customerID string, opened time.Time, since int64, limit int) (changes []TicketChange, whole bool, err error) {
	rows, err := s.db.Query(ctx, `SELECT t.id, e.changed_xid::text::bigint
		FROM (SELECT id FROM tickets WHERE customer_id = $1 AND created_at >= $2 ORDER BY created_at DESC LIMIT $4) t
		LEFT JOIN ticket_embeddings e ON e.ticket_id = t.id AND e.changed_xid >= $3::bigint::text::xid8`,
		customerID, opened, since, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("changes of customer %s: %w", customerID, err)
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		var (
			id string
			by *int64 // none: not embedded, or not changed since
		)
		if err := rows.Scan(&id, &by); err != nil {
			return nil, false, fmt.Errorf("changes of customer %s: %w", customerID, err)
		}
		if read++; by != nil {
			changes = append(changes, TicketChange{ID: id, ChangedBy: *by})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("changes of customer %s: %w", customerID, err)
	}
	return changes, read <= limit, nil
}

// vectorColumns are a TicketVector's, from vectorTables, in the order of
// its fields. OFFSET 0 keeps the ticket's lookup a lookup, a row at a
// time by its key: as a join, at a million tickets, the planner chose a
// scan of every ticket whenever the newer table's statistics lagged.
const (
	vectorColumns = `e.ticket_id, e.embedding, t.status, coalesce(t.team, ''), t.customer_id, t.merged_into IS NOT NULL,
		t.created_at, e.changed_xid::text::bigint`
	vectorTables = `ticket_embeddings e CROSS JOIN LATERAL (SELECT status, team, customer_id, merged_into, created_at
			FROM tickets WHERE id = e.ticket_id OFFSET 0) t`
)

// fields are where a row of vectorColumns is scanned.
func (v *TicketVector) fields() []any {
	return []any{&v.ID, &v.Embedding, &v.Status, &v.Team, &v.CustomerID, &v.Merged, &v.CreatedAt, &v.ChangedBy}
}

// ticketVectors reads the vectors of the tickets the clause picks.
func (s *Store) ticketVectors(ctx context.Context, where string, args ...any) ([]TicketVector, error) {
	rows, err := s.db.Query(ctx, `SELECT `+vectorColumns+` FROM `+vectorTables+` `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("ticket vectors: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TicketVector, error) {
		var v TicketVector
		err := row.Scan(v.fields()...)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("ticket vectors: %w", err)
	}
	return list, nil
}

// TicketSummary is a ticket as a list of similar ones shows it.
type TicketSummary struct {
	ID       string
	Subject  string
	Status   vocab.Status
	Team     *string
	SolvedAt *time.Time
}

// TicketSummaries returns the tickets with these ids, in no order.
func (s *Store) TicketSummaries(ctx context.Context, ids []string) (map[string]*TicketSummary, error) {
	rows, err := s.db.Query(ctx, `SELECT id, subject, status, team, solved_at FROM tickets WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("ticket summaries: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*TicketSummary, error) {
		var t TicketSummary
		return &t, row.Scan(&t.ID, &t.Subject, &t.Status, &t.Team, &t.SolvedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("ticket summaries: %w", err)
	}
	out := make(map[string]*TicketSummary, len(list))
	for _, t := range list {
		out[t.ID] = t
	}
	return out, nil
}

// Example is how a solved ticket was answered: its subject, the
// customer's first message and the agents' last reply, and the customer's
// name and address, which a caller takes out of the texts.
type Example struct {
	TicketID      string
	Subject       string
	Question      string
	Answer        string
	CustomerName  string
	CustomerEmail string
}

// Examples returns, of each ticket that has both, the first customer
// message and the last agent reply: text the customer saw, no note, no
// held mail, no machine's mail.
func (s *Store) Examples(ctx context.Context, ids []string) (map[string]*Example, error) {
	rows, err := s.db.Query(ctx, `SELECT t.id, t.subject, q.body, a.body, c.name, c.email
		FROM tickets t JOIN customers c ON c.id = t.customer_id
		CROSS JOIN LATERAL (SELECT body FROM messages WHERE ticket_id = t.id AND direction = 'inbound' AND NOT auto_submitted
			ORDER BY created_at, id LIMIT 1) q
		CROSS JOIN LATERAL (SELECT body FROM messages WHERE ticket_id = t.id AND direction = 'outbound' AND author LIKE 'agent:%'
			ORDER BY created_at DESC, id DESC LIMIT 1) a
		WHERE t.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("examples: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Example, error) {
		var e Example
		return &e, row.Scan(&e.TicketID, &e.Subject, &e.Question, &e.Answer, &e.CustomerName, &e.CustomerEmail)
	})
	if err != nil {
		return nil, fmt.Errorf("examples: %w", err)
	}
	out := make(map[string]*Example, len(list))
	for _, e := range list {
		out[e.TicketID] = e
	}
	return out, nil
}
