package jobs

// Snoozes exposes how River counts a job's snoozes.
var Snoozes = snoozes
