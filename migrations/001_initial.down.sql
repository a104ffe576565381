DROP TABLE ai_runs;
DROP TABLE messages;
DROP TABLE tickets;
DROP SEQUENCE ticket_number_seq;
DROP TABLE customers;
