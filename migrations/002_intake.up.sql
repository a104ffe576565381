-- Agents answer tickets; their names appear in API key actors (agent:NAME).
CREATE TABLE agents (
    name         text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    display_name text NOT NULL,
    email        text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a key is kept: a leaked table does not leak keys.
CREATE TABLE api_keys (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    actor      text NOT NULL CHECK (actor ~ '^(customer:C-[0-9]{4,}|agent:[a-z0-9][a-z0-9._-]{0,63})$'),
    key_sha256 bytea NOT NULL UNIQUE CHECK (length(key_sha256) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

-- A key belongs to its caller: two actors may pick the same one.
CREATE TABLE idempotency_keys (
    actor       text NOT NULL,
    key         text NOT NULL,
    fingerprint bytea NOT NULL,
    status      integer,
    response    jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT idempotency_keys_actor_key PRIMARY KEY (actor, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

ALTER TABLE tickets ADD COLUMN triage_job_id bigint;
CREATE INDEX tickets_created ON tickets (created_at DESC, id DESC);
