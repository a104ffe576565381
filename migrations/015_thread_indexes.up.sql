-- A reply's thread reads the ticket's newest customer-side messages and its
-- newest inbound one. With only (ticket_id, created_at, id), a ticket where
-- an agent wrote many times after one inbound message, or with many notes
-- and mails to agents, made those reads walk every row of the other kinds.
CREATE INDEX messages_ticket_direction ON messages (ticket_id, direction, created_at, id);
CREATE INDEX messages_customer_thread ON messages (ticket_id, created_at, id)
    WHERE email_message_id IS NOT NULL AND direction IN ('inbound', 'outbound', 'acknowledgement');
