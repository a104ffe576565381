package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Combiner runs units of work that arrive while others are at the
// database in one transaction together: a group commit. A unit's
// statements and commit cost a few round trips whatever they write, and
// with many units at once those trips and commits, more than the rows,
// are what a unit costs both sides: sixteen triage steps in one
// transaction cost half the CPU of sixteen transactions
// (BenchmarkTriageWritesCombined).
//
// A unit that finds fewer than the combiner's groups at the database
// runs at once, alone, as Run would run it: an idle desk waits for
// nothing. The others wait, and the next group takes every unit waiting,
// up to a bound, in the order they came. Units share a group's fate: if
// any of them fails, or the commit does, each of the group's units runs
// again alone, in its caller's goroutine, so that each gets its own
// answer (and its own panic) and none is lost for another's error. A
// group that may have committed although its commit failed (a read of
// Batch.reads that failed after the commit, or no answer to it) is not run
// again: each of its units gets the error, as a unit alone would, and
// whoever retries finds what committed.
//
// A unit must not wait for another unit of the same combiner: a group
// runs its units one after the other, in one goroutine.
type Combiner struct {
	pool   *pgxpool.Pool
	groups int // groups at the database at once
	size   int // units a group takes

	mu      sync.Mutex
	running int
	waiting []*combined
}

// combined is a unit of work waiting in a combiner.
type combined struct {
	ctx  context.Context
	fn   func(tx *Tx) error
	done chan combinedDone
}

// combinedDone is what becomes of a unit that waited: its answer, or
// that it is to lead the next group, or to run again alone.
type combinedDone struct {
	err   error
	lead  bool
	alone bool
}

// NewCombiner returns a combiner on pool that keeps up to groups
// transactions at the database at once, each of up to size units.
func NewCombiner(pool *pgxpool.Pool, groups, size int) *Combiner {
	return &Combiner{pool: pool, groups: max(groups, 1), size: max(size, 1)}
}

// Run runs fn in a unit of work, alone or with others (Combiner), and
// commits it; it returns fn's error or the commit's. A unit given up
// (ctx done) before its group took it returns ctx's error, and fn does
// not run.
func (c *Combiner) Run(ctx context.Context, fn func(tx *Tx) error) error {
	u := &combined{ctx: ctx, fn: fn, done: make(chan combinedDone, 1)}
	c.mu.Lock()
	if c.running < c.groups {
		c.running++
		c.mu.Unlock()
		return c.lead(u)
	}
	c.waiting = append(c.waiting, u)
	c.mu.Unlock()
	var d combinedDone
	select {
	case d = <-u.done:
	case <-ctx.Done():
		// Given up: gone from the queue, or taken by a group already,
		// whose answer then comes.
		if c.leave(u) {
			return ctx.Err()
		}
		d = <-u.done
	}
	switch {
	case d.lead:
		return c.lead(u)
	case d.alone:
		// In the unit's own goroutine: a panic of fn is its caller's.
		return Run(u.ctx, c.pool, u.fn)
	}
	return d.err
}

// Waiting is how many units wait for a group: what a test waits on
// instead of a clock.
func (c *Combiner) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// leave takes u out of the queue; false when a group took it first.
func (c *Combiner) leave(u *combined) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range c.waiting {
		if w == u {
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// lead runs a group of u and the units waiting, answers them, then hands
// the next group to the first unit still waiting, or gives up its place
// at the database; the last even when u's function panics.
func (c *Combiner) lead(u *combined) error {
	c.mu.Lock()
	n := min(len(c.waiting), c.size-1)
	group := append([]*combined{u}, c.waiting[:n]...)
	clear(c.waiting[:n]) // the queue's array keeps no unit it has let go
	c.waiting = c.waiting[n:]
	c.mu.Unlock()
	defer c.handOff()

	errs, alone := c.runGroup(group)
	for i, w := range group[1:] {
		w.done <- combinedDone{err: errs[i+1], alone: alone && errs[i+1] == nil}
	}
	if alone && errs[0] == nil {
		return Run(u.ctx, c.pool, u.fn)
	}
	return errs[0]
}

// handOff gives the place at the database that a group held to the first
// unit waiting, or back.
func (c *Combiner) handOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiting) == 0 {
		c.running--
		return
	}
	next := c.waiting[0]
	c.waiting[0] = nil
	c.waiting = c.waiting[1:]
	next.done <- combinedDone{lead: true}
}

// runGroup runs the group's units that were not given up in one
// transaction, on the first one's context. errs holds the given-up
// units' errors, and every unit's when the group may have committed
// although its commit failed; alone says that the others are to run
// again alone, each on its own: the group rolled back, or only one unit
// was left in it, which needs no group.
func (c *Combiner) runGroup(group []*combined) (errs []error, alone bool) {
	errs = make([]error, len(group))
	var live []*combined
	for i, u := range group {
		if errs[i] = u.ctx.Err(); errs[i] == nil {
			live = append(live, u)
		}
	}
	if len(live) <= 1 {
		return errs, len(live) == 1
	}
	ctx := live[0].ctx
	tx := Begin(c.pool)
	defer tx.Rollback(context.WithoutCancel(ctx)) // nothing after Commit
	for _, u := range live {
		if err := runUnit(tx, u.fn); err != nil {
			return errs, true
		}
	}
	err := tx.Commit(ctx)
	if err == nil || !tx.mayHaveCommitted(err) {
		return errs, err != nil
	}
	// What the group wrote may be there: run again, it would be written
	// twice. Each unit is told, as a unit alone would be.
	for i := range group {
		if errs[i] == nil {
			errs[i] = fmt.Errorf("store: the commit of a group of %d: %w", len(live), err)
		}
	}
	return errs, false
}

// runUnit runs a unit's function in a group's transaction; a panic fails
// the group, and the unit, run again alone, panics in its own goroutine.
func runUnit(tx *Tx, fn func(tx *Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: a unit of a group panicked: %v", p)
		}
	}()
	return fn(tx)
}
