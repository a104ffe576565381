-- Agents run tickets: teams, assignment, lifecycle, events, notes.

ALTER TABLE agents ADD COLUMN disabled_at timestamptz;
ALTER TABLE agents ADD COLUMN last_assigned_at timestamptz;

-- An agent belongs to one or more teams; the teams that exist are the
-- ones triage may choose.
CREATE TABLE agent_teams (
    agent text NOT NULL REFERENCES agents (name) ON DELETE CASCADE,
    team  text NOT NULL CHECK (team ~ '^[a-z][a-z0-9_-]{0,39}$'),
    PRIMARY KEY (agent, team)
);
CREATE INDEX agent_teams_team ON agent_teams (team, agent);

ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

ALTER TABLE tickets ADD COLUMN assignee text REFERENCES agents (name);
ALTER TABLE tickets ADD COLUMN follow_up_of text REFERENCES tickets (id);
ALTER TABLE tickets ADD COLUMN first_response_at timestamptz;
ALTER TABLE tickets ADD COLUMN last_customer_message_at timestamptz;
ALTER TABLE tickets ADD COLUMN draft_written_at timestamptz;
-- The draft is current only when the ticket's current triage job wrote it:
-- a customer message after it queues a new job, and the draft is stale
-- until that job writes a new one.
ALTER TABLE tickets ADD COLUMN draft_job_id bigint;
ALTER TABLE tickets ADD COLUMN solved_at timestamptz;
UPDATE tickets t SET last_customer_message_at = (
    SELECT max(created_at) FROM messages m WHERE m.ticket_id = t.id AND m.direction = 'inbound');
UPDATE tickets SET draft_written_at = updated_at, draft_job_id = triage_job_id WHERE draft_reply IS NOT NULL;

-- The list filters, each in the newest-first order of the list.
CREATE INDEX tickets_status ON tickets (status, created_at DESC, id DESC);
CREATE INDEX tickets_team ON tickets (team, created_at DESC, id DESC);
CREATE INDEX tickets_assignee ON tickets (assignee, created_at DESC, id DESC);
DROP INDEX tickets_customer;
CREATE INDEX tickets_customer ON tickets (customer_id, created_at DESC, id DESC);
-- Assignment counts each agent's open and pending tickets.
CREATE INDEX tickets_assignee_active ON tickets (assignee) WHERE status IN ('open', 'pending');
-- Autoclose finds solved tickets by when they were solved.
CREATE INDEX tickets_solved ON tickets (solved_at) WHERE status = 'solved';

-- Every change of a ticket, written in the transaction that makes it.
CREATE TABLE ticket_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ticket_id  text NOT NULL REFERENCES tickets (id) ON DELETE CASCADE,
    actor      text NOT NULL, -- agent:NAME, customer:C-…, or system
    what       text NOT NULL, -- status, assignee, team, priority, follow_up
    from_value text,
    to_value   text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ticket_events_ticket ON ticket_events (ticket_id, id);
