package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/helpdesk-dev/helpdesk/api"
)

// The API client of the demo and of the tests that drive a served API:
// a ticket or a reply posted with an Idempotency-Key.

type replyAnswer struct {
	MessageID      int64  `json:"message_id"`
	EmailMessageID string `json:"email_message_id"`
	JobID          int64  `json:"job_id"`
}

func postReply(ctx context.Context, apiURL, key, ticketID, idemKey, body string) (replyAnswer, error) {
	var a replyAnswer
	status, _, raw, err := post(ctx, apiURL+"/v1/tickets/"+ticketID+"/replies", key, idemKey, body)
	if err != nil {
		return a, err
	}
	if status != http.StatusAccepted {
		return a, fmt.Errorf("POST replies answered %d: %s", status, raw)
	}
	return a, json.Unmarshal(raw, &a)
}

type createAnswer struct {
	Status   int
	Replayed bool
	TicketID string `json:"ticket_id"`
	JobID    int64  `json:"job_id"`
}

func postTicket(ctx context.Context, apiURL, key, idemKey, body string) (createAnswer, error) {
	status, header, raw, err := post(ctx, apiURL+"/v1/tickets", key, idemKey, body)
	a := createAnswer{Status: status, Replayed: header.Get(api.HeaderReplayed) == "true"}
	if err != nil {
		return a, err
	}
	if status != http.StatusAccepted {
		return a, fmt.Errorf("POST /v1/tickets answered %d: %s", status, raw)
	}
	return a, json.Unmarshal(raw, &a)
}

// post sends one authenticated POST with an Idempotency-Key.
func post(ctx context.Context, url, key, idemKey, body string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set(api.HeaderIdempotencyKey, idemKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw, err
}
