-- The agent console: saved replies (a team's or an agent's own), who is
-- looking at or answering a ticket, and an index for the queues' order.
CREATE TABLE saved_replies (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    title      text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    body       text NOT NULL CHECK (length(body) BETWEEN 1 AND 20000),
    team       text,                -- a team's, for its agents
    owner      text,                -- an agent's own
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((team IS NULL) <> (owner IS NULL))
);

CREATE UNLOGGED TABLE ticket_presence (
    ticket_id text NOT NULL REFERENCES tickets (id) ON DELETE CASCADE,
    agent     text NOT NULL,
    activity  text NOT NULL CHECK (activity IN ('viewing', 'replying')),
    seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ticket_id, agent)
);

CREATE INDEX tickets_waiting ON tickets ((coalesce(last_customer_message_at, created_at)) DESC, id DESC);
