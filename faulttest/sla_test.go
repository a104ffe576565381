package faulttest_test

import (
	"bytes"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSLAWarningsAndBreachesOnceThroughTheBinary times two tickets with a
// one-minute first response on the 24x7 calendar, with two worker
// processes of which one is SIGKILLed between the warning and the breach:
// the answered ticket has no breach; the one left alone has exactly one
// warning and one breach, by mail and as events.
func TestSLAWarningsAndBreachesOnceThroughTheBinary(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for p := 1; p <= 4; p++ {
		cmd := exec.Command(binary(t), "sla", "set", "-priority", strconv.Itoa(p), "-first-response", "1m")
		cmd.Env = w.env(nil)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sla set: %v\n%s", err, out)
		}
	}
	apiProcess := w.start(t, "api", map[string]string{"HELPDESK_ROLE": "api"})
	a := w.start(t, "worker-a", map[string]string{"HELPDESK_ROLE": "worker"})
	w.start(t, "worker-b", map[string]string{"HELPDESK_ROLE": "worker"})

	open := func(subject string) string {
		status, body, err := w.post(apiProcess.url, "/v1/tickets", map[string]string{"customer_id": "C-0001", "subject": subject, "body": "Help."})
		if err != nil || status != http.StatusAccepted {
			t.Fatalf("open: %d %v %v", status, body, err)
		}
		return body["ticket_id"].(string)
	}
	answered, alone := open("Answered in time"), open("Left alone")
	opened := time.Now()
	// Once triaged (a priority, so a policy), each is alice's, so that the
	// warning and the breach have someone to tell.
	for _, id := range []string{answered, alone} {
		for w.count(t, `SELECT count(*) FROM tickets WHERE id = $1 AND priority IS NOT NULL`, id) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
		patch(t, w, apiProcess.url, "/v1/tickets/"+id, `{"assignee": "alice"}`)
	}
	if status, body, err := w.post(apiProcess.url, "/v1/tickets/"+answered+"/replies", map[string]string{"body": "On it."}); err != nil || status != http.StatusAccepted {
		t.Fatalf("reply: %d %v %v", status, body, err)
	}

	// The warning is due at 48s (a fifth before the minute).
	waitFor(t, 90*time.Second, "the warning", func() bool {
		return w.count(t, `SELECT count(*) FROM ticket_events WHERE ticket_id = $1 AND what = 'sla.warning'`, alone) > 0
	})
	if since := time.Since(opened); since < 40*time.Second {
		t.Errorf("the warning came %s after the ticket opened, want about 48s", since.Round(time.Second))
	}
	a.kill(t)
	waitFor(t, 90*time.Second, "the breach", func() bool {
		return w.count(t, `SELECT count(*) FROM ticket_events WHERE ticket_id = $1 AND what = 'sla.breached'`, alone) > 0
	})
	// Whatever the killed worker held comes back after the rescue (11s);
	// wait for every SLA job to be done, then count.
	waitFor(t, 90*time.Second, "the SLA jobs to settle", func() bool {
		return w.count(t, `SELECT count(*) FROM river_job WHERE kind = 'sla' AND state NOT IN ('completed', 'scheduled')`) == 0
	})

	for _, c := range []struct {
		ticket, what string
		want         int
	}{{alone, "sla.warning", 1}, {alone, "sla.breached", 1}, {answered, "sla.warning", 0}, {answered, "sla.breached", 0}} {
		if n := w.count(t, `SELECT count(*) FROM ticket_events WHERE ticket_id = $1 AND what = $2`, c.ticket, c.what); n != c.want {
			t.Errorf("%s: %d %s events, want %d", c.ticket, n, c.what, c.want)
		}
	}
	mail := map[string]int{}
	for _, d := range w.smtp.Deliveries() {
		for _, line := range strings.Split(string(d.Raw), "\r\n") {
			if subject, ok := strings.CutPrefix(line, "Subject: "); ok && strings.Contains(subject, "SLA") {
				mail[subject]++
			}
		}
	}
	var warnings, breaches int
	for subject, n := range mail {
		switch {
		case strings.HasPrefix(subject, "["+alone+"] SLA warning: first response due"):
			warnings += n
		case strings.HasPrefix(subject, "["+alone+"] SLA breached: first response was due"):
			breaches += n
		default:
			t.Errorf("unexpected SLA mail %q ×%d", subject, n)
		}
	}
	if warnings != 1 || breaches != 1 {
		t.Errorf("SLA mail %v: want one warning and one breach for %s", mail, alone)
	}
}

// patch sends a PATCH of path as the agent and wants 200.
func patch(t *testing.T, w *world, baseURL, path, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPatch, baseURL+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+w.agent)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH %s %s: %d", path, body, resp.StatusCode)
	}
}

// waitFor polls a state the processes write until it holds.
func waitFor(t *testing.T, within time.Duration, what string, holds func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !holds(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come within %s", what, within)
		}
	}
}
