-- A relay that gives the message an id of its own and rewrites its
-- Message-ID with it (Amazon SES answers "250 Ok <id>") makes customers
-- answer that id: it is kept, and inbound mail is matched against it too.
ALTER TABLE outbound_emails ADD COLUMN relay_message_id text;
CREATE INDEX outbound_emails_relay_message_id ON outbound_emails (relay_message_id) WHERE relay_message_id IS NOT NULL;
