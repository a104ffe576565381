-- An update of a ticket that changes no indexed column can be a HOT update
-- (heap-only: no new entry in any of the ticket's indexes), if its page has
-- room. Triage's draft, the first response's time and the triage job's id
-- change no indexed column, but every update wrote all of the indexes
-- anew: updated_at was indexed for the vector index's full read, and every
-- update named its transaction in changed_xid, indexed for the refresh.

-- changed_xid names the transaction that last changed what the vector index
-- holds of a ticket (its vector, status, team, customer, merge and time),
-- not any change: an update that sets none of those columns leaves it.
DROP TRIGGER tickets_changed_xid ON tickets;
CREATE TRIGGER tickets_changed_xid BEFORE INSERT OR UPDATE OF embedding, status, team, customer_id, merged_into, created_at ON tickets
    FOR EACH ROW EXECUTE FUNCTION tickets_changed_xid();

-- The full read pages through the embedded tickets by (changed_xid, id):
-- one index serves it and the refresh, and updated_at is indexed no more.
DROP INDEX tickets_embedded_updated;
DROP INDEX tickets_embedded_changed;
CREATE INDEX tickets_embedded_changed ON tickets (changed_xid, id) WHERE embedding IS NOT NULL;

-- Room on each page for the next version of its rows.
ALTER TABLE tickets SET (fillfactor = 90);

-- Tickets embedded before migration 025 have no changed_xid: they sort
-- first in the full read, as changes older than any transaction running.
UPDATE tickets SET changed_xid = '0' WHERE changed_xid IS NULL AND embedding IS NOT NULL;
