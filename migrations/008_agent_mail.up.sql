-- Agents get mail about tickets and answer it: the service's mail to
-- agents (notification) and the agents' mail as it came (agent_email) are
-- messages of the ticket, on the agent side: never shown to the customer,
-- never in the customer's thread.
ALTER TABLE messages DROP CONSTRAINT messages_direction_check;
ALTER TABLE messages ADD CONSTRAINT messages_direction_check
    CHECK (direction IN ('inbound', 'outbound', 'note', 'notification', 'agent_email'));
