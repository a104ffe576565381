DROP INDEX tickets_active_waiting;
DROP INDEX tickets_active;
DROP INDEX tickets_embedded_updated;
