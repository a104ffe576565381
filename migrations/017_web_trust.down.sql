DROP TABLE ui_sessions;
ALTER TABLE agents DROP COLUMN admin;
