DO $$
BEGIN
    ALTER TABLE outbound_emails ALTER COLUMN rendered SET COMPRESSION DEFAULT;
    ALTER TABLE messages ALTER COLUMN body SET COMPRESSION DEFAULT;
EXCEPTION WHEN syntax_error OR feature_not_supported THEN
    NULL; -- PostgreSQL before 14: there was nothing to undo
END $$;
