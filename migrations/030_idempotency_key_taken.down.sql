DROP FUNCTION helpdesk_idempotency_key_taken(text, text, bytea, interval);
