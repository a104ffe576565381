UPDATE attachment_contents c SET content = (SELECT string_agg(data, ''::bytea ORDER BY seq) FROM attachment_chunks k WHERE k.sha256 = c.sha256)
    WHERE content IS NULL;
UPDATE messages m SET raw_email = (SELECT string_agg(data, ''::bytea ORDER BY seq) FROM raw_email_chunks k WHERE k.message_id = m.id)
    WHERE raw_email IS NULL AND EXISTS (SELECT 1 FROM raw_email_chunks k WHERE k.message_id = m.id);
DROP TABLE raw_email_chunks;
DROP TABLE attachment_chunks;
DELETE FROM attachment_contents WHERE content IS NULL;
ALTER TABLE attachment_contents ALTER COLUMN content SET NOT NULL;
DROP INDEX acknowledgements_sent_at;
DROP TABLE ticket_participants;
DELETE FROM messages WHERE direction = 'held';
ALTER TABLE messages DROP COLUMN subject, DROP COLUMN held_reason, DROP COLUMN auth_detail, DROP COLUMN auth_verdict, DROP COLUMN sender;
ALTER TABLE messages DROP CONSTRAINT messages_direction_check;
ALTER TABLE messages ADD CONSTRAINT messages_direction_check
    CHECK (direction IN ('inbound', 'outbound', 'note', 'notification', 'agent_email', 'acknowledgement'));
