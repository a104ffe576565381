DELETE FROM messages WHERE direction IN ('notification', 'agent_email');
ALTER TABLE messages DROP CONSTRAINT messages_direction_check;
ALTER TABLE messages ADD CONSTRAINT messages_direction_check CHECK (direction IN ('inbound', 'outbound', 'note'));
