-- Customers who write in without an account get numbers from here, far
-- above the hand-made ones.
CREATE SEQUENCE customer_number_seq START 100000;
CREATE UNIQUE INDEX customers_email_lower ON customers (lower(email));

-- What an inbound email carried besides its text, and whether a machine
-- sent it (auto-replies and bulk mail start no triage).
ALTER TABLE messages ADD COLUMN attachments jsonb NOT NULL DEFAULT '[]';
ALTER TABLE messages ADD COLUMN auto_submitted boolean NOT NULL DEFAULT false;
