-- An address that bounced for good is left alone for a while: a reply to
-- it fails at once (suppressed), before any SMTP, until it expires or an
-- agent clears it.
CREATE TABLE suppressions (
    address    text PRIMARY KEY CHECK (address = lower(address) AND address <> ''),
    status     text NOT NULL, -- the enhanced status and diagnostic that put it here
    ticket_id  text REFERENCES tickets (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
ALTER TABLE outbound_emails DROP CONSTRAINT outbound_emails_state_check;
ALTER TABLE outbound_emails ADD CONSTRAINT outbound_emails_state_check
    CHECK (state IN ('queued', 'sending', 'sent', 'partially_sent', 'failed', 'uncertain', 'delayed', 'captured', 'suppressed'));
ALTER TABLE outbound_recipients DROP CONSTRAINT outbound_recipients_state_check;
ALTER TABLE outbound_recipients ADD CONSTRAINT outbound_recipients_state_check
    CHECK (state IN ('pending', 'sent', 'failed', 'uncertain', 'captured', 'suppressed'));
