ALTER TABLE mailboxes DROP COLUMN import_since;
