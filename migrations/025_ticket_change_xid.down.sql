CREATE INDEX tickets_updated_at ON tickets (updated_at);
DROP INDEX tickets_embedded_changed;
DROP TRIGGER tickets_changed_xid ON tickets;
DROP FUNCTION tickets_changed_xid();
ALTER TABLE tickets DROP COLUMN changed_xid;
