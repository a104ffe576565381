-- Each kind of job has a queue of its own, so that replies never wait
-- behind triage. Jobs queued before this version move to theirs; a job
-- that an older process still inserts into 'default' is worked there.
UPDATE river_job SET queue = CASE kind
        WHEN 'triage' THEN 'triage'
        WHEN 'email_outbound' THEN 'email'
        ELSE 'maintenance'
    END
WHERE queue = 'default' AND state IN ('available', 'pending', 'scheduled', 'retryable');

-- One row per AI provider, shared by every process: its circuit breaker
-- and the pace its quota allows.
CREATE TABLE providers (
    provider       text PRIMARY KEY,
    -- The breaker: closed (calls go), open (nobody calls until
    -- next_probe_at; then one job probes, until probe_until).
    state          text NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open')),
    failures       integer NOT NULL DEFAULT 0,     -- in a row, within the window
    window_start   timestamptz,
    opened_at      timestamptz,
    probe_interval interval NOT NULL DEFAULT '0',
    next_probe_at  timestamptz,
    probe_until    timestamptz,
    last_error     text,
    changed_at     timestamptz NOT NULL DEFAULT now(),
    -- The pace: one call per call_interval at most, none before
    -- blocked_until (a 429's Retry-After, or a spent budget's reset).
    call_interval  interval NOT NULL DEFAULT '0',
    next_call_at   timestamptz NOT NULL DEFAULT now(),
    blocked_until  timestamptz NOT NULL DEFAULT now(),
    quota_limit    integer,
    quota_remaining integer,
    quota_reset_at timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
