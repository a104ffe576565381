-- Endpoints that agents register for events.
CREATE TABLE webhooks (
    id         bigserial PRIMARY KEY,
    url        text NOT NULL CHECK (url ~ '^https?://'),
    events     text[] NOT NULL CHECK (cardinality(events) > 0),
    secret     text NOT NULL, -- whsec_…, the HMAC key of the signatures
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- An event, written in the transaction of the change it reports; a
-- dispatcher turns it into one delivery job per subscribed endpoint.
CREATE TABLE webhook_events (
    id            bigserial PRIMARY KEY,
    type          text NOT NULL,
    payload       jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    dispatched_at timestamptz
);
CREATE INDEX webhook_events_undispatched ON webhook_events (id) WHERE dispatched_at IS NULL;
