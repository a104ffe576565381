DROP TRIGGER tickets_agent_load_insert ON tickets;
DROP TRIGGER tickets_agent_load_update ON tickets;
DROP TRIGGER tickets_agent_load_delete ON tickets;

CREATE TRIGGER tickets_agent_load AFTER INSERT OR DELETE OR UPDATE OF assignee, status ON tickets
    FOR EACH ROW EXECUTE FUNCTION helpdesk_agent_load();
