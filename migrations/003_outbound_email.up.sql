-- Every ticket is one thread: its first message carries the thread root's
-- Message-ID. Tickets opened through the API before this migration get a
-- synthetic one, as new ones do when they are opened.
UPDATE messages m
SET email_message_id = '<' || m.ticket_id || '.' || replace(gen_random_uuid()::text, '-', '') || '@helpdesk.invalid>'
WHERE m.email_message_id IS NULL
  AND m.id = (SELECT min(id) FROM messages WHERE ticket_id = m.ticket_id);

-- The delivery of an outbound message. Its bytes are rendered once and kept,
-- so that every retry sends exactly what the first attempt sent.
CREATE TABLE outbound_emails (
    message_id        bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    job_id            bigint,
    from_address      text NOT NULL,
    state             text NOT NULL DEFAULT 'queued'
                      CHECK (state IN ('queued', 'sending', 'sent', 'partially_sent', 'failed', 'uncertain')),
    in_reply_to       text,
    reference_ids     text[],
    rendered          bytea,
    rendered_at       timestamptz,
    attempts          integer NOT NULL DEFAULT 0,
    uncertain_resends integer NOT NULL DEFAULT 0,
    last_error        text,
    smtp_reply        text,
    sent_at           timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- One row per recipient: a retry sends only to those not yet served.
CREATE TABLE outbound_recipients (
    message_id    bigint NOT NULL REFERENCES outbound_emails (message_id) ON DELETE CASCADE,
    address       text NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('to', 'cc')),
    state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed', 'uncertain')),
    smtp_code     integer,
    smtp_enhanced text,
    smtp_text     text,
    sent_at       timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (message_id, address)
);

-- A relay that asked us to slow down (421, 451 4.7.x, …) is left alone
-- until not_before, by every job and every process.
CREATE TABLE smtp_relays (
    relay      text PRIMARY KEY,
    not_before timestamptz NOT NULL,
    slowdowns  integer NOT NULL DEFAULT 0,
    last_reply text,
    updated_at timestamptz NOT NULL DEFAULT now()
);
