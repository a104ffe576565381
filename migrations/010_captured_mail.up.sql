-- Without a relay, mail is captured (kept in a Maildir folder), not sent,
-- and says so wherever its state shows.
ALTER TABLE outbound_emails DROP CONSTRAINT outbound_emails_state_check;
ALTER TABLE outbound_emails ADD CONSTRAINT outbound_emails_state_check
    CHECK (state IN ('queued', 'sending', 'sent', 'partially_sent', 'failed', 'uncertain', 'delayed', 'captured'));
ALTER TABLE outbound_recipients DROP CONSTRAINT outbound_recipients_state_check;
ALTER TABLE outbound_recipients ADD CONSTRAINT outbound_recipients_state_check
    CHECK (state IN ('pending', 'sent', 'failed', 'uncertain', 'captured'));
