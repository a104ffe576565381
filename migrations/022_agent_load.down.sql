DROP TRIGGER tickets_agent_load ON tickets;
DROP FUNCTION helpdesk_agent_load();
ALTER TABLE agents DROP COLUMN open_tickets;
