ALTER TABLE tickets RESET (fillfactor);
DROP INDEX tickets_embedded_changed;
CREATE INDEX tickets_embedded_changed ON tickets (changed_xid) WHERE embedding IS NOT NULL;
CREATE INDEX tickets_embedded_updated ON tickets (updated_at, id) WHERE embedding IS NOT NULL;
DROP TRIGGER tickets_changed_xid ON tickets;
CREATE TRIGGER tickets_changed_xid BEFORE INSERT OR UPDATE ON tickets
    FOR EACH ROW EXECUTE FUNCTION tickets_changed_xid();
