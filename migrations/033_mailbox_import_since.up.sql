-- The mail a mailbox imports: only what its server took at or after this
-- time (the message's INTERNALDATE); older mail is passed by and left where
-- it is. NULL: every message in the folder, however old.
ALTER TABLE mailboxes ADD COLUMN import_since timestamptz;
