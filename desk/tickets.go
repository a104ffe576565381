package desk

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/helpdesk-dev/helpdesk/blob"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// transitions are the status changes a person may make. A customer's
// message reopens a pending or solved ticket; one on a closed ticket opens
// a follow-up instead, so closed is final.
var transitions = map[vocab.Status][]vocab.Status{
	vocab.StatusOpen:    {vocab.StatusPending, vocab.StatusSolved, vocab.StatusClosed},
	vocab.StatusPending: {vocab.StatusOpen, vocab.StatusSolved, vocab.StatusClosed},
	vocab.StatusSolved:  {vocab.StatusOpen, vocab.StatusPending, vocab.StatusClosed},
	vocab.StatusClosed:  nil,
}

// CanChangeStatus reports whether a ticket may go from one status to another.
func CanChangeStatus(from, to vocab.Status) bool {
	return from == to || slices.Contains(transitions[from], to)
}

// OpenTicketParams are a new ticket and its first message.
type OpenTicketParams struct {
	CustomerID string
	Subject    string
	Body       string
	Author     vocab.Actor // who wrote the first message; default the customer
	FollowUpOf string      // the closed ticket this one follows, if any

	// EmailMessageID is the first message's Message-ID when the ticket came
	// by email; empty mints a synthetic thread root.
	EmailMessageID string
	Attachments    []*File      // the email's files; past the size limit only their names are kept
	Automatic      bool         // an auto-reply or bulk mail: stored, not triaged
	RawEmailGzip   *blob.Buffer // the email as it arrived, compressed
	// NoAutoReply: the mail came from a machine, a list or a report, so
	// no acknowledgement answers it (RFC 3834 §2).
	NoAutoReply bool
	// Of mail: its From address and what its sender authentication said.
	Sender        string
	Verdict       vocab.Verdict
	VerdictDetail string
	// AckNeutral: the sender became a customer with this mail, so its
	// acknowledgement carries neither the name nor the subject it chose.
	AckNeutral bool
	// Held, when set, is why the first message is held: kept for agents,
	// not triaged, not acknowledged, until an agent accepts it.
	Held string
	// SupportAddress is the address it came to when that address has a
	// row: the ticket's mail is From it, and it is the team's.
	SupportAddress *store.SupportAddress
	// Arrived is when a fetched mail reached its mailbox, zero when it
	// arrives now: of one that waited there past a day, nobody is mailed
	// (late). The SLA clocks count from it.
	Arrived time.Time
}

// OpenTicket writes a ticket, its first message and its triage job in one
// transaction: all of them exist afterwards, or none.
func (d *Desk) OpenTicket(ctx context.Context, p *OpenTicketParams) (ticket *store.Ticket, jobID int64, err error) {
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		ticket, jobID, err = d.OpenTicketTx(ctx, tx, p)
		return err
	})
	return ticket, jobID, err
}

// OpenTicketTx is OpenTicket in the caller's transaction. The ticket's
// numbers are taken first, its triage job's with them, so that its rows
// name the job and its job the ticket before either is written: the job
// is inserted with the commit, in its trip (Enqueuer.QueueTriageAtCommit).
// Without an acknowledgement to send, the rows wait for the transaction's
// next trip (its commit, at the latest): the ticket returned holds its id
// and the fields given at once, the rest once they are written.
func (d *Desk) OpenTicketTx(ctx context.Context, tx *store.Tx, p *OpenTicketParams) (*store.Ticket, int64, error) {
	st := tx.Store()
	author := p.Author
	if author == "" {
		author = vocab.Customer(p.CustomerID)
	}
	// Only a customer's own new ticket is acknowledged, not one an agent
	// opens for them, and only within the limits: whether the customer's
	// address is at its limit is read with the numbers, so that a ticket
	// of a customer who writes often, the most of them, takes neither the
	// claim's lock nor a trip for it, and its rows go with the commit.
	ack := d.config.Ack != nil && !p.Automatic && !p.NoAutoReply && !author.IsAgent() && p.Held == ""
	var (
		n       store.TicketNumbers
		numbers store.Batch
		mayAck  bool
	)
	triage := !p.Automatic && p.Held == ""
	numbers.NextTicketNumbers(triage, &n)
	if ack {
		numbers.MayAcknowledge(p.CustomerID, d.ackLimits(), &mayAck)
	}
	if err := st.Send(ctx, &numbers); err != nil {
		return nil, 0, fmt.Errorf("open ticket: %w", err)
	}
	ticketID, messageID, jobID, now := n.TicketID, n.MessageID, n.JobID, n.Now
	quiet := late(p.Arrived, now)
	ack = ack && mayAck && !quiet
	if triage {
		d.jobs.QueueTriageAtCommit(tx, ticketID, jobID, quiet)
	}
	// The first message stands for the thread's root: a ticket that did not
	// come by email gets a synthetic Message-ID that every reply references.
	root := p.EmailMessageID
	if root == "" {
		root = mail.NewRootMessageID(d.config.MailDomain, ticketID)
	}
	// The ticket as its row will hold it: the numbers taken, the
	// transaction's time, the fields given.
	ticket := &store.Ticket{ID: ticketID, CustomerID: p.CustomerID, Subject: p.Subject, Status: vocab.StatusOpen, CreatedAt: now,
		UpdatedAt: now, LastCustomerMessageAt: &now}
	var (
		rows  store.Batch
		first store.Message
	)
	newTicket := &store.InsertTicketParams{ID: ticketID, CustomerID: p.CustomerID, Subject: p.Subject, FollowUpOf: p.FollowUpOf}
	if a := p.SupportAddress; a != nil {
		newTicket.SupportAddress, ticket.SupportAddress = a.Address, &a.Address
		if a.Team != nil {
			newTicket.Team, ticket.Team = *a.Team, a.Team
		}
	}
	if jobID != 0 {
		newTicket.TriageJobID, ticket.TriageJobID = &jobID, &jobID
	}
	if p.FollowUpOf != "" {
		ticket.FollowUpOf = &p.FollowUpOf
	}
	// Without an acknowledgement nothing reads the rows back, and they go
	// with the commit.
	into, firstInto := ticket, &first
	if !ack {
		into, firstInto = nil, nil
	}
	rows.InsertTicket(newTicket, into)
	direction := vocab.DirectionInbound
	if p.Held != "" {
		direction = vocab.DirectionHeld
	}
	rows.InsertMessage(&store.InsertMessageParams{
		ID: messageID, TicketID: ticketID, Direction: direction, Author: author, Body: p.Body, EmailMessageID: &root,
		Attachments: d.keepable(p.Attachments), AutoSubmitted: p.Automatic, RawEmailGzip: p.RawEmailGzip,
		Sender: p.Sender, AuthVerdict: p.Verdict, AuthDetail: p.VerdictDetail, HeldReason: p.Held, Subject: p.Subject, Arrived: p.Arrived,
	}, firstInto)
	// The events are made of what the rows will hold: the numbers taken,
	// the transaction's time, the fields given.
	var followUpOf *string
	if p.FollowUpOf != "" {
		followUpOf = &p.FollowUpOf
		rows.InsertTicketEvent(ticketID, &store.TicketEvent{Actor: author, What: "follow_up", From: &p.FollowUpOf})
	}
	events := []store.NewWebhookEvent{{Type: EventTicketCreated, Data: TicketCreated{TicketID: ticketID, CustomerID: p.CustomerID,
		Subject: p.Subject, Status: vocab.StatusOpen, FollowUpOf: followUpOf, CreatedAt: now}}}
	if p.Held == "" {
		events = append(events, store.NewWebhookEvent{Type: EventMessageReceived, Data: MessageEvent{TicketID: ticketID, MessageID: messageID,
			Direction: vocab.DirectionInbound, Author: author, EmailMessageID: &root, Automatic: p.Automatic}})
	} else {
		rows.InsertTicketEvent(ticketID, &store.TicketEvent{Actor: vocab.System, What: "held", To: &p.Held})
	}
	rows.InsertWebhookEvents(events)
	// The acknowledgement's customer comes with the rows, after them, so
	// that an unknown customer is the ticket's foreign key.
	if !ack {
		tx.Later(func(b *store.Batch) { b.Add(&rows) })
		return ticket, jobID, nil
	}
	var customer store.Customer
	rows.CustomerOfTicket(ticketID, &customer)
	if err := st.Send(ctx, &rows); err != nil {
		return nil, 0, fmt.Errorf("open ticket: %w", err)
	}
	if err := d.acknowledgeTx(ctx, tx, ticket, &customer, root, p.AckNeutral); err != nil {
		return nil, 0, fmt.Errorf("open ticket: %w", err)
	}
	return ticket, jobID, nil
}

// CustomerMessageParams are a customer's new message on a ticket.
type CustomerMessageParams struct {
	TicketID       string
	Author         vocab.Actor // customer:C-… or email:ADDRESS
	Body           string
	EmailMessageID string // empty mints one, for a message that did not come by email
	Attachments    []*File
	Automatic      bool         // an auto-reply or bulk mail: stored, not triaged, reopens nothing
	RawEmailGzip   *blob.Buffer // the email as it arrived, compressed
	NoAutoReply    bool         // no acknowledgement, should it open a follow-up
	// Of mail: its From address and what its sender authentication said.
	Sender        string
	Verdict       vocab.Verdict
	VerdictDetail string
	// Arrived is when a fetched mail reached its mailbox (OpenTicketParams.Arrived).
	Arrived time.Time
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
func (d *Desk) AddCustomerMessageTx(ctx context.Context, tx *store.Tx, p *CustomerMessageParams) (*CustomerMessage, error) {
	st := tx.Store()
	ticket, err := st.LockTicket(ctx, p.TicketID)
	if err != nil {
		return nil, err
	}
	if ticket.MergedInto != nil {
		// What the customer writes to a merged ticket goes to the one it
		// became part of.
		if ticket, err = st.LockTicket(ctx, *ticket.MergedInto); err != nil {
			return nil, err
		}
		redirected := *p
		redirected.TicketID = ticket.ID
		p = &redirected
	}
	if ticket.Status == vocab.StatusClosed && !p.Automatic {
		var address *store.SupportAddress
		if ticket.SupportAddress != nil { // the follow-up comes from where the ticket did
			address = &store.SupportAddress{Address: *ticket.SupportAddress, Team: ticket.Team}
		}
		followUp, jobID, err := d.OpenTicketTx(ctx, tx, &OpenTicketParams{CustomerID: ticket.CustomerID, Subject: ticket.Subject,
			Body: p.Body, Author: p.Author, FollowUpOf: ticket.ID, EmailMessageID: p.EmailMessageID, Attachments: p.Attachments,
			RawEmailGzip: p.RawEmailGzip, NoAutoReply: p.NoAutoReply, Sender: p.Sender, Verdict: p.Verdict, VerdictDetail: p.VerdictDetail,
			SupportAddress: address, Arrived: p.Arrived})
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
	// The ticket's new triage job is numbered with the message, in its trip.
	var jobID int64
	if !p.Automatic {
		tx.Later(func(b *store.Batch) { b.NextJobID(&jobID) })
	}
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{
		TicketID: p.TicketID, Direction: vocab.DirectionInbound, Author: p.Author, Body: p.Body,
		EmailMessageID: &id, Attachments: d.keepable(p.Attachments), AutoSubmitted: p.Automatic, RawEmailGzip: p.RawEmailGzip,
		Sender: p.Sender, AuthVerdict: p.Verdict, AuthDetail: p.VerdictDetail, Arrived: p.Arrived,
	})
	if err != nil {
		return nil, err
	}
	out := &CustomerMessage{Message: msg, TicketID: p.TicketID}
	received := messageEvent(msg)
	received.Automatic = p.Automatic
	emit(tx, EventMessageReceived, received)
	if p.Automatic {
		return out, nil
	}
	d.customerWroteTx(tx, p.TicketID, jobID, late(p.Arrived, msg.CreatedAt))
	if ticket.Status == vocab.StatusPending || ticket.Status == vocab.StatusSolved {
		setStatus(tx, ticket, p.Author, vocab.StatusOpen)
	}
	d.retimeTx(tx, p.TicketID)
	out.JobID = jobID
	return out, nil
}

// AddCustomerMessage is AddCustomerMessageTx in a transaction of its own.
func (d *Desk) AddCustomerMessage(ctx context.Context, p *CustomerMessageParams) (out *CustomerMessage, err error) {
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		out, err = d.AddCustomerMessageTx(ctx, tx, p)
		return err
	})
	return out, err
}

// retriageTx queues a new triage job for the ticket, numbered jobID in an
// earlier trip (store.Batch.NextJobID), and records it as the ticket's;
// the job is inserted with the commit.
func (d *Desk) retriageTx(tx *store.Tx, ticketID string, jobID int64) {
	d.jobs.QueueTriageAtCommit(tx, ticketID, jobID, false)
	tx.Later(func(b *store.Batch) { b.SetTicketTriageJob(ticketID, jobID) })
}

// customerWroteTx is retriageTx for a message of the customer's on a
// ticket the transaction holds locked: the time the customer wrote and the
// new job are one update of the ticket's row. A quiet job's triage mails
// no agent (late).
func (d *Desk) customerWroteTx(tx *store.Tx, ticketID string, jobID int64, quiet bool) {
	d.jobs.QueueTriageAtCommit(tx, ticketID, jobID, quiet)
	tx.Later(func(b *store.Batch) { b.CustomerWrote(ticketID, jobID) })
}

// Change is what a person changes of a ticket; nil fields stay as they are.
type Change struct {
	Status   *vocab.Status
	Assignee *string // an active agent's name, or "" for nobody
	Team     *string
	Priority *int
}

// ChangeTicket applies a change in one transaction, with an event for each
// field that changed, or nothing at all: a status change that is not
// allowed is ErrInvalidTransition, an unknown or disabled agent
// ErrUnknownAgent, a team nobody belongs to ErrUnknownTeam.
func (d *Desk) ChangeTicket(ctx context.Context, actor vocab.Actor, ticketID string, c *Change) (ticket *store.Ticket, err error) {
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		st := tx.Store()
		t, err := st.LockTicket(ctx, ticketID)
		if err != nil {
			return err
		}
		if err := d.changeTx(ctx, tx, t, actor, c); err != nil {
			return err
		}
		ticket, err = st.GetTicket(ctx, t.ID)
		return err
	})
	return ticket, err
}

// changeTx applies a change to a ticket locked by the caller's
// transaction; its writes go with the transaction's next trip.
func (d *Desk) changeTx(ctx context.Context, tx *store.Tx, t *store.Ticket, actor vocab.Actor, c *Change) error {
	st := tx.Store()
	if c.Status != nil && !CanChangeStatus(t.Status, *c.Status) {
		return fmt.Errorf("%w: %s → %s", ErrInvalidTransition, t.Status, *c.Status)
	}
	if c.Priority != nil && (*c.Priority < 1 || *c.Priority > 4) {
		return fmt.Errorf("%w: %d", ErrInvalidPriority, *c.Priority)
	}
	if c.Assignee != nil && *c.Assignee != "" {
		a, err := st.GetAgent(ctx, *c.Assignee)
		if err != nil || !a.Active() {
			return fmt.Errorf("%w: %q", ErrUnknownAgent, *c.Assignee)
		}
	}
	if c.Team != nil {
		if err := requireTeam(ctx, st, *c.Team); err != nil {
			return err
		}
	}
	if c.Status != nil && *c.Status != t.Status {
		setStatus(tx, t, actor, *c.Status)
	}
	if c.Assignee != nil && *c.Assignee != deref(t.Assignee) {
		assignee := *c.Assignee
		tx.Later(func(b *store.Batch) { b.SetTicketAssignee(t.ID, assignee) })
		event(tx, t.ID, actor, "assignee", deref(t.Assignee), assignee)
	}
	if c.Team != nil && *c.Team != deref(t.Team) {
		team := *c.Team
		tx.Later(func(b *store.Batch) { b.SetTicketTeam(t.ID, team) })
		event(tx, t.ID, actor, "team", deref(t.Team), team)
	}
	if c.Priority != nil && (t.Priority == nil || int(*t.Priority) != *c.Priority) {
		priority := *c.Priority
		tx.Later(func(b *store.Batch) { b.SetTicketPriority(t.ID, priority) })
		from := ""
		if t.Priority != nil {
			from = strconv.Itoa(int(*t.Priority))
		}
		event(tx, t.ID, actor, "priority", from, strconv.Itoa(priority))
	}
	d.retimeTx(tx, t.ID)
	return nil
}

// setStatus changes the status with its events, with the transaction's
// next trip.
func setStatus(tx *store.Tx, t *store.Ticket, actor vocab.Actor, status vocab.Status) {
	from := t.Status
	t.Status = status
	tx.Later(func(b *store.Batch) { b.SetTicketStatus(t.ID, status) })
	emit(tx, EventTicketStatusChanged, TicketStatusChanged{TicketID: t.ID, From: from, To: status, Actor: actor})
	event(tx, t.ID, actor, "status", string(from), string(status))
}

// requireTeam is ErrUnknownTeam for a team nobody belongs to.
func requireTeam(ctx context.Context, st *store.Store, team string) error {
	teams, err := st.Teams(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(teams, team) {
		return fmt.Errorf("%w: %q (teams: %v)", ErrUnknownTeam, team, teams)
	}
	return nil
}

// event records a change with the transaction's next trip; empty values
// are recorded as none.
func event(tx *store.Tx, ticketID string, actor vocab.Actor, what, from, to string) {
	e := &store.TicketEvent{Actor: actor, What: what}
	if from != "" {
		e.From = &from
	}
	if to != "" {
		e.To = &to
	}
	tx.Later(func(b *store.Batch) { b.InsertTicketEvent(ticketID, e) })
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// AddNote writes an internal note: never emailed, never shown to the
// customer, never in any thread header.
func (d *Desk) AddNote(ctx context.Context, author vocab.Actor, ticketID, body string) (*store.Message, error) {
	return d.AddNoteSeen(ctx, author, ticketID, body, 0)
}

// AddNoteSeen is AddNote by an agent who saw up to message seen: a newer
// customer message or reply is ErrTicketChanged (0: no check).
func (d *Desk) AddNoteSeen(ctx context.Context, author vocab.Actor, ticketID, body string, seen int64) (*store.Message, error) {
	if err := messageText(body); err != nil {
		return nil, fmt.Errorf("note on %s: %w", ticketID, err)
	}
	var msg *store.Message
	err := store.Run(ctx, d.pool, func(tx *store.Tx) (err error) {
		st := tx.Store()
		var (
			t      store.Ticket
			newest int64
			reads  store.Batch
		)
		reads.LockTicket(ticketID, &t)
		reads.NewestMessage(ticketID, &newest)
		if err := st.Send(ctx, &reads); err != nil {
			return err
		}
		if seen > 0 && newest > seen {
			return fmt.Errorf("note on %s: message %d came after %d: %w", ticketID, newest, seen, ErrTicketChanged)
		}
		msg, err = st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticketID, Direction: vocab.DirectionNote, Author: author, Body: body})
		return err
	})
	return msg, err
}
