package desk_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// queued is a job the use cases asked for.
type queued struct {
	Kind      string // triage, email, notify
	TicketID  string
	MessageID int64
	ID        int64
	At        time.Time // sla: when; zero for now
	Render    bool      // email: a reply, rendered at its first attempt
}

// fakeQueue is the enqueue interface without River: it writes nothing and
// remembers what was queued. Without mail it refuses email, as a
// deployment without a relay does.
type fakeQueue struct {
	mail bool
	mu   sync.Mutex
	next int64 // its own ids (SLA looks') count from fakeIDs, above those the schema's sequence gives the Queue…AtCommit jobs
	jobs []queued
}

// fakeIDs is where the fake queue's own job ids begin.
const fakeIDs = 1 << 40

func (q *fakeQueue) addJob(j queued) (int64, error) {
	if j.Kind != "triage" && !q.mail {
		return 0, desk.ErrNoRelay
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if j.ID == 0 { // not numbered by the schema's sequence
		q.next = max(q.next+1, fakeIDs)
		j.ID = q.next
	}
	q.jobs = append(q.jobs, j)
	return j.ID, nil
}

// QueueTriageAtCommit remembers the job with the id taken for it.
func (q *fakeQueue) QueueTriageAtCommit(_ *store.Tx, ticketID string, jobID int64, _ bool) {
	_, _ = q.addJob(queued{Kind: "triage", TicketID: ticketID, ID: jobID})
}

func (q *fakeQueue) QueueEmailAtCommit(_ *store.Tx, messageID int64, ticketID string, jobID int64) error {
	_, err := q.addJob(queued{Kind: "email", TicketID: ticketID, MessageID: messageID, ID: jobID})
	return err
}

func (q *fakeQueue) QueueReplyAtCommit(_ *store.Tx, messageID int64, ticketID string, jobID int64) error {
	_, err := q.addJob(queued{Kind: "email", TicketID: ticketID, MessageID: messageID, Render: true, ID: jobID})
	return err
}

func (q *fakeQueue) QueueNotifyAtCommit(_ *store.Tx, messageID int64, ticketID string, jobID int64) error {
	_, err := q.addJob(queued{Kind: "notify", TicketID: ticketID, MessageID: messageID, ID: jobID})
	return err
}

func (q *fakeQueue) EnqueueSLATx(_ context.Context, _ *store.Tx, ticketID string, at time.Time) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next = max(q.next+1, fakeIDs)
	q.jobs = append(q.jobs, queued{Kind: "sla", TicketID: ticketID, ID: q.next, At: at})
	return q.next, nil
}

// CancelTx takes the job off the fake queue, as River would cancel it.
func (q *fakeQueue) CancelTx(_ context.Context, _ *store.Tx, jobID int64) (desk.Cancelled, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, j := range q.jobs {
		if j.ID == jobID {
			q.jobs = append(q.jobs[:i], q.jobs[i+1:]...)
			c := desk.Cancelled{JobID: jobID, TicketID: j.TicketID}
			if j.Kind != "triage" {
				c.MessageID = j.MessageID
			}
			return c, nil
		}
	}
	return desk.Cancelled{}, fmt.Errorf("job %d: %w", jobID, store.ErrNotFound)
}

// of lists the jobs of one kind queued so far.
func (q *fakeQueue) of(kind string) []queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []queued
	for _, j := range q.jobs {
		if j.Kind == kind {
			out = append(out, j)
		}
	}
	return out
}

// world is one test's: a migrated schema, the use cases over a fake queue,
// and with mail a real SMTP server the desk delivers to.
type world struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	st    *store.Store
	queue *fakeQueue
	desk  *desk.Desk
	smtp  *smtptest.Server // nil without mail
	cfg   desk.Config
}

// The customers every world has.
var (
	ada  = store.InsertCustomerParams{ID: "C-0001", Name: "Ada Lovelace", Email: "ada.lovelace@example.com"}
	bram = store.InsertCustomerParams{ID: "C-0002", Name: "Bram de Vries", Email: "bram.devries@example.com"}
)

const supportDomain = "helpdesk.example.com"

// newWorld sets up a world; change sets its configuration before the desk
// is made. withMail gives it a relay: a real SMTP server on loopback.
func newWorld(t *testing.T, withMail bool, change ...func(*desk.Config)) *world {
	t.Helper()
	w := &world{ctx: context.Background(), pool: storetest.NewPool(t), queue: &fakeQueue{mail: withMail}}
	w.st = store.New(w.pool)
	for _, c := range []store.InsertCustomerParams{ada, bram} {
		if _, err := w.st.InsertCustomer(w.ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	w.cfg = desk.Config{MailDomain: supportDomain, From: &mail.Address{Name: "Example Support", Address: "support@" + supportDomain},
		Logger: logger()}
	if withMail {
		w.smtp = smtptest.Start(t)
		relay, err := mail.NewRelay(mail.RelayConfig{URL: w.smtp.URL(), HeloName: supportDomain,
			DialTimeout: 5 * time.Second, CommandTimeout: 5 * time.Second, BodyTimeout: 5 * time.Second, ReplyTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		w.cfg.Delivery = desk.DeliveryConfig{Sender: relay, Backoff: backoff.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
			Lease: 10 * time.Second}
	}
	for _, f := range change {
		f(&w.cfg)
	}
	w.desk = desk.New(w.pool, w.queue, w.cfg)
	return w
}

func logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("HELPDESK_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// agent adds an active agent of the teams.
func (w *world) agent(t *testing.T, name string, teams ...string) *store.Agent {
	t.Helper()
	if err := w.st.UpsertAgent(w.ctx, &store.UpsertAgentParams{Name: name, DisplayName: name, Email: name + "@support.example.com",
		Teams: teams}); err != nil {
		t.Fatal(err)
	}
	a, err := w.st.GetAgent(w.ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// open opens a ticket of Ada's, as the API would.
func (w *world) open(t *testing.T, subject, body string) *store.Ticket {
	t.Helper()
	ticket, _, err := w.desk.OpenTicket(w.ctx, &desk.OpenTicketParams{CustomerID: ada.ID, Subject: subject, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return w.ticket(t, ticket.ID)
}

func (w *world) ticket(t *testing.T, id string) *store.Ticket {
	t.Helper()
	ticket, err := w.st.GetTicket(w.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return ticket
}

func (w *world) messages(t *testing.T, ticketID string) []*store.Message {
	t.Helper()
	msgs, err := w.st.ListMessages(w.ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// ofDirection keeps the messages of one direction.
func ofDirection(msgs []*store.Message, d vocab.Direction) []*store.Message {
	var out []*store.Message
	for _, m := range msgs {
		if m.Direction == d {
			out = append(out, m)
		}
	}
	return out
}

// reply writes an agent's reply in a transaction of its own.
func (w *world) reply(t *testing.T, p *desk.ReplyParams) (*store.Message, int64, error) {
	t.Helper()
	var (
		msg   *store.Message
		jobID int64
	)
	err := store.Run(w.ctx, w.pool, func(tx *store.Tx) (err error) {
		msg, jobID, err = w.desk.CreateReplyTx(w.ctx, tx, p)
		return err
	})
	return msg, jobID, err
}

// deliverAll delivers every email the queue holds, each until its step is
// not a retry, as the email worker would with no wait between attempts.
func (w *world) deliverAll(t *testing.T) map[int64]desk.Next {
	t.Helper()
	out := map[int64]desk.Next{}
	for _, j := range append(w.queue.of("email"), w.queue.of("notify")...) {
		for attempt := 1; ; attempt++ {
			a := desk.Attempt{JobID: j.ID, MessageID: j.MessageID, Attempt: attempt, MaxAttempts: 3}
			if j.Render && attempt == 1 {
				a.TicketID = j.TicketID // as the email worker does
			}
			n := w.desk.Deliver(w.ctx, a)
			out[j.MessageID] = n
			if n.Step != desk.Retry || attempt == 3 {
				break
			}
		}
	}
	return out
}

// events lists a ticket's events as "what:from→to".
func (w *world) events(t *testing.T, ticketID string) []string {
	t.Helper()
	list, err := w.st.ListTicketEvents(w.ctx, ticketID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list {
		out = append(out, fmt.Sprintf("%s:%s→%s", e.What, deref(e.From), deref(e.To)))
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
