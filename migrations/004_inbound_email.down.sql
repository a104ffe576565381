ALTER TABLE messages DROP COLUMN auto_submitted;
ALTER TABLE messages DROP COLUMN attachments;
DROP INDEX customers_email_lower;
DROP SEQUENCE customer_number_seq;
