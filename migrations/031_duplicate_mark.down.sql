ALTER TABLE tickets ADD COLUMN possible_duplicate_of text REFERENCES tickets (id) ON DELETE SET NULL;
CREATE INDEX tickets_possible_duplicate_of ON tickets (possible_duplicate_of) WHERE possible_duplicate_of IS NOT NULL;
UPDATE tickets t SET possible_duplicate_of = e.possible_duplicate_of
    FROM ticket_embeddings e WHERE e.ticket_id = t.id AND e.possible_duplicate_of IS NOT NULL;
ALTER TABLE ticket_embeddings DROP COLUMN possible_duplicate_of;
