-- An email is given up by its age, not by its attempts, and is shown as
-- delayed once it waited longer than the delay notice: both count from
-- when the reply was queued.
ALTER TABLE outbound_emails ADD COLUMN queued_at timestamptz NOT NULL DEFAULT now();
UPDATE outbound_emails e SET queued_at = m.created_at FROM messages m WHERE m.id = e.message_id;
ALTER TABLE outbound_emails ADD COLUMN delayed_at timestamptz;
ALTER TABLE outbound_emails DROP CONSTRAINT outbound_emails_state_check;
ALTER TABLE outbound_emails ADD CONSTRAINT outbound_emails_state_check
    CHECK (state IN ('queued', 'sending', 'sent', 'partially_sent', 'failed', 'uncertain', 'delayed'));

-- While a relay is down, one job at a time may probe it: the one that set
-- probe_until, until then.
ALTER TABLE smtp_relays ADD COLUMN probe_until timestamptz;

-- An inbound email exactly as it arrived (gzip), whatever its headers
-- held: what is stored elsewhere is cleaned (no NUL, valid UTF-8), this is
-- not, so a message can be read again after a parser fix.
ALTER TABLE messages ADD COLUMN raw_email bytea;
