DROP TABLE mailbox_pending;
DROP TABLE mailboxes;
ALTER TABLE tickets DROP COLUMN support_address;
DROP TABLE support_addresses;
