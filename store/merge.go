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
	b.b.Queue(`UPDATE tickets SET possible_duplicate_of = CASE WHEN id = $2 THEN NULL ELSE $2 END, updated_at = now()
		WHERE possible_duplicate_of = $1`, from, into)
	b.b.Queue(`UPDATE tickets t SET last_customer_message_at = greatest(t.last_customer_message_at, f.last_customer_message_at),
		updated_at = now() FROM tickets f WHERE t.id = $2 AND f.id = $1`, from, into)
	b.updateTicket(from, `merged_into = $2, possible_duplicate_of = NULL`, into)
}
