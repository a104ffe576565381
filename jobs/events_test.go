package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
)

// errorLines are the records logged at ERROR.
func errorLines(logs *jobstest.LogBuffer) []map[string]any {
	var out []map[string]any
	for _, l := range logs.Lines() {
		if l["level"] == "ERROR" {
			out = append(out, l)
		}
	}
	return out
}

func TestJobsThatEndBadlyAreLoggedAtError(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	srv := b.WithSMTP(t)
	var logs jobstest.LogBuffer
	b.Config.Logger = logs.Logger()
	b.Config.TriageMaxAttempts = 1
	if err := b.Sim.SetMode(simulator.ModeOutage); err != nil {
		t.Fatal(err)
	}
	srv.SetFallback(smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"c1@example.com": smtptest.ErrNoSuchUser}})
	q := b.StartQueue(t)
	ticketID, triageJob := b.OpenTicket(t, q, "Parcel", "Where is my parcel?")
	jobstest.WaitFor(t, q, triageJob, jobs.StateDeadLetter, 10*time.Second)
	_, emailJob := b.Reply(t, q, ticketID, "On its way.")
	jobstest.WaitFor(t, q, emailJob, jobs.StateFailed, 10*time.Second)

	// The events reach the logger a moment after the job's state.
	deadline := time.Now().Add(10 * time.Second)
	for len(errorLines(&logs)) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	found := map[string]map[string]any{}
	for _, l := range errorLines(&logs) {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "job ") {
			found[l["kind"].(string)] = l
		}
	}
	if l := found["triage"]; l == nil || l["msg"] != "job dead_letter" || l["ticket_id"] != ticketID ||
		!strings.Contains(l["last_error"].(string), "ProviderUnavailable") {
		t.Errorf("triage dead letter logged as %v", l)
	}
	if l := found["email_outbound"]; l == nil || l["msg"] != "job failed" || l["ticket_id"] != ticketID ||
		!strings.Contains(l["last_error"].(string), "550") {
		t.Errorf("failed email logged as %v", l)
	}
}
