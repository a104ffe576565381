package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// maxSubjectChars bounds a new ticket's subject.
const maxSubjectChars = 200

type createTicketRequest struct {
	CustomerID string `json:"customer_id"`
	Subject    string `json:"subject"`
	Body       string `json:"body"`
}

type createTicketResponse struct {
	TicketID string `json:"ticket_id"`
	JobID    int64  `json:"job_id"`
	State    string `json:"state"`
}

// validate checks what would otherwise reach the database or, later, a
// mail header: a subject with CR or LF could forge headers.
func (req *createTicketRequest) validate() error {
	if !vocab.CustomerIDPattern.MatchString(req.CustomerID) {
		return unprocessable("invalid_customer_id", "customer_id must look like C-0022, got %q", req.CustomerID)
	}
	n := utf8.RuneCountInString(req.Subject)
	switch {
	case !utf8.ValidString(req.Subject):
		return unprocessable("invalid_subject", "subject must be UTF-8")
	case strings.TrimSpace(req.Subject) == "":
		return unprocessable("invalid_subject", "subject must not be empty")
	case n > maxSubjectChars:
		return unprocessable("invalid_subject", "subject has %d characters; at most %d", n, maxSubjectChars)
	case strings.IndexFunc(req.Subject, unicode.IsControl) >= 0:
		return unprocessable("invalid_subject", "subject must not contain control characters such as CR, LF or tab")
	}
	return validateText("body", req.Body)
}

// createTicket answers POST /v1/tickets: the ticket, its first message and
// its triage job in one transaction, once per Idempotency-Key.
func (s *Server) createTicket(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	var req createTicketRequest
	if err := decodeKeyed(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	if !who.IsAgent() && req.CustomerID != who.ID() {
		return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "a customer may only open tickets for itself"}
	}
	// The ticket's rows wait for the transaction's commit, with the saved
	// answer: an unknown customer is the ticket's foreign key, refused then.
	err := s.createOnce(w, r, who, req, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		ticket, jobID, err := s.desk.OpenTicketTx(ctx, tx, &desk.OpenTicketParams{
			CustomerID: req.CustomerID, Subject: req.Subject, Body: req.Body, Author: who})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusAccepted, createTicketResponse{TicketID: ticket.ID, JobID: jobID, State: jobs.StateQueued}, nil
	})
	if errors.Is(err, store.ErrUnknownCustomer) {
		return unprocessable("unknown_customer", "there is no customer %s", req.CustomerID)
	}
	return err
}

type ticketSummary struct {
	TicketID              string        `json:"ticket_id"`
	CustomerID            string        `json:"customer_id"`
	Customer              *customerView `json:"customer"`
	Subject               string        `json:"subject"`
	Status                vocab.Status  `json:"status"`
	Team                  *string       `json:"team"`
	Priority              *int16        `json:"priority"`
	Assignee              *string       `json:"assignee"`
	FollowUpOf            *string       `json:"follow_up_of"`
	CreatedAt             time.Time     `json:"created_at"`
	UpdatedAt             time.Time     `json:"updated_at"`
	FirstResponseAt       *time.Time    `json:"first_response_at"`
	LastCustomerMessageAt *time.Time    `json:"last_customer_message_at"`
}

type customerView struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

func viewCustomer(c *store.Customer) *customerView {
	if c == nil {
		return nil
	}
	return &customerView{ID: c.ID, Name: c.Name, Email: c.Email}
}

type triageView struct {
	JobID       int64   `json:"job_id"`
	State       string  `json:"state"`
	Attempt     int     `json:"attempt"`
	MaxAttempts int     `json:"max_attempts"`
	LastError   *string `json:"last_error"`
}

type messageView struct {
	ID             int64               `json:"id"`
	Direction      vocab.Direction     `json:"direction"`
	Author         vocab.Actor         `json:"author"`
	Body           string              `json:"body"`
	EmailMessageID *string             `json:"email_message_id"`
	CreatedAt      time.Time           `json:"created_at"`
	Attachments    []*store.Attachment `json:"attachments"`
	// Of inbound and held mail, for agents: the From it came with, what
	// its sender authentication said, and why it is held.
	Sender         *string             `json:"sender,omitempty"`
	Authentication *authenticationView `json:"authentication,omitempty"`
	HeldReason     *string             `json:"held_reason,omitempty"`
	// Of mail fetched from a mailbox: when it reached the mailbox, where
	// that was before it was filed.
	ArrivedAt *time.Time `json:"arrived_at,omitempty"`
}

type authenticationView struct {
	Verdict vocab.Verdict `json:"verdict"` // pass, fail or none
	Detail  string        `json:"detail"`  // which checks said so, e.g. "dmarc=fail (p=reject) header.from=example.com"
}

type ticketView struct {
	ticketSummary
	DraftReply *string `json:"draft_reply,omitempty"`
	// DraftCurrent says whether the draft answers the customer's newest
	// message; false while triage writes a new one.
	DraftCurrent *bool `json:"draft_current,omitempty"`
	// DraftSources are the solved tickets the draft drew on (agents).
	DraftSources []string `json:"draft_sources,omitempty"`
	// PossibleDuplicateOf is an open ticket of the same customer about
	// the same thing, found by triage (agents); nothing is merged by itself.
	PossibleDuplicateOf *string `json:"possible_duplicate_of,omitempty"`
	// MergedInto is the ticket this one was merged into, which holds its
	// messages now (for a customer, only when it is theirs too).
	MergedInto *string `json:"merged_into,omitempty"`
	// SLA is the ticket's clocks, when a policy times it (agents).
	SLA      *store.TicketSLA     `json:"sla,omitempty"`
	Triage   *triageView          `json:"triage"`
	Messages []messageView        `json:"messages"`
	Events   []*store.TicketEvent `json:"events,omitempty"`
}

func viewMessage(m *store.Message, attachments map[int64][]*store.Attachment) messageView {
	list := attachments[m.ID]
	if list == nil {
		list = []*store.Attachment{}
	}
	v := messageView{ID: m.ID, Direction: m.Direction, Author: m.Author, Body: m.Body,
		EmailMessageID: m.EmailMessageID, CreatedAt: m.CreatedAt, Attachments: list, Sender: m.Sender, HeldReason: m.HeldReason,
		ArrivedAt: m.ArrivedAt}
	if m.AuthVerdict != nil {
		v.Authentication = &authenticationView{Verdict: *m.AuthVerdict, Detail: deref(m.AuthDetail)}
	}
	return v
}

// agentsOnly leaves out of a message what only agents see.
func (v messageView) agentsOnly(agent bool) messageView {
	if !agent {
		v.Sender, v.Authentication, v.HeldReason = nil, nil, nil
	}
	return v
}

func summarize(t *store.Ticket, c *store.Customer) ticketSummary {
	return ticketSummary{TicketID: t.ID, CustomerID: t.CustomerID, Customer: viewCustomer(c), Subject: t.Subject, Status: t.Status,
		Team: t.Team, Priority: t.Priority, Assignee: t.Assignee, FollowUpOf: t.FollowUpOf, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		FirstResponseAt: t.FirstResponseAt, LastCustomerMessageAt: t.LastCustomerMessageAt}
}

// visibleTicket returns the ticket if the actor may see it. Another
// customer's ticket is not found, never forbidden, so that ticket numbers
// do not tell a stranger which tickets exist.
func (s *Server) visibleTicket(ctx context.Context, who vocab.Actor, id string) (*store.Ticket, error) {
	if err := checkTicketID(id); err != nil {
		return nil, err
	}
	ticket, err := store.New(s.pool).GetTicket(ctx, id)
	if err != nil {
		return nil, err
	}
	if !who.IsAgent() && ticket.CustomerID != who.ID() {
		return nil, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "ticket " + id + " not found"}
	}
	return ticket, nil
}

// getTicket answers GET /v1/tickets/{id}. Customers do not see the drafted
// reply or internal notes.
func (s *Server) getTicket(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
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
	customer, err := st.GetCustomer(ctx, ticket.CustomerID)
	if err != nil {
		return err
	}
	attachments, err := st.AttachmentsOfTicket(ctx, ticket.ID)
	if err != nil {
		return err
	}
	view := ticketView{ticketSummary: summarize(ticket, customer), Messages: []messageView{}}
	if who.IsAgent() {
		view.DraftReply = ticket.DraftReply
		if ticket.DraftReply != nil {
			current := ticket.DraftIsCurrent()
			view.DraftCurrent = &current
		}
		if view.Events, err = st.ListTicketEvents(ctx, ticket.ID); err != nil {
			return err
		}
		view.DraftSources, view.PossibleDuplicateOf, view.MergedInto = ticket.DraftSources, ticket.PossibleDuplicateOf, ticket.MergedInto
		if view.SLA, err = s.desk.TicketSLA(ctx, ticket.ID); err != nil {
			return err
		}
	} else if ticket.MergedInto != nil {
		into, err := st.GetTicket(ctx, *ticket.MergedInto)
		if err != nil {
			return err
		}
		if into.CustomerID == ticket.CustomerID {
			view.MergedInto = ticket.MergedInto
		}
	}
	for _, m := range msgs {
		if !m.Direction.Public() && !who.IsAgent() {
			continue
		}
		view.Messages = append(view.Messages, viewMessage(m, attachments).agentsOnly(who.IsAgent()))
	}
	if ticket.TriageJobID != nil {
		view.Triage = &triageView{JobID: *ticket.TriageJobID}
		status, err := s.queue.Get(ctx, *ticket.TriageJobID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// River's cleaner deletes finished jobs after a retention period.
			view.Triage.State = "expired"
		case err != nil:
			return err
		default:
			view.Triage.State, view.Triage.Attempt, view.Triage.MaxAttempts, view.Triage.LastError =
				status.State, status.Attempt, status.MaxAttempts, status.LastError
		}
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// ticketFilters are the query parameters of GET /v1/tickets; any other is
// refused rather than ignored.
var ticketFilters = []string{"status", "team", "assignee", "customer", "sla", "limit", "cursor"}

// listTickets answers GET /v1/tickets[?status=][&team=][&assignee=NAME|me]
// [&customer=C-…][&limit=N][&cursor=C], newest first. Agents see every
// ticket, customers their own.
func (s *Server) listTickets(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	q := r.URL.Query()
	if err := onlyParams(q, ticketFilters); err != nil {
		return err
	}
	params := store.ListTicketsParams{Status: vocab.Status(q.Get("status")), Team: q.Get("team"), Assignee: q.Get("assignee"),
		CustomerID: q.Get("customer"), Limit: 50}
	if q.Has("status") && !params.Status.Valid() {
		return badRequest("invalid_status", "status must be one of "+vocab.StatusNames())
	}
	if q.Has("team") && !desk.TeamName.MatchString(params.Team) {
		return badRequest("invalid_team", "team must be a team name such as billing")
	}
	if params.Assignee == "me" {
		if !who.IsAgent() {
			return badRequest("invalid_assignee", "assignee=me is for agents")
		}
		params.Assignee = who.ID()
	}
	if q.Has("assignee") && !vocab.AgentNamePattern.MatchString(params.Assignee) {
		return badRequest("invalid_assignee", "assignee must be an agent's name or me")
	}
	if q.Has("customer") && !vocab.CustomerIDPattern.MatchString(params.CustomerID) {
		return badRequest("invalid_customer", "customer must be a customer id such as C-0022")
	}
	if v := q.Get("sla"); q.Has("sla") {
		within, isWithin := strings.CutPrefix(v, "due_within:")
		d, err := time.ParseDuration(within)
		switch {
		case !who.IsAgent():
			return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "SLA filters are for agents"}
		case v == "breached":
			params.SLABreached = true
		case isWithin && err == nil && d > 0 && d <= 366*24*time.Hour:
			params.SLADueWithin = d
		default:
			return badRequest("invalid_sla", "sla must be breached or due_within:DURATION, such as due_within:1h")
		}
	}
	if !who.IsAgent() {
		if q.Has("customer") && params.CustomerID != who.ID() {
			return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "a customer sees only its own tickets"}
		}
		params.CustomerID = who.ID()
	}
	if v := q.Get("limit"); v != "" {
		limit, err := strconv.Atoi(v)
		if err != nil || limit < 1 || limit > maxListLimit {
			return badRequest("invalid_limit", "limit must be 1 to "+strconv.Itoa(maxListLimit)+", got "+strconv.Quote(v))
		}
		params.Limit = limit
	}
	if v := q.Get("cursor"); v != "" {
		key, err := decodeCursor(v)
		if err != nil {
			return badRequest("invalid_cursor", "cursor must be a next_cursor value from an earlier page")
		}
		params.Before = key
	}
	st := store.New(s.pool)
	// A name that is no agent's, or a team nobody is in, is a mistake to
	// say, not a filter that matches nothing.
	if q.Has("assignee") {
		if _, err := st.GetAgent(r.Context(), params.Assignee); errors.Is(err, store.ErrNotFound) {
			return badRequest("unknown_agent", fmt.Sprintf("no agent is called %q; GET /v1/agents lists them", params.Assignee))
		} else if err != nil {
			return err
		}
	}
	if q.Has("team") {
		teams, err := st.Teams(r.Context())
		if err != nil {
			return err
		}
		if !slices.Contains(teams, params.Team) {
			return badRequest("unknown_team", fmt.Sprintf("no agent is in team %q; the teams are %s", params.Team, strings.Join(teams, ", ")))
		}
	}
	tickets, err := st.ListTickets(r.Context(), &params)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(tickets))
	for _, t := range tickets {
		ids = append(ids, t.CustomerID)
	}
	customers, err := st.GetCustomers(r.Context(), ids)
	if err != nil {
		return err
	}
	out := make([]ticketSummary, 0, len(tickets))
	for _, t := range tickets {
		out = append(out, summarize(t, customers[t.CustomerID]))
	}
	body := map[string]any{"tickets": out}
	if len(tickets) == params.Limit {
		last := tickets[len(tickets)-1]
		body["next_cursor"] = encodeCursor(store.TicketKey{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// onlyParams refuses a query parameter not in known, or one given twice,
// rather than ignoring it.
func onlyParams(q url.Values, known []string) error {
	for name, values := range q {
		if !slices.Contains(known, name) {
			return badRequest("unknown_filter", fmt.Sprintf("unknown query parameter %q; filters are %s", name, strings.Join(known, ", ")))
		}
		if len(values) > 1 {
			return badRequest("invalid_filter", fmt.Sprintf("query parameter %q is given %d times", name, len(values)))
		}
	}
	return nil
}

// checkTicketID answers 404 for an id that cannot name a ticket, before
// any query: such text (a NUL, invalid UTF-8) would otherwise reach
// PostgreSQL, which refuses it as an error of ours.
func checkTicketID(id string) error {
	if !vocab.TicketIDPattern.MatchString(id) {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "ticket " + strconv.QuoteToASCII(id) + " not found"}
	}
	return nil
}

// A cursor is the last ticket's place in the order, opaque to clients.
func encodeCursor(k store.TicketKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.CreatedAt.UnixMicro(), 10) + "|" + k.ID))
}

func decodeCursor(s string) (*store.TicketKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	micros, id, ok := strings.Cut(string(raw), "|")
	n, err := strconv.ParseInt(micros, 10, 64)
	if !ok || err != nil || !vocab.TicketIDPattern.MatchString(id) {
		return nil, errors.New("malformed cursor")
	}
	return &store.TicketKey{CreatedAt: time.UnixMicro(n), ID: id}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
