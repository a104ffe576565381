-- A copy's display name ("Dana Scully <dana@…>") reaches the mail as the
-- agent wrote it.
ALTER TABLE outbound_recipients ADD COLUMN display_name text NOT NULL DEFAULT '';
