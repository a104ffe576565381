-- Mail we can trust: what a sender's domain said of each inbound message,
-- messages held because their sender may not write into the ticket they
-- name, and the people who may write into a ticket besides its customer.
ALTER TABLE messages DROP CONSTRAINT messages_direction_check;
ALTER TABLE messages ADD CONSTRAINT messages_direction_check
    CHECK (direction IN ('inbound', 'outbound', 'note', 'notification', 'agent_email', 'acknowledgement', 'held'));
ALTER TABLE messages ADD COLUMN sender text;           -- the From address as parsed, for mail
ALTER TABLE messages ADD COLUMN auth_verdict text CHECK (auth_verdict IN ('pass', 'fail', 'none'));
ALTER TABLE messages ADD COLUMN auth_detail text;      -- how the verdict was reached
ALTER TABLE messages ADD COLUMN held_reason text;      -- why a held message was held
ALTER TABLE messages ADD COLUMN subject text;          -- a mail's Subject, for a held one split into a ticket

CREATE TABLE ticket_participants (
    ticket_id  text NOT NULL REFERENCES tickets (id) ON DELETE CASCADE,
    address    text NOT NULL CHECK (address = lower(address)),
    added_by   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ticket_id, address)
);

-- Acknowledgements are also counted across every address, per hour.
CREATE INDEX acknowledgements_sent_at ON acknowledgements (sent_at);

-- Large bytes in chunks: a mail as it came, or a file, past one chunk
-- (256 KiB) is written a chunk per row, a few rows per round trip, so
-- that no copy of it is ever made whole (the driver copies each
-- parameter twice). The references are checked at commit: the chunks go
-- before the row they belong to, in the same transaction.
ALTER TABLE attachment_contents ALTER COLUMN content DROP NOT NULL;  -- NULL: in attachment_chunks
CREATE TABLE attachment_chunks (
    sha256 bytea NOT NULL REFERENCES attachment_contents (sha256) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    seq    int NOT NULL CHECK (seq >= 0),
    data   bytea NOT NULL,
    PRIMARY KEY (sha256, seq)
);
CREATE TABLE raw_email_chunks (
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    seq        int NOT NULL CHECK (seq >= 0),
    data       bytea NOT NULL,                                 -- of the gzip stream
    PRIMARY KEY (message_id, seq)
);
