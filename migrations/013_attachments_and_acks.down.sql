DROP TABLE acknowledgements;
DELETE FROM messages WHERE direction = 'acknowledgement';
ALTER TABLE messages DROP CONSTRAINT messages_direction_check;
ALTER TABLE messages ADD CONSTRAINT messages_direction_check
    CHECK (direction IN ('inbound', 'outbound', 'note', 'notification', 'agent_email'));
ALTER TABLE agents DROP COLUMN signature;
ALTER TABLE messages ADD COLUMN attachments jsonb NOT NULL DEFAULT '[]';
UPDATE messages m SET attachments = a.list FROM (
    SELECT message_id, jsonb_agg(jsonb_build_object('name', filename, 'type', content_type, 'size', size) ORDER BY position) list
    FROM attachments WHERE message_id IS NOT NULL GROUP BY message_id) a
WHERE a.message_id = m.id;
DROP TABLE attachments;
DROP TABLE attachment_contents;
