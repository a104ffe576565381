-- A ticket's vector in a table of its own. Written into the ticket's row,
-- it made triage's embed step the costliest single statement of a triage
-- (0.30-0.40 ms a ticket in pg_stat_statements): the row grew by 1.5 KiB
-- at 384 dimensions, rarely fitting its page, so the update wrote a new
-- entry in each of the ticket's fourteen indexes, and every later version
-- of the row (the draft, the first response, each status) copied the
-- vector along. Here it is one narrow row in two small indexes, and the
-- ticket's row stays small enough for its updates to stay on their page.
CREATE TABLE ticket_embeddings (
    ticket_id   text PRIMARY KEY REFERENCES tickets (id) ON DELETE CASCADE,
    embedding   real[] NOT NULL,
    -- The transaction that last changed what the vector index holds of the
    -- ticket: its vector, or (by the trigger below) its status, team,
    -- customer, merge or time. The vector index's refresh reads it.
    changed_xid xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX ticket_embeddings_changed ON ticket_embeddings (changed_xid);

INSERT INTO ticket_embeddings (ticket_id, embedding, changed_xid)
    SELECT id, embedding, coalesce(changed_xid, '0') FROM tickets WHERE embedding IS NOT NULL;

-- The ticket no longer names its changes itself: a column, an index and a
-- trigger less on every ticket.
DROP TRIGGER tickets_changed_xid ON tickets;
DROP FUNCTION tickets_changed_xid();
DROP INDEX tickets_embedded_changed;
ALTER TABLE tickets DROP COLUMN embedding, DROP COLUMN changed_xid;

-- A change of what searches filter on names its transaction on the vector's
-- row, which it locks: a writer of the vector and a writer of the status
-- wait for each other there, so the later to commit is the one named. An
-- update that sets those columns to what they were (a new triage choosing
-- the same team) changes nothing the index holds, and writes nothing.
CREATE FUNCTION ticket_embeddings_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ticket_embeddings SET changed_xid = pg_current_xact_id() WHERE ticket_id = NEW.id;
    RETURN NULL;
END $$;

CREATE TRIGGER ticket_embeddings_changed AFTER UPDATE OF status, team, customer_id, merged_into, created_at ON tickets
    FOR EACH ROW
    WHEN ((OLD.status, OLD.team, OLD.customer_id, OLD.merged_into, OLD.created_at)
        IS DISTINCT FROM (NEW.status, NEW.team, NEW.customer_id, NEW.merged_into, NEW.created_at))
    EXECUTE FUNCTION ticket_embeddings_changed();
