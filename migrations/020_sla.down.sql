DROP TABLE sla_alerts;
DROP TABLE ticket_slas;
DROP TABLE sla_policies;
DROP TABLE calendars;
