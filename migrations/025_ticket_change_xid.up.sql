-- The vector index in each process follows the tickets' changes. It used to
-- read again every embedded ticket changed in the last 10 s before each
-- refresh, because updated_at is a transaction's start and a transaction may
-- commit after a later one: at 370 tickets triaged a second, 1,900 rows a
-- refresh, the largest statement of a triage. The writing transaction's id
-- says the same without the guess: every transaction below a snapshot's
-- xmin has ended, so a reader that goes back only to its last snapshot's
-- xmin misses nothing (pg_snapshot_xmin, PostgreSQL 13 and later).
ALTER TABLE tickets ADD COLUMN changed_xid xid8;

CREATE FUNCTION tickets_changed_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_xid := pg_current_xact_id();
    RETURN NEW;
END $$;

CREATE TRIGGER tickets_changed_xid BEFORE INSERT OR UPDATE ON tickets
    FOR EACH ROW EXECUTE FUNCTION tickets_changed_xid();

CREATE INDEX tickets_embedded_changed ON tickets (changed_xid) WHERE embedding IS NOT NULL;

-- updated_at was indexed for the refresh alone; every update of a ticket
-- writes each of its indexes anew (updated_at changes, so none is HOT).
DROP INDEX tickets_updated_at;
