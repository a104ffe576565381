DROP TABLE providers;
UPDATE river_job SET queue = 'default'
WHERE queue IN ('triage', 'email', 'maintenance') AND state IN ('available', 'pending', 'scheduled', 'retryable');
