package console

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", &page{Title: "Sign in"})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	session, _, err := c.auth.SignIn(r, strings.TrimSpace(r.PostFormValue("key")))
	var apiErr *api.Error
	switch {
	case errors.Is(err, api.ErrNotAnAgent):
		c.render(w, r, http.StatusUnauthorized, "login", &page{Title: "Sign in", Problem: "That is not an agent's API key."})
		return
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests:
		c.render(w, r, http.StatusTooManyRequests, "login", &page{Title: "Sign in", Problem: apiErr.Message})
		return
	case err != nil:
		c.log.ErrorContext(r.Context(), "console: sign in", slog.Any("error", err))
		c.render(w, r, http.StatusServiceUnavailable, "login", &page{Title: "Sign in", Problem: "Signing in failed; try again."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: session, Path: Prefix, MaxAge: c.auth.SessionTTL(),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.auth.Secure(r)})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if cookie, err := r.Cookie(cookieName); err == nil && cookie.Value != "" {
		if err := c.auth.SignOut(r.Context(), cookie.Value); err != nil {
			c.log.ErrorContext(r.Context(), "console: sign out", slog.Any("error", err))
		}
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.auth.Secure(r)})
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// pageSize is how many tickets a queue page shows.
const pageSize = 50

// maxSearch bounds the queue's search, in bytes: each of its words is a
// condition of the query, and a URL may be a megabyte long.
const maxSearch = 200

var viewNames = map[string]string{"mine": "Mine", "unassigned": "Unassigned", "open": "All open", "pending": "Pending",
	"due": "Due soon", "all": "All"}

type viewTab struct {
	Key, Name string
	Count     int
	Current   bool
	URL       string
}

type queueData struct {
	Views                     []viewTab
	View                      string
	Rows                      []*store.QueueRow
	Total, From, To           int
	TotalText                 string // Total, or "N+" past what was counted
	Prev, Next                string
	Status, Team, Assignee, Q string
	Priority                  int
	Teams, Agents, Statuses   []string
	ShowSLA                   bool
	Now                       time.Time
}

func (c *Console) queue(w http.ResponseWriter, r *http.Request, a *agent) {
	ctx := r.Context()
	q := r.URL.Query()
	st := store.New(c.pool)
	view := q.Get("view")
	if viewNames[view] == "" {
		view = "mine"
	}
	p := &store.QueueParams{Agent: a.Name, Teams: a.Teams, View: view, Status: q.Get("status"), Team: q.Get("team"),
		Assignee: q.Get("assignee"), Search: q.Get("q"), Limit: pageSize}
	if p.Status != "" && !vocab.Status(p.Status).Valid() {
		p.Status = ""
	}
	// The URL is anyone's to write: a filter no ticket could match is left
	// out and said so, before PostgreSQL refuses its bytes.
	var unusable []string
	if p.Team != "" && !desk.TeamName.MatchString(p.Team) {
		p.Team, unusable = "", append(unusable, "the team, which is no team's name")
	}
	if p.Assignee != "" && !vocab.AgentNamePattern.MatchString(p.Assignee) {
		p.Assignee, unusable = "", append(unusable, "the assignee, who is no agent")
	}
	if s := p.Search; len(s) > maxSearch || !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		p.Search, unusable = "", append(unusable, fmt.Sprintf("the search, which must be text of at most %d bytes", maxSearch))
	}
	if n, err := strconv.Atoi(q.Get("priority")); err == nil && n >= 1 && n <= 4 {
		p.Priority = int16(n)
	}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 1 && n < 100000 {
		p.Offset = (n - 1) * pageSize
	}
	qp, err := st.QueuePage(ctx, p)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	rows, total, timed, agents := qp.Rows, qp.Total, qp.Timed, qp.Agents
	d := &queueData{View: view, Rows: rows, Total: total, From: p.Offset + 1, To: p.Offset + len(rows), Status: p.Status,
		Team: p.Team, Assignee: p.Assignee, Q: p.Search, Priority: int(p.Priority), Teams: qp.Teams, ShowSLA: timed, Now: time.Now()}
	if len(rows) == 0 {
		d.From = 0
	}
	d.TotalText = strconv.Itoa(total)
	if total > p.Offset+store.CountCap {
		d.TotalText = strconv.Itoa(p.Offset+store.CountCap) + "+"
	}
	for _, s := range vocab.Statuses {
		d.Statuses = append(d.Statuses, string(s))
	}
	for _, ag := range agents {
		if ag.Active() {
			d.Agents = append(d.Agents, ag.Name)
		}
	}
	for _, v := range store.Views {
		if v == "due" && !timed {
			continue
		}
		d.Views = append(d.Views, viewTab{Key: v, Name: viewNames[v], Count: qp.Counts[v], Current: v == view, URL: Prefix + "/?view=" + v})
	}
	link := func(page int) string {
		v := url.Values{}
		for k, vals := range q {
			if k != "page" {
				v[k] = vals
			}
		}
		v.Set("page", strconv.Itoa(page))
		return Prefix + "/?" + v.Encode()
	}
	pageNo := p.Offset/pageSize + 1
	if pageNo > 1 {
		d.Prev = link(pageNo - 1)
	}
	if p.Offset+len(rows) < total {
		d.Next = link(pageNo + 1)
	}
	status, problem := http.StatusOK, ""
	if len(unusable) > 0 {
		status, problem = http.StatusBadRequest, "Left out: "+strings.Join(unusable, "; ")+"."
	}
	c.render(w, r, status, "queue", &page{Title: viewNames[view], Agent: a.Agent, Problem: problem, Data: d})
}

type messageItem struct {
	*store.Message
	Kind        string // customer, reply, note, acknowledgement, held, notification
	Who         string
	Recipients  []*store.Recipient
	Attachments []*store.Attachment
	New         bool // came after the page the agent answered from
}

// Reached is when a mail fetched from a mailbox reached it, where that was
// a minute or more before it was filed (a backlog, a mailbox that was
// down): its SLA clocks count from then. Nil otherwise.
func (m messageItem) Reached() *time.Time {
	if m.ArrivedAt == nil || m.CreatedAt.Sub(*m.ArrivedAt) < time.Minute {
		return nil
	}
	return m.ArrivedAt
}

type ticketData struct {
	Ticket     *store.Ticket
	Customer   *store.Customer
	Messages   []messageItem
	Newest     int64
	Draft      string
	DraftStale bool
	ReplyText  string // the agent's own text, kept after a refusal
	NoteText   string
	Status     string // the reply form's status after it
	Teams      []string
	Agents     []string
	Statuses   []string
	Similar    []desk.SimilarTicket
	SLA        *store.TicketSLA
	Saved      []*store.SavedReply
	Present    []*store.Presence
	Events     []*store.TicketEvent
	Triage     string
	Changed    bool // a newer message came while the agent wrote
}

// ticketPage reads what the ticket page shows.
func (c *Console) ticketPage(r *http.Request, a *agent, id string) (*ticketData, error) {
	ctx := r.Context()
	st := store.New(c.pool)
	var (
		t          store.Ticket
		customer   store.Customer
		msgs       []*store.Message
		deliveries = map[int64]*store.OutboundEmail{}
		files      = map[int64][]*store.Attachment{}
		teams      []string
		agents     []*store.Agent
		events     []*store.TicketEvent
		reads      store.Batch
		err        error
	)
	// What the store alone answers, in one trip; the desk's answers after.
	reads.GetTicket(id, &t)
	reads.CustomerOfTicket(id, &customer)
	reads.ListMessages(id, &msgs)
	reads.ListOutboundEmails(id, deliveries)
	reads.AttachmentsOfTicket(id, files)
	reads.Teams(&teams)
	reads.ListAgents(&agents)
	reads.ListTicketEvents(id, &events)
	if err = st.Send(ctx, &reads); err != nil {
		return nil, err
	}
	d := &ticketData{Ticket: &t, Customer: &customer, Teams: teams, Events: events, Status: string(vocab.StatusPending)}
	for _, m := range msgs {
		item := messageItem{Message: m, Who: string(m.Author), Attachments: files[m.ID]}
		switch m.Direction {
		case vocab.DirectionInbound:
			item.Kind, item.Who = "customer", customer.Name+" <"+customer.Email+">"
			if m.Author.Kind() == vocab.KindEmail {
				item.Who = m.Author.ID()
			}
		case vocab.DirectionOutbound:
			item.Kind, item.Who = "reply", m.Author.ID()
			if e := deliveries[m.ID]; e != nil {
				item.Recipients = e.Recipients
			}
		case vocab.DirectionNote:
			item.Kind, item.Who = "note", m.Author.ID()
		case vocab.DirectionAcknowledgement:
			item.Kind, item.Who = "acknowledgement", "automatic acknowledgement"
		case vocab.DirectionHeld:
			item.Kind, item.Who = "held", deref(m.Sender)
		default:
			continue // mail to agents is not part of the thread
		}
		if (m.Direction == vocab.DirectionInbound || m.Direction == vocab.DirectionOutbound) && m.ID > d.Newest {
			d.Newest = m.ID
		}
		d.Messages = append(d.Messages, item)
	}
	if t.DraftReply != nil {
		d.Draft, d.DraftStale = *t.DraftReply, !t.DraftIsCurrent()
	}
	d.ReplyText = d.Draft
	for _, ag := range agents {
		if ag.Active() {
			d.Agents = append(d.Agents, ag.Name)
		}
	}
	for _, s := range vocab.Statuses {
		d.Statuses = append(d.Statuses, string(s))
	}
	if d.Similar, err = c.desk.SimilarTickets(ctx, t.ID, "solved", 5); err != nil && !errors.Is(err, desk.ErrNotEmbedded) {
		return nil, err
	}
	if d.SLA, err = c.desk.TicketSLA(ctx, t.ID); err != nil {
		return nil, err
	}
	if d.Saved, err = c.desk.SavedReplies(ctx, a.Agent); err != nil {
		return nil, err
	}
	for _, s := range d.Saved {
		s.Body = desk.FillSavedReply(s.Body, &t, &customer, a.Agent)
	}
	if d.Present, err = st.SeePresence(ctx, t.ID, a.Name, "viewing", presenceFresh); err != nil {
		return nil, err
	}
	var parts []string
	if t.Team != nil {
		parts = append(parts, "team "+*t.Team)
	}
	if t.Priority != nil {
		parts = append(parts, "priority "+strconv.Itoa(int(*t.Priority)))
	}
	if t.PossibleDuplicateOf != nil {
		parts = append(parts, "possible duplicate of "+*t.PossibleDuplicateOf)
	}
	d.Triage = strings.Join(parts, ", ")
	return d, nil
}

// markNew marks the messages after the one the agent had seen.
func markNew(d *ticketData, seen int64) {
	if !d.Changed {
		return
	}
	for i := range d.Messages {
		d.Messages[i].New = d.Messages[i].ID > seen && (d.Messages[i].Kind == "customer" || d.Messages[i].Kind == "reply")
	}
}

// presenceFresh is how long a view or a reply in progress is shown.
const presenceFresh = 15 * time.Second

func (c *Console) ticket(w http.ResponseWriter, r *http.Request, a *agent) {
	d, err := c.ticketPage(r, a, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if id, err := strconv.ParseInt(r.URL.Query().Get("saved"), 10, 64); err == nil {
		for _, s := range d.Saved {
			if s.ID == id { // inserting a saved reply without JavaScript
				d.ReplyText = s.Body
			}
		}
	}
	notice := map[string]string{"replied": "Reply sent.", "noted": "Note added.", "changed": "Saved.", "taken": "The ticket is yours.",
		"accepted": "Accepted."}[r.URL.Query().Get("done")]
	c.render(w, r, http.StatusOK, "ticket", &page{Title: d.Ticket.ID + " " + d.Ticket.Subject, Agent: a.Agent, Notice: notice, Data: d})
}

// seen is the newest message the form's page showed.
func seen(r *http.Request) int64 {
	n, _ := strconv.ParseInt(r.PostFormValue("seen_message"), 10, 64)
	return max(n, 0)
}

func (c *Console) reply(w http.ResponseWriter, r *http.Request, a *agent) {
	ctx := r.Context()
	id := r.PathValue("id")
	var tooLarge *http.MaxBytesError
	switch err := r.ParseMultipartForm(maxForm); {
	case errors.As(err, &tooLarge), errors.Is(err, multipart.ErrMessageTooLarge):
		c.fail(w, r, http.StatusRequestEntityTooLarge, "The reply or its files are too large.")
		return
	case err != nil && !errors.Is(err, http.ErrNotMultipart):
		c.fail(w, r, http.StatusBadRequest, "The form could not be read: nothing was sent.")
		return
	}
	body := strings.TrimSpace(r.PostFormValue("body"))
	status := vocab.Status(r.PostFormValue("status"))
	if status == "" {
		status = vocab.StatusPending
	}
	refuse := func(code int, problem string, changed bool) {
		d, err := c.ticketPage(r, a, id)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		d.ReplyText, d.Status, d.Changed = r.PostFormValue("body"), string(status), changed
		markNew(d, seen(r))
		c.render(w, r, code, "ticket", &page{Title: d.Ticket.ID + " " + d.Ticket.Subject, Agent: a.Agent, Problem: problem, Data: d})
	}
	if body == "" {
		refuse(http.StatusUnprocessableEntity, "Write the reply first.", false)
		return
	}
	if !status.Valid() {
		refuse(http.StatusUnprocessableEntity, "Pick a status for after the reply.", false)
		return
	}
	if err := desk.CheckText(body); err != nil {
		refuse(http.StatusUnprocessableEntity, "The reply was not sent: "+err.Error()+".", false)
		return
	}
	err := store.Run(ctx, c.pool, func(tx *store.Tx) error {
		var ids []int64
		if r.MultipartForm != nil {
			for _, fh := range r.MultipartForm.File["attachments"] {
				f, err := fh.Open()
				if err != nil {
					return err
				}
				content, err := io.ReadAll(io.LimitReader(f, c.desk.AttachmentMaxBytes()+1))
				_ = f.Close()
				if err != nil {
					return err
				}
				up, err := c.desk.StoreUploadTx(ctx, tx, &desk.Upload{Agent: a.Name, Filename: fh.Filename,
					ContentType: fh.Header.Get("Content-Type"), Content: content})
				if err != nil {
					return err
				}
				ids = append(ids, up.ID)
			}
		}
		_, _, err := c.desk.CreateReplyTx(ctx, tx, &desk.ReplyParams{TicketID: id, Author: vocab.Agent(a.Name), Body: body,
			Status: status, Attachments: ids, SeenMessage: seen(r)})
		return err
	})
	switch {
	case errors.Is(err, desk.ErrTicketChanged):
		refuse(http.StatusConflict, "Something new came in while you wrote: read it below. Your reply was not sent; your text is kept.", true)
		return
	case errors.Is(err, desk.ErrInvalidTransition), errors.Is(err, desk.ErrTicketClosed), errors.Is(err, desk.ErrNoRelay),
		errors.Is(err, desk.ErrAttachmentTooLarge):
		refuse(http.StatusConflict, "The reply was not sent: "+err.Error()+".", false)
		return
	case errors.Is(err, desk.ErrInvalidFilename):
		refuse(http.StatusUnprocessableEntity, "The reply was not sent: "+err.Error()+".", false)
		return
	case err != nil:
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/tickets/"+url.PathEscape(id)+"?done=replied", http.StatusSeeOther)
}

func (c *Console) note(w http.ResponseWriter, r *http.Request, a *agent) {
	id := r.PathValue("id")
	body := strings.TrimSpace(r.PostFormValue("body"))
	err := desk.CheckText(body)
	if err == nil {
		_, err = c.desk.AddNoteSeen(r.Context(), vocab.Agent(a.Name), id, body, seen(r))
	}
	if errors.Is(err, desk.ErrTicketChanged) || errors.Is(err, desk.ErrInvalidText) {
		d, perr := c.ticketPage(r, a, id)
		if perr != nil {
			c.failErr(w, r, perr)
			return
		}
		changed := errors.Is(err, desk.ErrTicketChanged)
		d.NoteText, d.Changed = r.PostFormValue("body"), changed
		markNew(d, seen(r))
		problem, code := "Write the note first.", http.StatusUnprocessableEntity
		switch {
		case body == "":
		case changed:
			problem, code = "Something new came in while you wrote: read it below. Your note was not added; your text is kept.", http.StatusConflict
		default:
			problem = "The note was not added: " + err.Error() + "."
		}
		c.render(w, r, code, "ticket", &page{Title: d.Ticket.ID + " " + d.Ticket.Subject, Agent: a.Agent, Problem: problem, Data: d})
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/tickets/"+url.PathEscape(id)+"?done=noted", http.StatusSeeOther)
}

func (c *Console) change(w http.ResponseWriter, r *http.Request, a *agent) {
	id := r.PathValue("id")
	t, err := store.New(c.pool).GetTicket(r.Context(), id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	// The form sends every control; only what differs is a change.
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	ch := &desk.Change{}
	if _, ok := r.PostForm["assignee"]; ok {
		if assignee := r.PostFormValue("assignee"); assignee != deref(t.Assignee) {
			ch.Assignee = &assignee
		}
	}
	if team := r.PostFormValue("team"); team != "" && team != deref(t.Team) {
		ch.Team = &team
	}
	if p, err := strconv.Atoi(r.PostFormValue("priority")); err == nil && (t.Priority == nil || int(*t.Priority) != p) {
		ch.Priority = &p
	}
	if s := vocab.Status(r.PostFormValue("status")); s != "" && s != t.Status {
		ch.Status = &s
	}
	if _, err := c.desk.ChangeTicket(r.Context(), vocab.Agent(a.Name), id, ch); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/tickets/"+url.PathEscape(id)+"?done=changed", http.StatusSeeOther)
}

func (c *Console) take(w http.ResponseWriter, r *http.Request, a *agent) {
	id := r.PathValue("id")
	if _, err := c.desk.ChangeTicket(r.Context(), vocab.Agent(a.Name), id, &desk.Change{Assignee: &a.Name}); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/tickets/"+url.PathEscape(id)+"?done=taken", http.StatusSeeOther)
}

func (c *Console) acceptHeld(w http.ResponseWriter, r *http.Request, a *agent) {
	id := r.PathValue("id")
	msg, err := strconv.ParseInt(r.PathValue("message"), 10, 64)
	if err != nil {
		c.fail(w, r, http.StatusNotFound, "No such held message.")
		return
	}
	as := desk.AcceptAs(r.PostFormValue("as"))
	if as != desk.AcceptAsParticipant {
		as = desk.AcceptAsCustomer
	}
	if _, err := c.desk.AcceptHeld(r.Context(), vocab.Agent(a.Name), id, msg, as); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/tickets/"+url.PathEscape(id)+"?done=accepted", http.StatusSeeOther)
}

// presence records that the agent views or writes a reply to the ticket,
// and answers who else does (the page's script asks every few seconds).
func (c *Console) presence(w http.ResponseWriter, r *http.Request, a *agent) {
	activity := r.PostFormValue("activity")
	if activity != "replying" {
		activity = "viewing"
	}
	list, err := store.New(c.pool).SeePresence(r.Context(), r.PathValue("id"), a.Name, activity, presenceFresh)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, presenceLine(list))
}

// presenceLine is "Alice is viewing · Bilal is replying".
func presenceLine(list []*store.Presence) string {
	parts := make([]string, 0, len(list))
	for _, p := range list {
		parts = append(parts, p.Agent+" is "+p.Activity)
	}
	return strings.Join(parts, " · ")
}

func (c *Console) attachment(w http.ResponseWriter, r *http.Request, a *agent) {
	id, err := strconv.ParseInt(r.PathValue("attachment"), 10, 64)
	if err != nil {
		c.fail(w, r, http.StatusNotFound, "No such file.")
		return
	}
	att, content, err := store.New(c.pool).TicketAttachment(r.Context(), r.PathValue("id"), id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if !att.Kept {
		c.fail(w, r, http.StatusGone, "Only the file's name, type and size were kept.")
		return
	}
	h := w.Header()
	h.Set("Content-Type", desk.UploadedType(att.ContentType))
	h.Set("Content-Disposition", api.ContentDisposition(att.Filename))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=0")
	http.ServeContent(w, r, "", att.CreatedAt, bytes.NewReader(content))
}

func (c *Console) savedReplies(w http.ResponseWriter, r *http.Request, a *agent) {
	list, err := c.desk.SavedReplies(r.Context(), a.Agent)
	if err != nil {
		c.internal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "saved", &page{Title: "Saved replies", Agent: a.Agent, Data: list})
}

func (c *Console) addSavedReply(w http.ResponseWriter, r *http.Request, a *agent) {
	_, err := c.desk.AddSavedReply(r.Context(), a.Agent, &desk.SavedReplyParams{Title: r.PostFormValue("title"), Body: r.PostFormValue("body"),
		Team: r.PostFormValue("team")})
	if errors.Is(err, desk.ErrInvalidSavedReply) || errors.Is(err, desk.ErrUnknownTeam) {
		list, _ := c.desk.SavedReplies(r.Context(), a.Agent)
		c.render(w, r, http.StatusUnprocessableEntity, "saved", &page{Title: "Saved replies", Agent: a.Agent, Problem: err.Error(), Data: list})
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/saved-replies", http.StatusSeeOther)
}

func (c *Console) deleteSavedReply(w http.ResponseWriter, r *http.Request, a *agent) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		c.fail(w, r, http.StatusNotFound, "No such saved reply.")
		return
	}
	if err := c.desk.DeleteSavedReply(r.Context(), a.Agent, id); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/saved-replies", http.StatusSeeOther)
}

// failErr shows a use case's refusal in words, and logs what is not one.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	switch e := api.ErrorOf(err); {
	case e.Status >= 500:
		c.internal(w, r, err)
	case e.Status == http.StatusNotFound:
		c.fail(w, r, http.StatusNotFound, "There is no such ticket or message.")
	default:
		// The API's status; the use case's own words, not the API's advice.
		c.fail(w, r, e.Status, fmt.Sprintf("Not done: %v.", err))
	}
}

func (c *Console) internal(w http.ResponseWriter, r *http.Request, err error) {
	if store.Unavailable(err) {
		c.fail(w, r, http.StatusServiceUnavailable, "The database cannot be reached; nothing was changed. Try again.")
		return
	}
	c.log.ErrorContext(r.Context(), "console", slog.String("path", r.URL.Path), slog.Any("error", err))
	c.fail(w, r, http.StatusInternalServerError, "Something went wrong; nothing was changed. The server log says more.")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
