-- When a fetched mail reached the mailbox it was fetched from (its
-- INTERNALDATE, RFC 9051 §2.3.3), where that was before it was filed: the
-- customer has waited since then, so the SLA clocks count from it, and an
-- alert whose time came before the desk had the mail is shown, not sent.
-- NULL: the mail was filed as it arrived (created_at).
ALTER TABLE messages ADD COLUMN arrived_at timestamptz;
