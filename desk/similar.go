package desk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vectors"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Similarity finds the tickets whose embeddings are nearest a vector. The
// one in use keeps a copy of every ticket's vector in memory
// (vectors.Index), refreshed from the store; a pgvector query could take
// its place behind this interface.
type Similarity interface {
	Similar(ctx context.Context, vec []float32, k int, minScore float32, keep func(ticketID string, m vectors.Meta) bool) ([]vectors.Hit, error)
	// SimilarOfCustomer is Similar among one customer's tickets opened
	// since then that keep accepts, the newest (by when they were opened)
	// up to newest of them, each scored: the duplicate search, whose cost
	// then follows what the customer opened lately, up to newest, not
	// what the desk has.
	SimilarOfCustomer(ctx context.Context, customerID string, vec []float32, k int, minScore float32, newest int, since time.Time,
		keep func(ticketID string, m vectors.Meta) bool) ([]vectors.Hit, error)
}

// ErrNotEmbedded is a ticket triage has not embedded yet.
var ErrNotEmbedded = errors.New("the ticket has no embedding yet: triage writes it")

// memorySimilarity is vectors.Index over the tickets' vectors, brought up to
// date before each search: what changed since it last looked is read
// again, the vectors only of the tickets that did. Each ticket names the
// transaction that last changed it; each look goes back to the horizon of
// the last one (the oldest transaction then running, store.ChangeHorizon),
// so a transaction that commits after a later one is still seen. A sweep
// of the embedded tickets' ids every sweepEvery takes out those deleted or
// whose vector was taken away, which no change reports, without holding up
// the searches meanwhile; the vectors are read in full only at the start.
type memorySimilarity struct {
	pool *pgxpool.Pool

	syncMu     sync.Mutex  // one refresh at a time
	readingAll atomic.Bool // a full read or a sweep runs: searches take the index as it is meanwhile

	mu        sync.Mutex // guards the fields below
	index     *vectors.Index
	horizon   int64            // the next look reads the changes of this transaction and later ones
	recent    map[string]int64 // the transaction of each ticket seen at or past the horizon
	swept     time.Time        // when the index was last read in full or swept
	refreshed time.Time        // when a refresh last began that brought it up to date
	// behind are the customers whose last duplicate search found a change
	// of theirs not in the index, and when (currentFor).
	behind map[string]time.Time
}

const (
	// sweepEvery is how often the index is swept (sweep): a read of every
	// embedded ticket's id, a few MiB at a million, where a full read of
	// their vectors was 1.5 GiB.
	sweepEvery = 10 * time.Minute
	// syncPage is how many tickets one read takes: a page of 384-float
	// vectors is a few MiB.
	syncPage = 2000
	// behindFor is how long a customer whose changes the index lacked goes
	// straight to a refresh (currentFor), and maxBehind how many such
	// customers are kept in mind: a customer writing many tickets at once
	// (a machine, a flood) would find new changes of theirs each time,
	// and the read of them, which follows their tickets in the window,
	// would only add to the refresh.
	behindFor = time.Second
	maxBehind = 1024
	// maxCustomerCheck is how many of a customer's newest tickets in the
	// window currentFor reads the changes of: a customer with more goes
	// to a refresh, so that the read costs the same whatever the customer
	// opened.
	maxCustomerCheck = 64
)

func newMemorySimilarity(pool *pgxpool.Pool) *memorySimilarity { return &memorySimilarity{pool: pool} }

// current returns the index up to date with every change committed
// before the call, except while a full read or a sweep runs, when the
// index as it is serves, and for a caller that accepts an index as old as
// allowStale says (a draft's examples: solved tickets a second old are
// as good, and one refresh a second replaces one per ticket triaged).
func (s *memorySimilarity) current(ctx context.Context) (*vectors.Index, error) {
	called := time.Now()
	s.mu.Lock()
	ix, refreshed := s.index, s.refreshed
	s.mu.Unlock()
	if ix != nil && s.readingAll.Load() {
		return ix, nil
	}
	if stale, ok := ctx.Value(staleKey{}).(time.Duration); ok && ix != nil && time.Since(refreshed) < stale {
		return ix, nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	ix, swept, refreshed := s.index, s.swept, s.refreshed
	s.mu.Unlock()
	// A refresh that began after this call saw every change committed
	// before it: the searches that waited for it need no refresh of their own.
	if ix != nil && refreshed.After(called) {
		return ix, nil
	}
	if ix == nil {
		return s.rebuild(ctx)
	}
	start := time.Now()
	if err := s.refresh(ctx, ix); err != nil {
		return ix, err
	}
	s.mu.Lock()
	s.refreshed = start
	s.mu.Unlock()
	if time.Since(swept) > sweepEvery {
		if err := s.sweep(ctx, ix); err != nil {
			return ix, err
		}
	}
	return ix, nil
}

// currentFor returns the index up to date with every change committed
// before the call to the customer's tickets opened at or after opened, as
// current does for every ticket, and as it is when none of those changed
// since it was: a read of which of them changed at or past the horizon,
// and by which transaction, without vectors, costs a fraction of a
// refresh, which then runs only when one of those changes is not in the
// index yet (a customer who wrote again a moment ago), or when the
// customer has more tickets in the window than the read looks at.
//
// The index holds every change by a transaction before its horizon (each
// refresh reads all those committed at or past the last horizon, and its
// own horizon is the oldest transaction running then), and of those at or
// past it the ones recent names. A change to the customer's tickets
// committed before the call is in the read, which begins after it; if
// each one read is one of those, the index is current for them.
func (s *memorySimilarity) currentFor(ctx context.Context, customerID string, opened time.Time) (*vectors.Index, error) {
	s.mu.Lock()
	ix, since, behind := s.index, s.horizon, s.behind[customerID]
	s.mu.Unlock()
	if ix == nil || s.readingAll.Load() || time.Since(behind) < behindFor {
		return s.current(ctx)
	}
	changes, whole, err := store.New(s.pool).CustomerChangesSince(ctx, customerID, opened, since, maxCustomerCheck)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	inIndex := whole && s.index == ix
	for _, c := range changes {
		if c.ChangedBy >= s.horizon && s.recent[c.ID] != c.ChangedBy {
			inIndex = false
			break
		}
	}
	if !inIndex {
		if s.behind == nil || len(s.behind) >= maxBehind {
			s.behind = map[string]time.Time{}
		}
		s.behind[customerID] = time.Now()
	}
	s.mu.Unlock()
	if inIndex {
		return ix, nil
	}
	return s.current(ctx)
}

// sweep takes out of ix the tickets that are no longer embedded: deleted,
// or their vector taken away. It runs just after a refresh, under syncMu,
// so ix holds only tickets committed before its read; one that is not in
// the read was deleted or taken away since, and a ticket embedded since is
// not in ix yet (the next refresh brings it).
func (s *memorySimilarity) sweep(ctx context.Context, ix *vectors.Index) error {
	s.readingAll.Store(true)
	defer s.readingAll.Store(false)
	started := time.Now()
	ids, err := store.New(s.pool).EmbeddedIDs(ctx)
	if err != nil {
		return err
	}
	embedded := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		embedded[id] = struct{}{}
	}
	ix.Retain(func(id string) bool { _, ok := embedded[id]; return ok })
	s.mu.Lock()
	s.swept = started
	s.mu.Unlock()
	return nil
}

type staleKey struct{}

// allowStale lets the searches of ctx use an index refreshed up to d ago.
func allowStale(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, staleKey{}, d)
}

// triageStaleness is how old an index triage's searches accept.
const triageStaleness = time.Second

// rebuild reads every embedded ticket's vector into a new index, and swaps
// it in.
func (s *memorySimilarity) rebuild(ctx context.Context) (*vectors.Index, error) {
	s.readingAll.Store(true)
	defer s.readingAll.Store(false)
	started := time.Now()
	st := store.New(s.pool)
	// Every change the pages below miss is by a transaction at or past
	// this: the next refresh reads it.
	horizon, err := st.ChangeHorizon(ctx)
	if err != nil {
		return nil, err
	}
	var (
		ix      *vectors.Index
		recent  = map[string]int64{}
		afterID string
	)
	for {
		rows, err := st.EmbeddedVectors(ctx, afterID, syncPage)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if ix == nil {
				ix = vectors.New(len(r.Embedding))
			}
			put(ix, &r)
			recent[r.ID] = r.ChangedBy
		}
		if len(rows) < syncPage {
			break
		}
		afterID = rows[len(rows)-1].ID
	}
	if ix == nil {
		// No vector yet: the next search reads again, from the start.
		return nil, nil
	}
	prune(recent, horizon)
	s.mu.Lock()
	s.index, s.horizon, s.recent, s.swept, s.refreshed = ix, horizon, recent, started, started
	s.mu.Unlock()
	return ix, nil
}

// refresh applies to ix what changed since the last look, in one read:
// the tickets changed by a transaction at or past the last horizon, with
// their vectors, but for those seen already as that transaction left them.
func (s *memorySimilarity) refresh(ctx context.Context, ix *vectors.Index) error {
	s.mu.Lock()
	since := s.horizon
	seen := make([]store.TicketChange, 0, len(s.recent))
	for id, by := range s.recent {
		seen = append(seen, store.TicketChange{ID: id, ChangedBy: by})
	}
	s.mu.Unlock()
	rows, next, err := store.New(s.pool).VectorsChangedSince(ctx, since, seen)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range rows {
		put(ix, &rows[i])
		s.recent[rows[i].ID] = rows[i].ChangedBy
	}
	// A refresh that fails keeps the old horizon: the next one reads again.
	s.horizon = max(s.horizon, next)
	prune(s.recent, s.horizon)
	return nil
}

// put brings a ticket's vector and what searches filter on into ix.
func put(ix *vectors.Index, r *store.TicketVector) {
	ix.Put(r.ID, r.Embedding, vectors.Meta{Status: string(r.Status), Team: r.Team, CustomerID: r.CustomerID, Merged: r.Merged,
		Opened: r.CreatedAt})
}

// prune forgets the tickets changed before the horizon: no refresh reads
// them again.
func prune(recent map[string]int64, horizon int64) {
	for id, by := range recent {
		if by < horizon {
			delete(recent, id)
		}
	}
}

func (s *memorySimilarity) Similar(ctx context.Context, vec []float32, k int, minScore float32, keep func(string, vectors.Meta) bool) ([]vectors.Hit, error) {
	return s.search(ctx, vec, s.current, func(ix *vectors.Index) []vectors.Hit { return ix.Search(vec, k, minScore, keep) })
}

// SimilarOfCustomer searches an index current for the customer's tickets
// opened since then (currentFor): a desk of many customers refreshes it
// for a duplicate search only when the customer's own tickets changed.
func (s *memorySimilarity) SimilarOfCustomer(ctx context.Context, customerID string, vec []float32, k int, minScore float32, newest int, since time.Time,
	keep func(string, vectors.Meta) bool) ([]vectors.Hit, error) {
	current := func(ctx context.Context) (*vectors.Index, error) { return s.currentFor(ctx, customerID, since) }
	return s.search(ctx, vec, current, func(ix *vectors.Index) []vectors.Hit {
		return ix.SearchCustomer(vec, customerID, k, minScore, newest, since, keep)
	})
}

// search runs find over the index that current brings up to date;
// nothing is found before the first vector, or for a vector of another
// length.
func (s *memorySimilarity) search(ctx context.Context, vec []float32, current func(context.Context) (*vectors.Index, error),
	find func(*vectors.Index) []vectors.Hit) ([]vectors.Hit, error) {
	ix, err := current(ctx)
	if err != nil {
		return nil, fmt.Errorf("similar tickets: %w", err)
	}
	if ix == nil || len(vec) != ix.Dims() {
		return nil, nil
	}
	return find(ix), nil
}

// SimilarTicket is a ticket like another, and how alike.
type SimilarTicket struct {
	TicketID string       `json:"ticket_id"`
	Score    float32      `json:"score"`
	Subject  string       `json:"subject"`
	Status   vocab.Status `json:"status"`
	Team     *string      `json:"team"`
	SolvedAt *time.Time   `json:"solved_at"`
}

// SimilarTickets are the tickets most like ticketID by their embeddings,
// best first: solved ones (status "solved", the default), closed ones,
// or any; the ticket itself and merged tickets left out.
func (d *Desk) SimilarTickets(ctx context.Context, ticketID, status string, limit int) ([]SimilarTicket, error) {
	st := store.New(d.pool)
	vec, err := st.TicketEmbedding(ctx, ticketID)
	if err != nil {
		return nil, err
	}
	if vec == nil {
		return nil, fmt.Errorf("ticket %s: %w", ticketID, ErrNotEmbedded)
	}
	keep := func(id string, m vectors.Meta) bool {
		if id == ticketID || m.Merged {
			return false
		}
		switch status {
		case "any":
			return true
		case "closed":
			return m.Status == string(vocab.StatusClosed)
		}
		return m.Status == string(vocab.StatusSolved)
	}
	hits, err := d.similarity.Similar(ctx, vec, limit, -1, keep)
	if err != nil || len(hits) == 0 {
		return []SimilarTicket{}, err
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	summaries, err := st.TicketSummaries(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]SimilarTicket, 0, len(hits))
	for _, h := range hits {
		if s := summaries[h.ID]; s != nil {
			out = append(out, SimilarTicket{TicketID: h.ID, Score: h.Score, Subject: s.Subject, Status: s.Status, Team: s.Team, SolvedAt: s.SolvedAt})
		}
	}
	return out, nil
}

// DraftExamples are how we answered the solved tickets of the team most
// like this one (up to DraftExamples of them, each at least
// SimilarMinScore alike), for the draft to draw on, and their ids. Only
// what the customer of each saw is used, the subject, their first message
// and the agents' last reply, with that customer's name and address taken
// out: no note, no held mail, nothing else of theirs.
func (d *Desk) DraftExamples(ctx context.Context, ticketID string, vec []float32, team string) ([]provider.Example, []string, error) {
	n := d.config.DraftExamples
	if n <= 0 || vec == nil {
		return nil, nil, nil
	}
	hits, err := d.similarity.Similar(allowStale(ctx, triageStaleness), vec, n, float32(d.config.SimilarMinScore), func(id string, m vectors.Meta) bool {
		return id != ticketID && !m.Merged && (m.Status == string(vocab.StatusSolved) || m.Status == string(vocab.StatusClosed)) &&
			(team == "" || m.Team == team)
	})
	if err != nil || len(hits) == 0 {
		return nil, nil, err
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	found, err := store.New(d.pool).Examples(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var examples []provider.Example
	var sources []string
	for _, h := range hits {
		e := found[h.ID]
		if e == nil {
			continue // no answer of ours to draw on
		}
		redact := redactor(e.CustomerName, e.CustomerEmail)
		ex := provider.Example{Subject: redact.Replace(e.Subject), Answer: redact.Replace(e.Answer)}
		if !d.config.OmitExampleQuestions {
			ex.Question = redact.Replace(e.Question)
		}
		examples = append(examples, ex)
		sources = append(sources, h.ID)
	}
	return examples, sources, nil
}

// redactor takes a customer's name and address out of a text: the
// address, its local part, the full name and each of its words of three
// letters or more, the longest first.
func redactor(name, email string) *strings.Replacer {
	var pairs []string
	add := func(s string) {
		if len([]rune(s)) >= 3 {
			pairs = append(pairs, s, "the customer")
		}
	}
	add(email)
	if local, _, ok := strings.Cut(email, "@"); ok {
		add(local)
	}
	add(name)
	for _, w := range strings.Fields(name) {
		add(strings.Trim(w, ".,"))
	}
	return strings.NewReplacer(pairs...)
}

// duplicate is a ticket's possible duplicate, found before the transaction
// that saves its embedding: the search may read the store, and must not
// wait for a connection while that transaction holds one.
type duplicate struct {
	of, was string // the ticket found ("" for none), and the one named before
}

// duplicateCandidates is how many of a customer's open tickets, the
// newest, a ticket's duplicate search compares it with. A duplicate
// follows its first ticket closely (a customer writes again when no
// answer came), and a customer with more open tickets within the window
// than this is a machine or a flood: without a bound, each of its tickets
// would read every earlier one's vector (1.5 KiB each), so that a stranger
// sending n mails from one address costs the triage n² of them.
const duplicateCandidates = 200

// possibleDuplicate finds the open or pending ticket the same customer
// opened before this one, within DuplicateWindow, about the same thing (at
// least DuplicateMinScore alike), for the embedding of r: among that
// customer's duplicateCandidates newest such tickets, each scored, so that
// a ticket costs the search what its customer has sent, up to that
// bound, and the search misses nothing an exact scan of those would find.
func (d *Desk) possibleDuplicate(ctx context.Context, r *TriageResult) (duplicate, error) {
	vec := r.Embedding
	if d.config.DuplicateWindow <= 0 || vec == nil {
		return duplicate{}, nil
	}
	var t *store.Ticket
	if r.Input != nil && r.Input.row.ID == r.TicketID {
		t = &r.Input.row
	} else {
		var err error
		if t, err = store.New(d.pool).GetTicket(ctx, r.TicketID); err != nil {
			return duplicate{}, err
		}
	}
	since := t.CreatedAt.Add(-d.config.DuplicateWindow)
	// Fresh: a customer's second mail often comes seconds after the first.
	hits, err := d.similarity.SimilarOfCustomer(ctx, t.CustomerID, vec, 1, float32(d.config.DuplicateMinScore), duplicateCandidates, since,
		func(id string, m vectors.Meta) bool {
			return id != t.ID && !m.Merged &&
				(m.Status == string(vocab.StatusOpen) || m.Status == string(vocab.StatusPending)) &&
				!m.Opened.After(t.CreatedAt)
		})
	if err != nil || len(hits) == 0 {
		return duplicate{was: deref(t.PossibleDuplicateOf)}, err
	}
	return duplicate{of: hits[0].ID, was: deref(t.PossibleDuplicateOf)}, nil
}

// flagDuplicateTx writes, in the transaction of its embedding, the event
// that names the ticket's possible duplicate, and returns the ticket to
// name with the embedding ("" for none new). Nothing is merged: an agent
// decides (MergeTicket).
func (d *Desk) flagDuplicateTx(tx *store.Tx, ticketID string, dup duplicate) string {
	if dup.of == "" || dup.of == dup.was {
		return ""
	}
	event(tx, ticketID, vocab.System, "possible_duplicate", dup.was, dup.of)
	return dup.of
}
