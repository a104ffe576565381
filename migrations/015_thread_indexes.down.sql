DROP INDEX messages_customer_thread;
DROP INDEX messages_ticket_direction;
