CREATE TABLE customers (
    id         text PRIMARY KEY CHECK (id ~ '^C-[0-9]{4,}$'),
    email      text NOT NULL UNIQUE CHECK (email <> ''),
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Ticket numbers are shown to customers (T-500001), so they come from a
-- sequence of their own rather than from a surrogate key.
CREATE SEQUENCE ticket_number_seq START 500001;

CREATE TABLE tickets (
    id          text PRIMARY KEY DEFAULT 'T-' || nextval('ticket_number_seq'),
    customer_id text NOT NULL REFERENCES customers (id),
    subject     text NOT NULL CHECK (subject <> ''),
    status      text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'pending', 'solved', 'closed')),
    team        text,
    priority    smallint CHECK (priority BETWEEN 1 AND 4),
    draft_reply text,
    embedding   real[],
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tickets_customer ON tickets (customer_id, created_at DESC);

CREATE TABLE messages (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ticket_id        text NOT NULL REFERENCES tickets (id) ON DELETE CASCADE,
    direction        text NOT NULL CHECK (direction IN ('inbound', 'outbound', 'note')),
    author           text NOT NULL,
    body             text NOT NULL,
    email_message_id text,
    created_at       timestamptz NOT NULL DEFAULT now()
);
-- One Message-ID names one message, across all tickets.
CREATE UNIQUE INDEX messages_email_message_id ON messages (email_message_id) WHERE email_message_id IS NOT NULL;
CREATE INDEX messages_ticket ON messages (ticket_id, created_at, id);

-- One row per triage job and step. job_id is River's job id; it is not a
-- foreign key because River's cleaner deletes finished jobs after a while and
-- the results must outlive them.
CREATE TABLE ai_runs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id            bigint NOT NULL,
    ticket_id         text NOT NULL REFERENCES tickets (id) ON DELETE CASCADE,
    task              text NOT NULL CHECK (task IN ('classify', 'draft_reply', 'embed')),
    output            text NOT NULL,
    model             text NOT NULL,
    latency_ms        integer NOT NULL,
    prompt_tokens     integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ai_runs_one_per_job_task UNIQUE (job_id, task)
);
CREATE INDEX ai_runs_ticket ON ai_runs (ticket_id);
