-- An Idempotency-Key's claim (store.Batch.ClaimIdempotencyKey) goes with
-- the first statements of the request's transaction, ahead of them. A key
-- that an earlier request holds must stop that trip there, before a ticket
-- number is taken (sequences do not roll back), and the only way to stop a
-- pipeline of statements is an error. The claim inserts with ON CONFLICT DO
-- NOTHING, which neither writes a row version nor locks the row held, and
-- calls this when it inserted nothing: the error is a unique violation on
-- the key's constraint, as a plain insert would raise, without the dead row
-- version and the wait on each other's doomed inserts that a plain insert
-- costs repeated requests.
CREATE FUNCTION helpdesk_idempotency_key_taken() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'idempotency key taken by an earlier request'
        USING ERRCODE = 'unique_violation', CONSTRAINT = 'idempotency_keys_actor_key';
END
$$;
