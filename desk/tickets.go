package desk

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/mail"
	"helpdesk/store"
)

// transitions are the status changes a person may make. A customer's
// message reopens a pending or solved ticket; one on a closed ticket opens
// a follow-up instead, so closed is final.
var transitions = map[string][]string{
	store.StatusOpen:    {store.StatusPending, store.StatusSolved, store.StatusClosed},
	store.StatusPending: {store.StatusOpen, store.StatusSolved, store.StatusClosed},
	store.StatusSolved:  {store.StatusOpen, store.StatusPending, store.StatusClosed},
	store.StatusClosed:  nil,
}

// CanChangeStatus reports whether a ticket may go from one status to another.
func CanChangeStatus(from, to string) bool {
	return from == to || slices.Contains(transitions[from], to)
}

// OpenTicketParams are a new ticket and its first message.
type OpenTicketParams struct {
	CustomerID string
	Subject    string
	Body       string
	Author     string // who wrote the first message; default the customer
	FollowUpOf string // the closed ticket this one follows, if any

	// EmailMessageID is the first message's Message-ID when the ticket came
	// by email; empty mints a synthetic thread root.
	EmailMessageID string
	Attachments    []*store.NewAttachment // the email's files; past the size limit only their names are kept
	Automatic      bool                   // an auto-reply or bulk mail: stored, not triaged
	RawEmail       []byte                 // the email as it arrived
	// NoAutoReply: the mail came from a machine, a list or a report, so
	// no acknowledgement answers it (RFC 3834 §2).
	NoAutoReply bool

	// Numbers, when the caller took them with its transaction's first
	// statements (TicketNumbers.Take); nil takes them here.
	Numbers *TicketNumbers
	// With, when set, is told the ticket and its triage job before the
	// ticket's rows are sent, and may queue statements to send with them:
	// the API saves its answer so.
	With func(ticketID string, jobID int64, b *store.Batch)
}

// TicketNumbers are a new ticket's id and its first message's, taken
// before they are written so that the ticket's rows go to the database in
// one round trip.
type TicketNumbers struct {
	TicketID  string
	MessageID int64
	Now       time.Time // the transaction's time: the ticket's created_at
}

// Take queues the taking of the numbers; they are set once b is sent.
func (n *TicketNumbers) Take(b *store.Batch) {
	b.NextTicketID(&n.TicketID, &n.Now)
	b.NextMessageID(&n.MessageID)
}

// OpenTicket writes a ticket, its first message and its triage job in one
// transaction: all of them exist afterwards, or none.
func (d *Desk) OpenTicket(ctx context.Context, p *OpenTicketParams) (ticket *store.Ticket, jobID int64, err error) {
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		ticket, jobID, err = d.OpenTicketTx(ctx, tx, p)
		return err
	})
	return ticket, jobID, err
}

// OpenTicketTx is OpenTicket in the caller's transaction. Its numbers,
// the triage job, then the ticket, its message and its events are three
// round trips (two with Numbers): the job is queued first, so the ticket
// is written with it.
func (d *Desk) OpenTicketTx(ctx context.Context, tx pgx.Tx, p *OpenTicketParams) (*store.Ticket, int64, error) {
	st := store.New(tx)
	n := p.Numbers
	if n == nil {
		n = &TicketNumbers{}
		var b store.Batch
		n.Take(&b)
		if err := st.Send(ctx, &b); err != nil {
			return nil, 0, fmt.Errorf("open ticket: %w", err)
		}
	}
	var jobID int64
	if !p.Automatic {
		var err error
		if jobID, err = d.jobs.EnqueueTriageTx(ctx, tx, n.TicketID); err != nil {
			return nil, 0, fmt.Errorf("open ticket: %w", err)
		}
	}
	author := p.Author
	if author == "" {
		author = "customer:" + p.CustomerID
	}
	// The first message stands for the thread's root: a ticket that did not
	// come by email gets a synthetic Message-ID that every reply references.
	root := p.EmailMessageID
	if root == "" {
		root = mail.NewRootMessageID(d.config.MailDomain, n.TicketID)
	}
	var (
		b      store.Batch
		ticket store.Ticket
		first  store.Message
	)
	newTicket := &store.InsertTicketParams{ID: n.TicketID, CustomerID: p.CustomerID, Subject: p.Subject, FollowUpOf: p.FollowUpOf}
	if jobID != 0 {
		newTicket.TriageJobID = &jobID
	}
	b.InsertTicket(newTicket, &ticket)
	b.InsertMessage(&store.InsertMessageParams{
		ID: n.MessageID, TicketID: n.TicketID, Direction: store.DirectionInbound, Author: author, Body: p.Body, EmailMessageID: &root,
		Attachments: d.keepable(p.Attachments), AutoSubmitted: p.Automatic, RawEmail: p.RawEmail,
	}, &first)
	// The events are made of what the rows will hold: the numbers taken,
	// the transaction's time, the fields given.
	var followUpOf *string
	if p.FollowUpOf != "" {
		followUpOf = &p.FollowUpOf
	}
	received := MessageEvent{TicketID: n.TicketID, MessageID: n.MessageID, Direction: store.DirectionInbound, Author: author,
		EmailMessageID: &root, Automatic: p.Automatic}
	b.InsertWebhookEvents([]store.NewWebhookEvent{
		{Type: EventTicketCreated, Data: TicketCreated{TicketID: n.TicketID, CustomerID: p.CustomerID, Subject: p.Subject,
			Status: store.StatusOpen, FollowUpOf: followUpOf, CreatedAt: n.Now}},
		{Type: EventMessageReceived, Data: received},
	})
	// Only a customer's own new ticket is acknowledged, not one an agent
	// opens for them; the acknowledgement's customer comes with the rows.
	var customer *store.Customer
	if d.config.Ack != nil && !p.Automatic && !p.NoAutoReply && !strings.HasPrefix(author, "agent:") {
		customer = &store.Customer{}
		b.CustomerOfTicket(n.TicketID, customer)
	}
	if p.With != nil {
		p.With(n.TicketID, jobID, &b)
	}
	if err := st.Send(ctx, &b); err != nil {
		return nil, 0, fmt.Errorf("open ticket: %w", err)
	}
	// InsertTicket wrote last_customer_message_at: no CustomerWrote here.
	if p.FollowUpOf != "" {
		if err := st.InsertTicketEvent(ctx, ticket.ID, &store.TicketEvent{Actor: author, What: "follow_up", From: &p.FollowUpOf}); err != nil {
			return nil, 0, err
		}
	}
	if p.Automatic {
		return &ticket, 0, nil
	}
	if customer != nil {
		if err := d.acknowledgeTx(ctx, tx, &ticket, customer, root); err != nil {
			return nil, 0, fmt.Errorf("open ticket: %w", err)
		}
	}
	return &ticket, jobID, nil
}

// CustomerMessageParams are a customer's new message on a ticket.
type CustomerMessageParams struct {
	TicketID       string
	Author         string // customer:C-… or email:ADDRESS
	Body           string
	EmailMessageID string // empty mints one, for a message that did not come by email
	Attachments    []*store.NewAttachment
	Automatic      bool   // an auto-reply or bulk mail: stored, not triaged, reopens nothing
	RawEmail       []byte // the email as it arrived
	NoAutoReply    bool   // no acknowledgement, should it open a follow-up
}

// CustomerMessage is where a customer's message went.
type CustomerMessage struct {
	Message  *store.Message
	TicketID string // the ticket it was filed under: a follow-up of a closed one, or the one named
	FollowUp bool   // the named ticket was closed, so this opened TicketID
	JobID    int64  // the triage job it queued, 0 for none
}

// AddCustomerMessageTx files a customer's message, in the caller's
// transaction. On a pending or solved ticket it reopens it; on a closed one
// it opens a follow-up ticket that links to it, as Zammad and FreeScout
// do. Unless a machine sent it, the ticket is triaged again.
func (d *Desk) AddCustomerMessageTx(ctx context.Context, tx pgx.Tx, p *CustomerMessageParams) (*CustomerMessage, error) {
	st := store.New(tx)
	ticket, err := st.LockTicket(ctx, p.TicketID)
	if err != nil {
		return nil, err
	}
	if ticket.Status == store.StatusClosed && !p.Automatic {
		followUp, jobID, err := d.OpenTicketTx(ctx, tx, &OpenTicketParams{CustomerID: ticket.CustomerID, Subject: ticket.Subject,
			Body: p.Body, Author: p.Author, FollowUpOf: ticket.ID, EmailMessageID: p.EmailMessageID, Attachments: p.Attachments,
			RawEmail: p.RawEmail, NoAutoReply: p.NoAutoReply})
		if err != nil {
			return nil, err
		}
		msgs, err := st.ListMessages(ctx, followUp.ID)
		if err != nil {
			return nil, err
		}
		return &CustomerMessage{Message: msgs[0], TicketID: followUp.ID, FollowUp: true, JobID: jobID}, nil
	}
	id := p.EmailMessageID
	if id == "" {
		id = mail.NewMessageID(d.config.MailDomain)
	}
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{
		TicketID: p.TicketID, Direction: store.DirectionInbound, Author: p.Author, Body: p.Body,
		EmailMessageID: &id, Attachments: d.keepable(p.Attachments), AutoSubmitted: p.Automatic, RawEmail: p.RawEmail,
	})
	if err != nil {
		return nil, err
	}
	out := &CustomerMessage{Message: msg, TicketID: p.TicketID}
	received := messageEvent(msg)
	received.Automatic = p.Automatic
	if err := emit(ctx, st, EventMessageReceived, received); err != nil {
		return nil, err
	}
	if p.Automatic {
		return out, nil
	}
	if err := st.CustomerWrote(ctx, p.TicketID); err != nil {
		return nil, err
	}
	if ticket.Status == store.StatusPending || ticket.Status == store.StatusSolved {
		if err := setStatus(ctx, st, ticket, p.Author, store.StatusOpen); err != nil {
			return nil, err
		}
	}
	if out.JobID, err = d.retriageTx(ctx, tx, p.TicketID); err != nil {
		return nil, err
	}
	return out, nil
}

// AddCustomerMessage is AddCustomerMessageTx in a transaction of its own.
func (d *Desk) AddCustomerMessage(ctx context.Context, p *CustomerMessageParams) (out *CustomerMessage, err error) {
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		out, err = d.AddCustomerMessageTx(ctx, tx, p)
		return err
	})
	return out, err
}

// retriageTx enqueues a triage job for the ticket and records it as the ticket's.
func (d *Desk) retriageTx(ctx context.Context, tx pgx.Tx, ticketID string) (int64, error) {
	jobID, err := d.jobs.EnqueueTriageTx(ctx, tx, ticketID)
	if err != nil {
		return 0, err
	}
	if err := store.New(tx).SetTicketTriageJob(ctx, ticketID, jobID); err != nil {
		return 0, err
	}
	return jobID, nil
}

// Change is what a person changes of a ticket; nil fields stay as they are.
type Change struct {
	Status   *string
	Assignee *string // an active agent's name, or "" for nobody
	Team     *string
	Priority *int
}

// ChangeTicket applies a change in one transaction, with an event for each
// field that changed, or nothing at all: a status change that is not
// allowed is ErrInvalidTransition, an unknown or disabled agent
// ErrUnknownAgent, a team nobody belongs to ErrUnknownTeam.
func (d *Desk) ChangeTicket(ctx context.Context, actor, ticketID string, c *Change) (ticket *store.Ticket, err error) {
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		st := store.New(tx)
		t, err := st.LockTicket(ctx, ticketID)
		if err != nil {
			return err
		}
		if err := d.changeTx(ctx, st, t, actor, c); err != nil {
			return err
		}
		ticket, err = st.GetTicket(ctx, t.ID)
		return err
	})
	return ticket, err
}

// changeTx applies a change to a ticket locked by the caller's transaction.
func (d *Desk) changeTx(ctx context.Context, st *store.Store, t *store.Ticket, actor string, c *Change) error {
	if c.Status != nil && !CanChangeStatus(t.Status, *c.Status) {
		return fmt.Errorf("%w: %s → %s", ErrInvalidTransition, t.Status, *c.Status)
	}
	if c.Assignee != nil && *c.Assignee != "" {
		a, err := st.GetAgent(ctx, *c.Assignee)
		if err != nil || !a.Active() {
			return fmt.Errorf("%w: %q", ErrUnknownAgent, *c.Assignee)
		}
	}
	if c.Team != nil {
		teams, err := st.Teams(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(teams, *c.Team) {
			return fmt.Errorf("%w: %q (teams: %v)", ErrUnknownTeam, *c.Team, teams)
		}
	}
	if c.Status != nil && *c.Status != t.Status {
		if err := setStatus(ctx, st, t, actor, *c.Status); err != nil {
			return err
		}
	}
	if c.Assignee != nil && *c.Assignee != deref(t.Assignee) {
		if err := st.SetTicketAssignee(ctx, t.ID, *c.Assignee); err != nil {
			return err
		}
		if err := event(ctx, st, t.ID, actor, "assignee", deref(t.Assignee), *c.Assignee); err != nil {
			return err
		}
	}
	if c.Team != nil && *c.Team != deref(t.Team) {
		if err := st.SetTicketTeam(ctx, t.ID, *c.Team); err != nil {
			return err
		}
		if err := event(ctx, st, t.ID, actor, "team", deref(t.Team), *c.Team); err != nil {
			return err
		}
	}
	if c.Priority != nil && (t.Priority == nil || int(*t.Priority) != *c.Priority) {
		if err := st.SetTicketPriority(ctx, t.ID, *c.Priority); err != nil {
			return err
		}
		from := ""
		if t.Priority != nil {
			from = strconv.Itoa(int(*t.Priority))
		}
		if err := event(ctx, st, t.ID, actor, "priority", from, strconv.Itoa(*c.Priority)); err != nil {
			return err
		}
	}
	return nil
}

// setStatus changes the status with its event.
func setStatus(ctx context.Context, st *store.Store, t *store.Ticket, actor, status string) error {
	if err := st.SetTicketStatus(ctx, t.ID, status); err != nil {
		return err
	}
	from := t.Status
	t.Status = status
	if err := emit(ctx, st, EventTicketStatusChanged, TicketStatusChanged{TicketID: t.ID, From: from, To: status, Actor: actor}); err != nil {
		return err
	}
	return event(ctx, st, t.ID, actor, "status", from, status)
}

// event records a change; empty values are recorded as none.
func event(ctx context.Context, st *store.Store, ticketID, actor, what, from, to string) error {
	e := &store.TicketEvent{Actor: actor, What: what}
	if from != "" {
		e.From = &from
	}
	if to != "" {
		e.To = &to
	}
	return st.InsertTicketEvent(ctx, ticketID, e)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// AddNote writes an internal note: never emailed, never shown to the
// customer, never in any thread header.
func (d *Desk) AddNote(ctx context.Context, author, ticketID, body string) (*store.Message, error) {
	var msg *store.Message
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) (err error) {
		st := store.New(tx)
		if _, err := st.LockTicket(ctx, ticketID); err != nil {
			return err
		}
		msg, err = st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticketID, Direction: store.DirectionNote, Author: author, Body: body})
		return err
	})
	return msg, err
}

// AssignTx gives the ticket to the least busy active agent of its team
// (fewest open and pending tickets; ties: assigned least recently), unless
// it has an assignee already, in the caller's transaction: the one that
// saves the team triage chose. It returns the agent, "" for none.
func AssignTx(ctx context.Context, tx pgx.Tx, ticketID, team string) (string, error) {
	st := store.New(tx)
	agent, err := st.AssignToTeam(ctx, ticketID, team)
	if err != nil || agent == "" {
		return "", err
	}
	return agent, event(ctx, st, ticketID, ActorSystem, "assignee", "", agent)
}

// Autoclose closes the tickets solved before the time, each in a
// transaction of its own with its event, and returns how many it closed.
func Autoclose(ctx context.Context, pool *pgxpool.Pool, before time.Time) (int, error) {
	closed := 0
	for {
		ids, err := store.New(pool).SolvedBefore(ctx, before, 100)
		if err != nil {
			return closed, err
		}
		if len(ids) == 0 {
			return closed, nil
		}
		for _, id := range ids {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				st := store.New(tx)
				t, err := st.LockTicket(ctx, id)
				if err != nil {
					return err
				}
				if t.Status != store.StatusSolved || t.SolvedAt == nil || !t.SolvedAt.Before(before) {
					return nil // the customer wrote meanwhile
				}
				closed++
				return setStatus(ctx, st, t, ActorSystem, store.StatusClosed)
			})
			if err != nil {
				return closed, fmt.Errorf("autoclose %s: %w", id, err)
			}
		}
	}
}
