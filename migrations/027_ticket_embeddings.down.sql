DROP TRIGGER ticket_embeddings_changed ON tickets;
DROP FUNCTION ticket_embeddings_changed();
ALTER TABLE tickets ADD COLUMN embedding real[], ADD COLUMN changed_xid xid8;
UPDATE tickets t SET embedding = e.embedding, changed_xid = e.changed_xid
    FROM ticket_embeddings e WHERE e.ticket_id = t.id;
CREATE FUNCTION tickets_changed_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_xid := pg_current_xact_id();
    RETURN NEW;
END $$;
CREATE TRIGGER tickets_changed_xid BEFORE INSERT OR UPDATE OF embedding, status, team, customer_id, merged_into, created_at ON tickets
    FOR EACH ROW EXECUTE FUNCTION tickets_changed_xid();
CREATE INDEX tickets_embedded_changed ON tickets (changed_xid, id) WHERE embedding IS NOT NULL;
DROP TABLE ticket_embeddings;
