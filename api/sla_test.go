package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
)

// waitFor polls fn, a read of state a job writes, until it holds.
func waitFor(t *testing.T, what string, fn func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !fn(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 30s", what)
		}
	}
}

func TestSLAPoliciesAndClocks(t *testing.T) {
	t.Parallel()
	b := setupTeam(t, true)
	admin := b.agent
	put := func(key, path string, body map[string]any) (int, map[string]any) {
		status, _, resp := b.do(t, key, "PUT", path, mustJSON(body), "")
		return status, resp
	}

	status, resp := put(b.bilal, "/v1/sla/policies", map[string]any{"priority": 2, "first_response": "1h"})
	requireError(t, status, resp, 403, "forbidden")
	status, resp = put(admin, "/v1/sla/policies", map[string]any{"priority": 2, "first_response": "soon"})
	requireError(t, status, resp, 422, "invalid_sla")
	status, resp = put(admin, "/v1/sla/policies", map[string]any{"priority": 2, "first_response": "1h", "calendar": "mars"})
	requireError(t, status, resp, 422, "unknown_calendar")
	status, resp = put(admin, "/v1/sla/policies", map[string]any{"priority": 7, "first_response": "1h"})
	requireError(t, status, resp, 422, "invalid_sla")

	status, policy := put(admin, "/v1/sla/policies", map[string]any{"priority": 2, "first_response": "1h", "resolution": "8h"})
	if status != 200 || policy["first_response"] != "1h0m0s" || policy["resolution"] != "8h0m0s" || policy["warn_before"] != "20%" ||
		policy["calendar"] != "24x7" || policy["team"] != nil {
		t.Fatalf("put policy: %d %v", status, policy)
	}
	_, _, list := b.do(t, b.bilal, "GET", "/v1/sla/policies", nil, "")
	if got, _ := list["policies"].([]any); len(got) != 1 {
		t.Errorf("policies %v", list)
	}

	t.Run("ACalendarAndItsDueTimes", func(t *testing.T) {
		status, resp := put(admin, "/v1/calendars/office", map[string]any{"time_zone": "Europe/Berlin", "hours": "Mon-Fri 09:00-17:00",
			"holidays": []string{"2026-12-25"}})
		if status != 200 || resp["hours"] == nil {
			t.Fatalf("put calendar: %d %v", status, resp)
		}
		status, resp = put(admin, "/v1/calendars/office", map[string]any{"time_zone": "Europe/Berlin", "hours": "Mon-Fri 17:00-09:00"})
		requireError(t, status, resp, 422, "invalid_sla")
		status, _, resp = b.do(t, b.bilal, "GET", "/v1/sla/due?from=2026-01-16T16:30:00%2B01:00&target=1h&calendar=office", nil, "")
		if status != 200 || resp["due"] != "2026-01-19T09:30:00+01:00" {
			t.Errorf("due: %d %v, want Monday 09:30", status, resp)
		}
		status, _, resp = b.do(t, b.bilal, "GET", "/v1/sla/due?from=yesterday&target=1h", nil, "")
		requireError(t, status, resp, 400, "invalid_from")
		_, _, resp = b.do(t, b.bilal, "GET", "/v1/calendars", nil, "")
		if got, _ := resp["calendars"].([]any); len(got) != 1 {
			t.Errorf("calendars %v", resp)
		}
	})

	t.Run("ATicketOfThePriorityShowsItsClocksAndFilters", func(t *testing.T) {
		id, job := b.open(t, "Charged twice", "I was charged twice.")
		// Triage sets a priority of its own: the agent's comes after it.
		jobstest.WaitFor(t, b.queue, job, jobs.StateSucceeded, 30*time.Second)
		if status, resp := b.patch(t, b.bilal, id, map[string]any{"priority": 2}); status != 200 {
			t.Fatalf("patch: %d %v", status, resp)
		}
		var sla map[string]any
		waitFor(t, "the ticket's clocks", func() bool {
			sla, _ = b.ticket(t, b.bilal, id)["sla"].(map[string]any)
			return sla != nil && sla["first_response_due"] != nil
		})
		if sla["paused"] != false || sla["resolution_due"] == nil || len(sla["breaches"].([]any)) != 0 {
			t.Errorf("sla %v", sla)
		}
		if _, ok := b.ticket(t, b.customer, id)["sla"]; ok {
			t.Error("a customer sees the SLA")
		}
		_, _, due := b.do(t, b.bilal, "GET", "/v1/tickets?sla=due_within:2h", nil, "")
		if got, _ := due["tickets"].([]any); len(got) != 1 || got[0].(map[string]any)["ticket_id"] != id {
			t.Errorf("due within 2h: %v", due)
		}
		_, _, breached := b.do(t, b.bilal, "GET", "/v1/tickets?sla=breached", nil, "")
		if got, _ := breached["tickets"].([]any); len(got) != 0 {
			t.Errorf("breached: %v", breached)
		}
		status, _, resp := b.do(t, b.bilal, "GET", "/v1/tickets?sla=late", nil, "")
		requireError(t, status, resp, 400, "invalid_sla")
		status, _, resp = b.do(t, b.customer, "GET", "/v1/tickets?sla=breached", nil, "")
		requireError(t, status, resp, 403, "forbidden")
	})

	t.Run("APolicyIsDeleted", func(t *testing.T) {
		status, _, resp := b.do(t, admin, "DELETE", "/v1/sla/policies/9", nil, "")
		requireError(t, status, resp, 400, "invalid_priority")
		status, _, resp = b.do(t, admin, "DELETE", "/v1/sla/policies/3", nil, "")
		requireError(t, status, resp, 404, "not_found")
		req, _ := http.NewRequest("DELETE", b.url+"/v1/sla/policies/2", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 204 {
			t.Fatalf("DELETE: %v %v", res, err)
		}
		res.Body.Close()
		_, _, list := b.do(t, admin, "GET", "/v1/sla/policies", nil, "")
		if got, _ := list["policies"].([]any); len(got) != 0 {
			t.Errorf("after the delete: %v", list)
		}
	})
}
