-- Found by the growth benchmarks (make bench-growth: a million tickets).

-- The vector index reads the embedded tickets only, in the order they
-- changed: without this a full read went through every ticket, and a desk
-- with a history and no embedding yet read all of it before each search.
CREATE INDEX tickets_embedded_updated ON tickets (updated_at, id) WHERE embedding IS NOT NULL;

-- The console's queue views are of open and pending tickets, a few among
-- many: their counts and their order (the customer's newest message first)
-- read these small indexes instead of the status index's heap rows.
CREATE INDEX tickets_active ON tickets (status, team, assignee) WHERE status IN ('open', 'pending') AND merged_into IS NULL;
CREATE INDEX tickets_active_waiting ON tickets ((coalesce(last_customer_message_at, created_at)) DESC, id DESC)
    WHERE status IN ('open', 'pending') AND merged_into IS NULL;
