UPDATE outbound_recipients SET state = 'failed' WHERE state = 'suppressed';
UPDATE outbound_emails SET state = 'failed' WHERE state = 'suppressed';
ALTER TABLE outbound_recipients DROP CONSTRAINT outbound_recipients_state_check;
ALTER TABLE outbound_recipients ADD CONSTRAINT outbound_recipients_state_check
    CHECK (state IN ('pending', 'sent', 'failed', 'uncertain', 'captured'));
ALTER TABLE outbound_emails DROP CONSTRAINT outbound_emails_state_check;
ALTER TABLE outbound_emails ADD CONSTRAINT outbound_emails_state_check
    CHECK (state IN ('queued', 'sending', 'sent', 'partially_sent', 'failed', 'uncertain', 'delayed', 'captured'));
DROP TABLE suppressions;
