-- A ticket's possible duplicate is marked on its vector's row. On the
-- ticket's row, the mark was a second update of the ticket in every
-- triage that found one, and not a heap-only one (the column is indexed,
-- for a merge to find the tickets that name the merged one): a new entry
-- in each of the ticket's thirteen indexes, 0.33 ms a ticket in
-- pg_stat_statements under triage's load, where the vector's row, which
-- the same step writes anyway, takes the mark in the same statement. The
-- mark is only ever found by the embed step (desk.possibleDuplicate), so
-- a ticket that has one has a vector's row.
ALTER TABLE ticket_embeddings ADD COLUMN possible_duplicate_of text REFERENCES tickets (id) ON DELETE SET NULL;
CREATE INDEX ticket_embeddings_possible_duplicate_of ON ticket_embeddings (possible_duplicate_of)
    WHERE possible_duplicate_of IS NOT NULL;

UPDATE ticket_embeddings e SET possible_duplicate_of = t.possible_duplicate_of
    FROM tickets t WHERE t.id = e.ticket_id AND t.possible_duplicate_of IS NOT NULL;

-- Its index and foreign key go with it.
ALTER TABLE tickets DROP COLUMN possible_duplicate_of;
