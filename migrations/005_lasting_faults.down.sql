ALTER TABLE messages DROP COLUMN raw_email;
ALTER TABLE smtp_relays DROP COLUMN probe_until;
UPDATE outbound_emails SET state = 'queued' WHERE state = 'delayed';
ALTER TABLE outbound_emails DROP CONSTRAINT outbound_emails_state_check;
ALTER TABLE outbound_emails ADD CONSTRAINT outbound_emails_state_check
    CHECK (state IN ('queued', 'sending', 'sent', 'partially_sent', 'failed', 'uncertain'));
ALTER TABLE outbound_emails DROP COLUMN delayed_at;
ALTER TABLE outbound_emails DROP COLUMN queued_at;
