-- Web surfaces we can trust: admins, and River UI sessions of our own.
ALTER TABLE agents ADD COLUMN admin boolean NOT NULL DEFAULT false;

-- A UI session: the SHA-256 of a random id the browser holds, for one
-- API key. Revoking the key or disabling its agent ends it (checked on
-- every use); deleting the key deletes it; logout deletes it.
CREATE TABLE ui_sessions (
    id_sha256    bytea PRIMARY KEY CHECK (length(id_sha256) = 32),
    key_id       bigint NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_used_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ui_sessions_key ON ui_sessions (key_id);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);
