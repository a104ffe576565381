DROP TABLE webhook_events;
DROP TABLE webhooks;
