-- storetest.Million: a help desk with a history, for the growth benchmarks.
INSERT INTO customers (id, email, name)
SELECT 'C-' || lpad(g::text, 7, '0'), 'customer' || g || '@example.net', 'Customer ' || g
FROM generate_series(1, 100000) g;

INSERT INTO tickets (id, customer_id, subject, status, team, priority, created_at, updated_at,
                     last_customer_message_at, first_response_at, solved_at)
SELECT 'T-' || nextval('ticket_number_seq'),
       'C-' || lpad((1 + g % 100000)::text, 7, '0'),
       'Stored question ' || g,
       -- Solved within the last three days (8,640 tickets at one every 30 s), else closed: older
       -- solved tickets would have been closed by autoclose (168h), and a template a few days old
       -- leaves it a small backlog only.
       CASE WHEN g % 100 = 0 THEN 'open' WHEN g % 100 = 1 THEN 'pending'
            WHEN g % 3 = 0 AND g > 1000000 - 8640 THEN 'solved' ELSE 'closed' END,
       (ARRAY['billing', 'shipping', 'technical'])[1 + g % 3],
       1 + g % 4,
       now() - make_interval(secs => (1000000 - g) * 30),
       now() - make_interval(secs => (1000000 - g) * 30),
       now() - make_interval(secs => (1000000 - g) * 30),
       now() - make_interval(secs => (1000000 - g) * 30 - 600),
       CASE WHEN g % 100 > 1 THEN now() - make_interval(secs => (1000000 - g) * 30 - 3600) END
FROM generate_series(1, 1000000) g;

INSERT INTO messages (ticket_id, direction, author, body, email_message_id, created_at)
SELECT t.id, 'inbound', 'customer:' || t.customer_id,
       'A question the customer asked a while ago, number ' || t.id || ', kept as the history of the desk.',
       '<' || t.id || '@stored.example.net>', t.created_at
FROM tickets t;

INSERT INTO ticket_events (ticket_id, actor, what, from_value, to_value, created_at)
SELECT t.id, 'agent:alice', 'status', 'open', t.status, t.created_at FROM tickets t WHERE t.status <> 'open';

