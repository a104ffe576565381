DROP TABLE smtp_relays;
DROP TABLE outbound_recipients;
DROP TABLE outbound_emails;
-- The synthetic thread roots stay: they name messages that exist.
