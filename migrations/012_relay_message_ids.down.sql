DROP INDEX outbound_emails_relay_message_id;
ALTER TABLE outbound_emails DROP COLUMN relay_message_id;
