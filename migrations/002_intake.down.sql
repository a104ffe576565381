DROP INDEX tickets_created;
ALTER TABLE tickets DROP COLUMN triage_job_id;
DROP TABLE idempotency_keys;
DROP TABLE api_keys;
DROP TABLE agents;
