DROP FUNCTION helpdesk_idempotency_key_taken();
