package store

// Merge queues moving everything a customer or an agent wrote on ticket
// from into ticket into (its messages, with their attachments, deliveries
// and Message-IDs; its participants), and closing from as merged into
// into: tickets merged into from before now point at into, so that
// merged_into always names a ticket that is not merged itself, and what
// named from as its possible duplicate names into. Its events and triage
// results stay with from, as its history.
func (b *Batch) Merge(from, into string) {
	b.b.Queue(`UPDATE messages SET ticket_id = $2 WHERE ticket_id = $1`, from, into)
	b.b.Queue(`INSERT INTO ticket_participants (ticket_id, address, added_by, created_at)
		SELECT $2, address, added_by, created_at FROM ticket_participants WHERE ticket_id = $1 ON CONFLICT DO NOTHING`, from, into)
	b.b.Queue(`UPDATE tickets SET merged_into = $2, updated_at = now() WHERE merged_into = $1`, from, into)
	// The mark is on the vector's row (migration 031), and the tickets
	// that carry it change all the same. Each ticket's row is locked
	// before its vector's, as the embed step locks them
	// (SetTicketEmbedding), so that the two never deadlock.
	b.b.Queue(`WITH named AS (UPDATE tickets SET updated_at = now()
			WHERE id IN (SELECT ticket_id FROM ticket_embeddings WHERE possible_duplicate_of = $1) RETURNING id)
		UPDATE ticket_embeddings e SET possible_duplicate_of = CASE WHEN e.ticket_id = $2 THEN NULL ELSE $2 END
		FROM named WHERE e.ticket_id = named.id`, from, into)
	b.b.Queue(`UPDATE ticket_embeddings SET possible_duplicate_of = NULL WHERE ticket_id = $1 AND possible_duplicate_of IS NOT NULL`, from)
	b.b.Queue(`UPDATE tickets t SET last_customer_message_at = greatest(t.last_customer_message_at, f.last_customer_message_at),
		updated_at = now() FROM tickets f WHERE t.id = $2 AND f.id = $1`, from, into)
	b.updateTicket(from, `merged_into = $2`, into)
}
