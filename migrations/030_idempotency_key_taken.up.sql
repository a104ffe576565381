-- An Idempotency-Key's claim (store.Batch.ClaimIdempotencyKey) goes with
-- the first statements of the request's transaction, ahead of them. A key
-- that an earlier request holds must stop that trip there, before a ticket
-- number is taken (sequences do not roll back), and the only way to stop a
-- pipeline of statements is an error. The claim inserts with ON CONFLICT DO
-- NOTHING, which neither writes a row version nor locks the row held, and
-- calls this when it inserted nothing: a key older than the retention is
-- taken over as if new; any other is a unique violation on the key's
-- constraint, as a plain insert would raise, without the dead row version
-- and the wait on each other's doomed inserts that a plain insert costs
-- repeated requests. Two takeovers of one key queue on its row, and the
-- second finds it new again.
CREATE FUNCTION helpdesk_idempotency_key_taken(p_actor text, p_key text, p_fingerprint bytea, p_retention interval)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    UPDATE idempotency_keys SET fingerprint = p_fingerprint, status = NULL, response = NULL, created_at = now()
        WHERE actor = p_actor AND key = p_key AND created_at < now() - p_retention;
    IF FOUND THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'idempotency key taken by an earlier request'
        USING ERRCODE = 'unique_violation', CONSTRAINT = 'idempotency_keys_actor_key';
END
$$;
