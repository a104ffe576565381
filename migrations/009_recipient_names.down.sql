ALTER TABLE outbound_recipients DROP COLUMN display_name;
