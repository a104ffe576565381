-- Each agent's load (assigned tickets that are open or pending), kept by a
-- trigger on every change of a ticket's assignee or status, so that
-- auto-assignment reads one row per agent instead of counting the team's
-- tickets under a team-wide lock.
ALTER TABLE agents ADD COLUMN open_tickets integer NOT NULL DEFAULT 0;

UPDATE agents a SET open_tickets = (SELECT count(*) FROM tickets t WHERE t.assignee = a.name AND t.status IN ('open', 'pending'));

CREATE FUNCTION helpdesk_agent_load() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was boolean := TG_OP <> 'INSERT' AND OLD.assignee IS NOT NULL AND OLD.status IN ('open', 'pending');
    now_ boolean := TG_OP <> 'DELETE' AND NEW.assignee IS NOT NULL AND NEW.status IN ('open', 'pending');
BEGIN
    IF TG_OP = 'UPDATE' AND was = now_ AND OLD.assignee IS NOT DISTINCT FROM NEW.assignee THEN
        RETURN NULL; -- the same load
    END IF;
    IF was THEN
        UPDATE agents SET open_tickets = open_tickets - 1 WHERE name = OLD.assignee;
    END IF;
    IF now_ THEN
        UPDATE agents SET open_tickets = open_tickets + 1 WHERE name = NEW.assignee;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tickets_agent_load AFTER INSERT OR DELETE OR UPDATE OF assignee, status ON tickets
    FOR EACH ROW EXECUTE FUNCTION helpdesk_agent_load();
