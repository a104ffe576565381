package store

import (
	"context"
	"fmt"
)

// Reset empties helpdesk's tables and River's jobs and starts ticket
// numbers at T-500001 again, for demo data. It is not reversible.
func (s *Store) Reset(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `TRUNCATE ticket_presence, saved_replies, sla_alerts, ticket_slas, sla_policies, calendars, mailbox_pending, mailboxes, ui_sessions, webhook_events, webhooks, acknowledgements, ticket_participants, attachments, attachment_chunks, attachment_contents, raw_email_chunks, suppressions, outbound_recipients, outbound_emails, smtp_relays, providers, ai_runs, ticket_embeddings, ticket_events, messages, tickets, support_addresses, customers, agent_teams, agents,
		api_keys, idempotency_keys, river_job RESTART IDENTITY;
		ALTER SEQUENCE ticket_number_seq RESTART WITH 500001;
		ALTER SEQUENCE customer_number_seq RESTART WITH 100000`)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	return nil
}

// Counts are the row counts a person checks after a duplicate: one ticket,
// one job, one result per step.
type Counts struct {
	Tickets   int
	Jobs      int
	AIResults int
}

// CountRows counts tickets, River jobs of the kind and AI results.
func (s *Store) CountRows(ctx context.Context, jobKind string) (Counts, error) {
	var c Counts
	err := s.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM tickets), (SELECT count(*) FROM river_job WHERE kind = $1), (SELECT count(*) FROM ai_runs)`, jobKind).
		Scan(&c.Tickets, &c.Jobs, &c.AIResults)
	if err != nil {
		return Counts{}, fmt.Errorf("count rows: %w", err)
	}
	return c, nil
}
