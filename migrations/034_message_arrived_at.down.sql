ALTER TABLE messages DROP COLUMN arrived_at;
