-- Attachment bytes, stored once however many messages carry them.
CREATE TABLE attachment_contents (
    sha256     bytea PRIMARY KEY CHECK (length(sha256) = 32),
    content    bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- An attachment of a message: a customer's file or inline image, or an
-- agent's upload, which belongs to no message until a reply sends it.
CREATE TABLE attachments (
    id           bigserial PRIMARY KEY,
    message_id   bigint REFERENCES messages (id) ON DELETE CASCADE,
    position     int NOT NULL DEFAULT 0,
    filename     text NOT NULL,
    content_type text NOT NULL,
    size         bigint NOT NULL CHECK (size >= 0),
    sha256       bytea REFERENCES attachment_contents (sha256),
    content_id   text,          -- "<…>" of a part that has one, what cid: links name
    inline       boolean NOT NULL DEFAULT false, -- shown in the message's HTML, not offered as a file
    note         text,          -- why the content was not kept
    uploaded_by  text,          -- the agent's name, for an upload
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (message_id IS NOT NULL OR uploaded_by IS NOT NULL)
);
CREATE INDEX attachments_message ON attachments (message_id, position) WHERE message_id IS NOT NULL;
CREATE INDEX attachments_unsent_uploads ON attachments (created_at) WHERE message_id IS NULL;

-- What was kept of attachments before: their names, types and sizes.
INSERT INTO attachments (message_id, position, filename, content_type, size, note)
SELECT m.id, a.ord::int, coalesce(a.item->>'name', ''), coalesce(a.item->>'type', 'application/octet-stream'),
       coalesce((a.item->>'size')::bigint, 0), 'content not kept: received before attachments were stored'
FROM messages m, jsonb_array_elements(m.attachments) WITH ORDINALITY a(item, ord);
ALTER TABLE messages DROP COLUMN attachments;

-- An agent's signature, below every reply.
ALTER TABLE agents ADD COLUMN signature text NOT NULL DEFAULT '';

-- The acknowledgement of a new ticket: mail to the customer written by
-- the service, in the customer's thread.
ALTER TABLE messages DROP CONSTRAINT messages_direction_check;
ALTER TABLE messages ADD CONSTRAINT messages_direction_check
    CHECK (direction IN ('inbound', 'outbound', 'note', 'notification', 'agent_email', 'acknowledgement'));
CREATE TABLE acknowledgements (
    address    text NOT NULL CHECK (address = lower(address)),
    ticket_id  text NOT NULL REFERENCES tickets (id) ON DELETE CASCADE,
    sent_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX acknowledgements_address ON acknowledgements (address, sent_at);
