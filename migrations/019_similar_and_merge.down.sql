DROP INDEX tickets_updated_at;
ALTER TABLE tickets DROP COLUMN merged_into, DROP COLUMN possible_duplicate_of, DROP COLUMN draft_sources;
