-- Whose Authentication-Results are believed for the mail fetched from a
-- mailbox, when it is not the provider's (Microsoft 365, Google) nor the
-- service's HELPDESK_INBOUND_AUTHSERV_ID: a company's own MTA in front of
-- its own IMAP server. NULL: the provider's, else the service's.
ALTER TABLE mailboxes ADD COLUMN authserv_id text;
