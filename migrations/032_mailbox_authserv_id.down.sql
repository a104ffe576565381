ALTER TABLE mailboxes DROP COLUMN authserv_id;
