package store

import (
	"context"
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
// again alone, so that each gets its own answer and none is lost for
// another's error. So a unit must be safe to run twice, even after its
// group committed (a read of Batch.reads that fails after the commit): a
// triage step is, by its result's unique key. And a unit must not wait
// for another unit of the same combiner: a group runs its units one
// after the other, in one goroutine.
type Combiner struct {
	pool   *pgxpool.Pool
	groups int // groups at the database at once
	max    int // units a group takes

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

// combinedDone is a unit's answer: its error, or that it is to lead the
// next group.
type combinedDone struct {
	err  error
	lead bool
}

// NewCombiner returns a combiner on pool that keeps up to groups
// transactions at the database at once, each of up to max units.
func NewCombiner(pool *pgxpool.Pool, groups, max int) *Combiner {
	return &Combiner{pool: pool, groups: max1(groups), max: max1(max)}
}

func max1(n int) int { return max(n, 1) }

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
	select {
	case d := <-u.done:
		if d.lead {
			return c.lead(u)
		}
		return d.err
	case <-ctx.Done():
	}
	// Given up: gone from the queue, or taken by a group already, whose
	// answer then comes.
	c.mu.Lock()
	for i, w := range c.waiting {
		if w == u {
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			c.mu.Unlock()
			return ctx.Err()
		}
	}
	c.mu.Unlock()
	d := <-u.done
	if d.lead {
		return c.lead(u)
	}
	return d.err
}

// lead runs a group of u and the units waiting, then hands the next group
// to the first unit still waiting, or gives up its place at the database.
func (c *Combiner) lead(u *combined) error {
	c.mu.Lock()
	n := min(len(c.waiting), c.max-1)
	group := append([]*combined{u}, c.waiting[:n]...)
	c.waiting = c.waiting[n:]
	c.mu.Unlock()

	errs := c.runGroup(group)
	for i, w := range group[1:] {
		w.done <- combinedDone{err: errs[i+1]}
	}

	c.mu.Lock()
	if len(c.waiting) > 0 {
		next := c.waiting[0]
		c.waiting = c.waiting[1:]
		next.done <- combinedDone{lead: true}
	} else {
		c.running--
	}
	c.mu.Unlock()
	return errs[0]
}

// runGroup runs the group's units in one transaction on the first unit's
// context, and, if that fails, each alone on its own; the answer of each.
func (c *Combiner) runGroup(group []*combined) []error {
	errs := make([]error, len(group))
	var live []int // the units not given up
	for i, u := range group {
		if errs[i] = u.ctx.Err(); errs[i] == nil {
			live = append(live, i)
		}
	}
	if len(live) == 1 {
		u := group[live[0]]
		errs[live[0]] = Run(u.ctx, c.pool, u.fn)
		return errs
	}
	if len(live) == 0 {
		return errs
	}
	err := Run(group[live[0]].ctx, c.pool, func(tx *Tx) error {
		for _, i := range live {
			if err := group[i].fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return errs
	}
	for _, i := range live {
		errs[i] = Run(group[i].ctx, c.pool, group[i].fn)
	}
	return errs
}
