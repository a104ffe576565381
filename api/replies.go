package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// maxCc bounds the copies of one reply, maxReplyAttachments its files.
const (
	maxCc               = 20
	maxReplyAttachments = 20
)

type createReplyRequest struct {
	Body string   `json:"body"`
	Cc   []string `json:"cc"`
	// FromDraft sends the ticket's current AI draft; Body, if set, replaces it.
	FromDraft bool `json:"from_draft"`
	// Status is the ticket's status after the reply; default pending.
	Status vocab.Status `json:"status"`
	// Attachments are ids from POST /v1/attachments, sent in this order.
	Attachments []int64 `json:"attachments"`
	// SeenMessage is the newest message the caller saw; a newer customer
	// message or reply answers 409 ticket_changed and sends nothing.
	SeenMessage int64 `json:"seen_message"`
}

type createReplyResponse struct {
	MessageID      int64  `json:"message_id"`
	EmailMessageID string `json:"email_message_id"`
	JobID          int64  `json:"job_id"`
}

// createReply answers POST /v1/tickets/{id}/replies: the outbound message
// with its Message-ID, its recipients and its email job in one transaction,
// once per Idempotency-Key.
func (s *Server) createReply(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "reply to tickets"); err != nil {
		return err
	}
	if err := checkTicketID(r.PathValue("id")); err != nil {
		return err
	}
	var req createReplyRequest
	if err := decodeKeyed(w, r, &req); err != nil {
		return err
	}
	if !req.FromDraft || req.Body != "" {
		if err := validateText("body", req.Body); err != nil {
			return err
		}
	}
	if err := statusOf(req.Status); err != nil {
		return err
	}
	if len(req.Cc) > maxCc {
		return unprocessable("invalid_cc", "at most %d cc addresses, got %d", maxCc, len(req.Cc))
	}
	if len(req.Attachments) > maxReplyAttachments {
		return unprocessable("invalid_attachments", "at most %d attachments, got %d", maxReplyAttachments, len(req.Attachments))
	}
	seen := map[int64]bool{}
	for _, id := range req.Attachments {
		if id <= 0 || seen[id] {
			return unprocessable("invalid_attachments", "attachments must be distinct ids from POST /v1/attachments, got %d twice or out of range", id)
		}
		seen[id] = true
	}
	cc := make([]*mail.Address, 0, len(req.Cc))
	for _, c := range req.Cc {
		a, err := mail.ParseAddress(c)
		if err != nil {
			return unprocessable("invalid_cc", "%v", err)
		}
		cc = append(cc, a)
	}
	ticketID := r.PathValue("id")
	return s.createOnce(w, r, who, struct {
		Ticket string `json:"ticket"`
		createReplyRequest
	}{ticketID, req}, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		msg, jobID, err := s.desk.CreateReplyTx(ctx, tx, &desk.ReplyParams{TicketID: ticketID, Author: who, Body: req.Body, Cc: cc,
			FromDraft: req.FromDraft, Status: req.Status, Attachments: req.Attachments, SeenMessage: req.SeenMessage})
		if errors.Is(err, desk.ErrNoRelay) {
			return 0, nil, &Error{Status: http.StatusServiceUnavailable, Code: "email_not_configured", Message: err.Error()}
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusAccepted, createReplyResponse{MessageID: msg.ID, EmailMessageID: *msg.EmailMessageID, JobID: jobID}, nil
	})
}

type deliveryView struct {
	State            string             `json:"state"`
	InReplyTo        *string            `json:"in_reply_to"`
	References       []string           `json:"references"`
	Recipients       []*store.Recipient `json:"recipients"`
	Attempts         int                `json:"attempts"`
	UncertainResends int                `json:"uncertain_resends"`
	LastError        *string            `json:"last_error"`
	SMTPReply        *string            `json:"smtp_reply"`
	SentAt           *time.Time         `json:"sent_at"`
	JobID            *int64             `json:"job_id"`
}

type messageWithDelivery struct {
	messageView
	Delivery *deliveryView `json:"delivery,omitempty"`
}

// listMessages answers GET /v1/tickets/{id}/messages: the conversation, and
// for each outbound message how its delivery went, recipient by recipient.
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	ctx := r.Context()
	ticket, err := s.visibleTicket(ctx, who, r.PathValue("id"))
	if err != nil {
		return err
	}
	st := store.New(s.pool)
	msgs, err := st.ListMessages(ctx, ticket.ID)
	if err != nil {
		return err
	}
	deliveries, err := st.ListOutboundEmails(ctx, ticket.ID)
	if err != nil {
		return err
	}
	attachments, err := st.AttachmentsOfTicket(ctx, ticket.ID)
	if err != nil {
		return err
	}
	out := make([]messageWithDelivery, 0, len(msgs))
	for _, m := range msgs {
		if !m.Direction.Public() && !who.IsAgent() {
			continue
		}
		v := messageWithDelivery{messageView: viewMessage(m, attachments).agentsOnly(who.IsAgent())}
		// Delivery internals (SMTP replies, job ids, recipients) are for agents.
		if d, ok := deliveries[m.ID]; ok && who.IsAgent() {
			refs := d.References
			if refs == nil {
				refs = []string{}
			}
			v.Delivery = &deliveryView{State: d.State, InReplyTo: d.InReplyTo, References: refs, Recipients: d.Recipients,
				Attempts: d.Attempts, UncertainResends: d.UncertainResends, LastError: d.LastError, SMTPReply: d.SMTPReply,
				SentAt: d.SentAt, JobID: d.JobID}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"ticket_id": ticket.ID, "messages": out})
	return nil
}
