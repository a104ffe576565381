-- SLA clocks: calendars of business hours, policies per priority (and
-- team), each ticket's due times as last computed, and the warnings and
-- breaches that went out, once each.
CREATE TABLE calendars (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$' AND name <> '24x7'),
    time_zone  text NOT NULL,
    hours      text NOT NULL,
    holidays   date[] NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sla_policies (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    priority          smallint NOT NULL CHECK (priority BETWEEN 1 AND 4),
    team              text NOT NULL DEFAULT '', -- '' for every team without a policy of its own
    first_response_ms bigint NOT NULL DEFAULT 0 CHECK (first_response_ms >= 0),
    next_response_ms  bigint NOT NULL DEFAULT 0 CHECK (next_response_ms >= 0),
    resolution_ms     bigint NOT NULL DEFAULT 0 CHECK (resolution_ms >= 0),
    warn_before_ms    bigint NOT NULL DEFAULT 0 CHECK (warn_before_ms >= 0), -- 0: 20 % of the target
    calendar          text NOT NULL DEFAULT '24x7',
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (priority, team)
);

CREATE TABLE ticket_slas (
    ticket_id          text PRIMARY KEY REFERENCES tickets (id) ON DELETE CASCADE,
    policy_id          bigint REFERENCES sla_policies (id) ON DELETE SET NULL,
    first_response_due timestamptz,
    next_response_due  timestamptz,
    resolution_due     timestamptz,
    paused             boolean NOT NULL DEFAULT false,
    breaches           jsonb NOT NULL DEFAULT '[]',
    breached           boolean NOT NULL DEFAULT false,
    computed_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ticket_slas_due ON ticket_slas (least(first_response_due, next_response_due, resolution_due));

-- One row per warning or breach sent: the key is the clock's run (its
-- target and when it started), so a recomputed due time sends nothing
-- twice.
CREATE TABLE sla_alerts (
    ticket_id   text NOT NULL REFERENCES tickets (id) ON DELETE CASCADE,
    target      text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('warning', 'breached')),
    clock_start timestamptz NOT NULL,
    due_at      timestamptz NOT NULL,
    sent_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ticket_id, target, kind, clock_start)
);
