package api_test

import (
	"fmt"
	"testing"

	"github.com/helpdesk-dev/helpdesk/desk"
)

// strangerWrites files a stranger's mail that names the ticket by its
// plus address: it is held there.
func (b *teamBundle) strangerWrites(t *testing.T, ticketID, from, id string) int64 {
	t.Helper()
	out, err := b.Desk(b.queue).FileInbound(b.Ctx, []string{"support+" + ticketID + "@helpdesk.example.com"},
		&desk.InboundMail{MessageID: id, HasOwnID: true, From: from, Subject: "About " + ticketID, Text: "Pay at http://evil.example/pay"})
	if err != nil || out.Kind != "held" {
		t.Fatalf("filed %+v (%v), want held", out, err)
	}
	return out.MessageID
}

func TestHeldMail(t *testing.T) {
	t.Parallel()

	t.Run("AgentsSeeItWithItsReasonAndTheCustomerNever", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		ticketID, _ := b.open(t, "Refund", "Please refund.")
		held := b.strangerWrites(t, ticketID, "evil@attacker.example", "<e1@attacker.example>")
		for _, who := range []struct {
			key   string
			agent bool
		}{{b.agent, true}, {b.customer, false}} {
			for _, path := range []string{"/v1/tickets/" + ticketID, "/v1/tickets/" + ticketID + "/messages"} {
				status, _, resp := b.do(t, who.key, "GET", path, nil, "")
				if status != 200 {
					t.Fatalf("GET %s: %d %v", path, status, resp)
				}
				var seen map[string]any
				for _, m := range resp["messages"].([]any) {
					if m := m.(map[string]any); m["id"] == float64(held) {
						seen = m
					}
					if m := m.(map[string]any); !who.agent && (m["sender"] != nil || m["authentication"] != nil) {
						t.Errorf("%s: the customer sees what only agents see: %v", path, m)
					}
				}
				switch {
				case who.agent && (seen == nil || seen["direction"] != "held" || seen["held_reason"] == nil || seen["sender"] != "evil@attacker.example"):
					t.Errorf("%s: agents see %v, want the held mail with its sender and reason", path, seen)
				case !who.agent && seen != nil:
					t.Errorf("%s: the customer sees the held mail %v", path, seen)
				}
			}
		}
	})

	t.Run("AcceptedAsAParticipantItIsTheirsAndTheyMayWriteAgain", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		ticketID, _ := b.open(t, "Refund", "Please refund.")
		held := b.strangerWrites(t, ticketID, "grace@example.com", "<g1@example.com>")
		path := fmt.Sprintf("/v1/tickets/%s/held/%d/accept", ticketID, held)
		status, _, resp := b.do(t, b.customer, "POST", path, mustJSON(map[string]string{"as": "participant"}), "")
		requireError(t, status, resp, 403, "forbidden")
		status, _, resp = b.do(t, b.agent, "POST", path, mustJSON(map[string]string{"as": "somebody"}), "")
		requireError(t, status, resp, 422, "invalid_as")
		status, _, resp = b.do(t, b.agent, "POST", path, mustJSON(map[string]string{"as": "participant"}), "")
		if status != 200 || resp["direction"] != "inbound" || resp["author"] != "email:grace@example.com" {
			t.Fatalf("accept: %d %v", status, resp)
		}
		status, _, resp = b.do(t, b.agent, "POST", path, mustJSON(map[string]string{"as": "customer"}), "")
		requireError(t, status, resp, 404, "not_found")
		out, err := b.Desk(b.queue).FileInbound(b.Ctx, []string{"support+" + ticketID + "@helpdesk.example.com"},
			&desk.InboundMail{MessageID: "<g2@example.com>", HasOwnID: true, From: "grace@example.com", Text: "Another thing."})
		if err != nil || out.Kind != "reply" {
			t.Errorf("the participant's next mail: %+v (%v), want a reply", out, err)
		}
	})

	t.Run("SplitOffItIsANewTicketOfItsSenders", func(t *testing.T) {
		t.Parallel()
		b := setupTeam(t, false)
		ticketID, _ := b.open(t, "Refund", "Please refund.")
		held := b.strangerWrites(t, ticketID, "walter@example.com", "<w1@example.com>")
		status, _, resp := b.do(t, b.agent, "POST", fmt.Sprintf("/v1/tickets/%s/held/%d/split", ticketID, held), nil, "")
		if status != 201 || resp["ticket_id"] == ticketID {
			t.Fatalf("split: %d %v", status, resp)
		}
		split := b.ticket(t, b.agent, resp["ticket_id"].(string))
		msgs := split["messages"].([]any)
		if split["subject"] != "About "+ticketID || len(msgs) != 1 || msgs[0].(map[string]any)["direction"] != "inbound" {
			t.Errorf("the split ticket: %v", split)
		}
		status, _, resp = b.do(t, b.agent, "POST", fmt.Sprintf("/v1/tickets/%s/held/%d/split", ticketID, held), nil, "")
		requireError(t, status, resp, 404, "not_found")
		status, _, resp = b.do(t, b.agent, "POST", "/v1/tickets/"+ticketID+"/held/x/split", nil, "")
		requireError(t, status, resp, 404, "not_found")
	})
}
