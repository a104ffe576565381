package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"helpdesk/api"
	"helpdesk/jobs"
	"helpdesk/jobs/jobstest"
	"helpdesk/jobs/provider/simulator"
)

type apiBundle struct {
	*jobstest.Bundle
	queue *jobs.Queue
	url   string
}

func setup(t *testing.T) *apiBundle {
	t.Helper()
	b := jobstest.Setup(t)
	b.Config.TriageMaxAttempts = 2
	q := b.StartQueue(t)
	srv := httptest.NewServer(api.New(jobstest.Logger(), q))
	t.Cleanup(srv.Close)
	return &apiBundle{Bundle: b, queue: q, url: srv.URL}
}

// call sends a request and decodes the JSON answer into a map.
func (b *apiBundle) call(t *testing.T, method, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json (body %s)", method, path, ct, raw)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%s %s: answer is not a JSON object: %s", method, path, raw)
	}
	return resp.StatusCode, body
}

func requireError(t *testing.T, status int, body map[string]any, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || body["error"] != wantCode || body["message"] == "" {
		t.Errorf("got %d %v, want %d with error %q and a message", status, body, wantStatus, wantCode)
	}
}

func TestJobsAPI(t *testing.T) {
	t.Parallel()

	t.Run("GetShowsTheJobAsAPersonSeesIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ticketID, jobID := b.OpenTicket(t, b.queue, "Parcel", "Where is my parcel?")
		jobstest.WaitFor(t, b.queue, jobID, jobs.StateSucceeded, 10*time.Second)

		status, body := b.call(t, "GET", fmt.Sprintf("/v1/jobs/%d", jobID))
		want := map[string]any{"job_id": float64(jobID), "kind": "triage", "ticket_id": ticketID,
			"state": "succeeded", "attempt": float64(1), "max_attempts": float64(2), "last_error": nil}
		if status != 200 || fmt.Sprint(body) != fmt.Sprint(want) {
			t.Errorf("got %d %v, want 200 %v", status, body, want)
		}
	})

	t.Run("DeadLettersAreListedAndRetryBringsThemToSuccess", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if err := b.Sim.SetMode(simulator.ModeOutage); err != nil {
			t.Fatal(err)
		}
		_, deadID := b.OpenTicket(t, b.queue, "Down", "The app is down.")
		jobstest.WaitFor(t, b.queue, deadID, jobs.StateDeadLetter, 10*time.Second)

		status, body := b.call(t, "GET", "/v1/jobs?state=dead_letter")
		list, _ := body["jobs"].([]any)
		if status != 200 || len(list) != 1 || list[0].(map[string]any)["job_id"] != float64(deadID) {
			t.Fatalf("dead letters: %d %v, want job %d alone", status, body, deadID)
		}
		if got := list[0].(map[string]any)["last_error"]; got != "ProviderUnavailable: the provider answered 503 on classify" {
			t.Errorf("last_error = %v", got)
		}

		if err := b.Sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		status, body = b.call(t, "POST", fmt.Sprintf("/v1/jobs/%d/retry", deadID))
		if status != 200 || body["attempt"] != float64(0) || body["max_attempts"] != float64(2) {
			t.Errorf("retry: %d %v, want 200 with attempt 0 of 2", status, body)
		}
		jobstest.WaitFor(t, b.queue, deadID, jobs.StateSucceeded, 10*time.Second)

		status, body = b.call(t, "POST", fmt.Sprintf("/v1/jobs/%d/retry", deadID))
		requireError(t, status, body, http.StatusConflict, "not_retryable")
	})

	t.Run("BadRequestsGetJSONErrors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct {
			method, path string
			status       int
			code         string
		}{
			{"GET", "/v1/jobs/999999", 404, "not_found"},
			{"POST", "/v1/jobs/999999/retry", 404, "not_found"},
			{"GET", "/v1/jobs/abc", 400, "invalid_job_id"},
			{"GET", "/v1/jobs/-1", 400, "invalid_job_id"},
			{"GET", "/v1/jobs", 400, "invalid_state"},
			{"GET", "/v1/jobs?state=lost", 400, "invalid_state"},
			{"GET", "/v1/jobs?state=failed&limit=0", 400, "invalid_limit"},
			{"GET", "/v1/jobs?state=failed&after=x", 400, "invalid_after"},
			{"DELETE", "/v1/jobs/1", 405, "method_not_allowed"},
			{"GET", "/v1/jobs/1/retry", 405, "method_not_allowed"},
			{"GET", "/nowhere", 404, "not_found"},
		} {
			t.Run(strings.ReplaceAll(tc.method+tc.path, "/", "_"), func(t *testing.T) {
				status, body := b.call(t, tc.method, tc.path)
				requireError(t, status, body, tc.status, tc.code)
			})
		}
	})
}
