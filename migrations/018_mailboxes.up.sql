-- Mail from the mailboxes teams already have, and several support addresses.

-- A support address: where customers write, with the From its replies
-- carry and the team its tickets belong to. The default address
-- (HELPDESK_FROM) needs no row.
CREATE TABLE support_addresses (
    address    text PRIMARY KEY CHECK (address = lower(address) AND address LIKE '%_@_%'),
    from_name  text NOT NULL DEFAULT '',
    team       text CHECK (team ~ '^[a-z][a-z0-9_-]{0,39}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The address a ticket came in on; NULL: the default address.
ALTER TABLE tickets ADD COLUMN support_address text REFERENCES support_addresses (address);

-- An IMAP mailbox the workers fetch from, one holder at a time (a lease),
-- with its checkpoint: the UIDVALIDITY of its folder and the highest UID
-- filed, advanced in the transaction that files the message.
CREATE TABLE mailboxes (
    name             text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    address          text NOT NULL UNIQUE REFERENCES support_addresses (address),
    imap_url         text NOT NULL,          -- without the password
    password         text,                   -- never shown
    processed_folder text NOT NULL DEFAULT 'Processed',
    after_import     text NOT NULL DEFAULT 'move' CHECK (after_import IN ('move', 'flag', 'keep')),
    -- OAuth 2.0 (XOAUTH2): the provider, the client, the tokens.
    oauth_provider      text CHECK (oauth_provider IN ('microsoft', 'google', 'custom')),
    oauth_client_id     text,
    oauth_client_secret text,
    oauth_token_url     text,
    oauth_scopes        text,
    oauth_refresh_token text,
    oauth_access_token  text,
    oauth_expires_at    timestamptz,
    disabled_at      timestamptz,
    uidvalidity      bigint,
    last_uid         bigint NOT NULL DEFAULT 0,
    lease_holder     text,
    lease_until      timestamptz,
    connected        boolean NOT NULL DEFAULT false,
    last_success_at  timestamptz,
    last_error       text,
    last_error_at    timestamptz,
    uidvalidity_resets int NOT NULL DEFAULT 0,
    imported         bigint NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now()
);

-- Messages filed whose move (or flag) has not been done: the fetcher does
-- it after the commit, and again after a crash, never importing twice.
CREATE TABLE mailbox_pending (
    mailbox     text NOT NULL REFERENCES mailboxes (name) ON DELETE CASCADE,
    uidvalidity bigint NOT NULL,
    uid         bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mailbox, uidvalidity, uid)
);
