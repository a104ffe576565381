DROP INDEX tickets_waiting;
DROP TABLE ticket_presence;
DROP TABLE saved_replies;
