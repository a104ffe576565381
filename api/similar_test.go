package api_test

import (
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
)

func TestSimilarTickets(t *testing.T) {
	t.Parallel()
	b := setupTeam(t, true)
	refund, refundJob := b.open(t, "Refund for my kettle", "I was charged for a kettle I returned. Please refund the charge.")
	parcel, parcelJob := b.open(t, "Where is my parcel", "My parcel has not arrived and tracking shows nothing.")
	jobstest.WaitFor(t, b.queue, refundJob, jobs.StateSucceeded, 30*time.Second)
	jobstest.WaitFor(t, b.queue, parcelJob, jobs.StateSucceeded, 30*time.Second)
	for _, id := range []string{refund, parcel} {
		if status, resp := b.patch(t, b.bilal, id, map[string]any{"status": "solved"}); status != 200 {
			t.Fatalf("solve %s: %d %v", id, status, resp)
		}
	}
	asked, job := b.open(t, "Refund please", "I returned my kettle but I was charged for it. Can I get a refund?")
	jobstest.WaitFor(t, b.queue, job, jobs.StateSucceeded, 30*time.Second)

	t.Run("AgentsGetTheSolvedTicketsBestFirst", func(t *testing.T) {
		status, _, resp := b.do(t, b.bilal, "GET", "/v1/tickets/"+asked+"/similar", nil, "")
		if status != 200 {
			t.Fatalf("%d %v", status, resp)
		}
		list, _ := resp["similar"].([]any)
		if len(list) != 2 {
			t.Fatalf("similar %v, want both solved tickets", list)
		}
		first, second := list[0].(map[string]any), list[1].(map[string]any)
		if first["ticket_id"] != refund || second["ticket_id"] != parcel || first["score"].(float64) <= second["score"].(float64) {
			t.Errorf("similar %v: want %s above %s", list, refund, parcel)
		}
		if first["status"] != "solved" || first["subject"] != "Refund for my kettle" || first["solved_at"] == nil {
			t.Errorf("first %v", first)
		}
	})

	t.Run("TheLimitAndTheStatusNarrowIt", func(t *testing.T) {
		_, _, resp := b.do(t, b.bilal, "GET", "/v1/tickets/"+asked+"/similar?limit=1", nil, "")
		if list, _ := resp["similar"].([]any); len(list) != 1 {
			t.Errorf("limit=1: %v", resp)
		}
		_, _, resp = b.do(t, b.bilal, "GET", "/v1/tickets/"+asked+"/similar?status=closed", nil, "")
		if list, ok := resp["similar"].([]any); !ok || len(list) != 0 {
			t.Errorf("status=closed: %v, want an empty list", resp)
		}
		_, _, resp = b.do(t, b.bilal, "GET", "/v1/tickets/"+refund+"/similar?status=any", nil, "")
		for _, s := range resp["similar"].([]any) {
			if s.(map[string]any)["ticket_id"] == refund {
				t.Errorf("status=any lists the ticket itself: %v", resp)
			}
		}
	})

	t.Run("MistakesAndCustomersAreRefused", func(t *testing.T) {
		status, _, resp := b.do(t, b.customer, "GET", "/v1/tickets/"+asked+"/similar", nil, "")
		requireError(t, status, resp, 403, "forbidden")
		status, _, resp = b.do(t, b.bilal, "GET", "/v1/tickets/"+asked+"/similar?status=open", nil, "")
		requireError(t, status, resp, 400, "invalid_status")
		status, _, resp = b.do(t, b.bilal, "GET", "/v1/tickets/"+asked+"/similar?limit=0", nil, "")
		requireError(t, status, resp, 400, "invalid_limit")
		status, _, resp = b.do(t, b.bilal, "GET", "/v1/tickets/"+asked+"/similar?team=billing", nil, "")
		requireError(t, status, resp, 400, "unknown_filter")
		status, _, resp = b.do(t, b.bilal, "GET", "/v1/tickets/T-999999/similar", nil, "")
		requireError(t, status, resp, 404, "not_found")
	})
}

func TestMergeTickets(t *testing.T) {
	t.Parallel()
	b := setupTeam(t, false)
	into, _ := b.open(t, "Order 4711 has not arrived", "Where is my kettle?")
	dup, _ := b.open(t, "Still no kettle", "Order 4711, still nothing.")
	merge := func(key, id string, body map[string]any, idem string) (int, map[string]any) {
		status, _, resp := b.do(t, key, "POST", "/v1/tickets/"+id+"/merge", mustJSON(body), idem)
		return status, resp
	}

	status, resp := merge(b.customer, dup, map[string]any{"into": into}, "")
	requireError(t, status, resp, 403, "forbidden")
	status, resp = merge(b.bilal, dup, map[string]any{"into": dup}, "")
	requireError(t, status, resp, 409, "merge_into_itself")
	status, resp = merge(b.bilal, dup, map[string]any{}, "")
	requireError(t, status, resp, 422, "missing_into")

	status, first := merge(b.bilal, dup, map[string]any{"into": into}, "merge-1")
	if status != 200 || first["ticket_id"] != into || first["merged_ticket_id"] != dup || first["notice_message_id"] == nil {
		t.Fatalf("merge: %d %v", status, first)
	}
	status, again := merge(b.bilal, dup, map[string]any{"into": into}, "merge-1")
	if status != 200 || again["notice_message_id"] != first["notice_message_id"] || again["triage_job_id"] != first["triage_job_id"] {
		t.Errorf("the repeated merge answered %d %v, want the first answer %v", status, again, first)
	}
	status, resp = merge(b.bilal, dup, map[string]any{"into": into}, "merge-2")
	requireError(t, status, resp, 409, "already_merged")

	if got := b.ticket(t, b.bilal, dup); got["status"] != "closed" || got["merged_into"] != into {
		t.Errorf("the duplicate %v", got)
	}
	if got := b.ticket(t, b.customer, dup); got["merged_into"] != into {
		t.Errorf("the customer's view of the duplicate %v: want merged_into", got)
	}
	_, _, msgs := b.do(t, b.customer, "GET", "/v1/tickets/"+into+"/messages", nil, "")
	if list, _ := msgs["messages"].([]any); len(list) != 3 {
		t.Errorf("the target's messages %v, want both questions and the notice", msgs)
	}
	var notices int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM messages WHERE ticket_id = $1 AND direction = 'outbound'`, into).Scan(&notices); err != nil {
		t.Fatal(err)
	}
	if notices != 1 {
		t.Errorf("%d outbound messages, want one notice for the repeated request", notices)
	}
}
