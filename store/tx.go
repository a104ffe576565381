package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is a unit of work: a transaction that costs no round trip of its own.
// BEGIN goes to the database with its first statements, and statements
// queued with Later wait for its next trip (any query, a batch, River's
// insert, or the commit), so that writes whose answer nothing waits for
// ride along with the next read. Every query of the store is defined once,
// as a batch method; a Store over a Tx sends them this way.
//
// The commit goes with the last statements when nothing waits on their
// answers (see Commit), so a unit of work of one trip is one implicit
// transaction, and one that began saves the commit's own trip.
//
// A Tx is used by one goroutine. Commit or Rollback ends it.
type Tx struct {
	pool  *pgxpool.Pool
	conn  *pgxpool.Conn // the transaction's connection, released when it ends
	tx    pgx.Tx        // on conn; nil until the first trip begins it
	later Batch
	done  bool
	// hooks run before the commit, once per key, in the order added.
	hooks    []func(ctx context.Context) error
	hookKeys map[string]bool
	// last is the work that makes the transaction's last query, with the
	// commit behind it (CommitWith).
	last []lastQuery
	// values are what code working in the transaction keeps in it (Value).
	values map[any]any
	// commitSent is set once the commit has gone to the database, with
	// the trip that carries it or on its own (mayHaveCommitted).
	commitSent bool
}

// mayHaveCommitted reports whether the transaction may have committed
// although Commit returned err: the commit went out, and what came back
// is not PostgreSQL's refusal (which skips the commit or is its answer)
// but a read after it that failed, or no answer at all.
func (t *Tx) mayHaveCommitted(err error) bool {
	var pgErr *pgconn.PgError
	return t.commitSent && !errors.As(err, &pgErr) && !errors.Is(err, pgx.ErrTxCommitRollback)
}

// Value returns what the transaction keeps under key, made by make the
// first time it is asked for: state that the code working in a unit of
// work gathers for its commit (the jobs it inserts then).
func (t *Tx) Value(key any, make func() any) any {
	if v, ok := t.values[key]; ok {
		return v
	}
	if t.values == nil {
		t.values = map[any]any{}
	}
	v := make()
	t.values[key] = v
	return v
}

// lastQuery is what CommitWith was given.
type lastQuery struct {
	carries func(sql string) bool
	fn      func(ctx context.Context, tx pgx.Tx) error
}

// Begin returns a unit of work on pool; nothing is sent yet.
func Begin(pool *pgxpool.Pool) *Tx { return &Tx{pool: pool} }

// Run runs fn in a unit of work and commits it; an error from fn, or from
// the commit, rolls it back and is returned.
func Run(ctx context.Context, pool *pgxpool.Pool, fn func(tx *Tx) error) error {
	tx := Begin(pool)
	defer tx.Rollback(context.WithoutCancel(ctx)) // nothing after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Store is the store's queries in this transaction.
func (t *Tx) Store() *Store { return New(t) }

// Later queues statements to go with the transaction's next round trip;
// what they read is there when that trip is back. Their errors are that
// trip's.
func (t *Tx) Later(queue func(b *Batch)) { queue(&t.later) }

// send makes one round trip, if there is anything to send: BEGIN if the
// transaction has not begun, what waits, then more. begin sends BEGIN
// alone when there is nothing else.
func (t *Tx) send(ctx context.Context, more *Batch, begin bool) error {
	if t.done {
		return errors.New("store: the transaction is over")
	}
	for _, b := range []*Batch{&t.later, more} {
		if b != nil && b.err != nil {
			return b.err
		}
	}
	waiting, bulk := t.later.b.QueuedQueries, t.later.bulk
	if more != nil {
		waiting, bulk = append(waiting, more.b.QueuedQueries...), append(bulk, more.bulk...)
	}
	t.later = Batch{}
	if len(waiting) == 0 && len(bulk) == 0 && (t.tx != nil || !begin) {
		return nil
	}
	var b pgx.Batch
	if t.tx == nil {
		b.BeginTx(pgx.TxOptions{})
	}
	b.QueuedQueries = append(b.QueuedQueries, waiting...)
	if t.tx != nil {
		if err := batchError(t.tx.SendBatch(ctx, &b).Close()); err != nil {
			return err
		}
		return writeBulk(ctx, t.tx, bulk)
	}
	conn, err := t.pool.Acquire(ctx)
	if err != nil {
		return interpretError(err)
	}
	br := conn.SendBatch(ctx, &b)
	t.conn, t.tx = conn, br.Tx()
	if err := br.Close(); err != nil {
		return batchError(err)
	}
	if t.tx == nil {
		return errors.New("store: the transaction did not begin")
	}
	return writeBulk(ctx, t.tx, bulk)
}

// commitWithLast sends what waits and the commit in one trip, when that
// can be: when no statement waiting has an answer to check (a check that
// fails must roll back what the trip wrote, and in one trip the commit
// would be done before the check ran; a plain read, Batch.reads, checks
// nothing) and no bulk write waits. A unit of
// work that has not begun sends what waits as one implicit transaction.
// sent is false when the commit needs a trip of its own.
func (t *Tx) commitWithLast(ctx context.Context) (sent bool, err error) {
	if t.later.err != nil {
		return false, t.later.err
	}
	waiting := t.later.b.QueuedQueries
	if len(waiting) == 0 || len(t.later.bulk) > 0 || t.later.checks() {
		return false, nil
	}
	t.later = Batch{}
	var b pgx.Batch
	b.QueuedQueries = waiting
	t.commitSent = true
	if t.tx == nil {
		return true, batchError(t.pool.SendBatch(ctx, &b).Close())
	}
	var rolledBack bool
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		rolledBack = tag.String() == "ROLLBACK"
		return nil
	})
	if err := batchError(t.conn.SendBatch(ctx, &b).Close()); err != nil {
		return true, err
	}
	if rolledBack {
		return true, fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return true, nil
}

// release gives the connection back; the pool closes one left in a transaction.
func (t *Tx) release() {
	if t.conn != nil {
		t.conn.Release()
		t.conn = nil
	}
}

// begun makes sure the transaction has begun and nothing waits.
func (t *Tx) begun(ctx context.Context) (pgx.Tx, error) {
	if err := t.send(ctx, nil, true); err != nil {
		return nil, err
	}
	return t.tx, nil
}

// Flush sends what waits now, beginning the transaction if it has not
// begun.
func (t *Tx) Flush(ctx context.Context) error {
	_, err := t.begun(ctx)
	return err
}

// Pgx is the transaction for code that needs pgx's own (River's
// InsertTx), begun. What waits goes to the database with that code's
// first query, in the same trip, and before it: River's insert costs no
// trip of its own.
func (t *Tx) Pgx(ctx context.Context) (pgx.Tx, error) {
	if t.tx == nil || len(t.later.bulk) > 0 {
		return t.begun(ctx)
	}
	return &carrier{Tx: t.tx, t: t}, nil
}

// carrier is a begun pgx.Tx whose next query takes what waits along.
type carrier struct {
	pgx.Tx
	t *Tx
	// commitBehind, when set, is CommitWith's test of the query that
	// carries the commit; committed is set once that commit is done.
	commitBehind func(sql string) bool
	committed    bool
}

// Query sends what waits, then sql, in one batch, and returns sql's rows
// once what waited has been read (and its answers given). Behind the
// query that commitBehind knows goes COMMIT, in the same batch: should
// anything before it fail, PostgreSQL skips the rest of the batch, COMMIT
// with it, and the transaction is rolled back as after any failed trip.
func (c *carrier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if c.committed {
		// The transaction is over: what follows the query that carried
		// its commit runs on the connection, on its own.
		return c.t.conn.Query(ctx, sql, args...)
	}
	if c.t.done {
		return nil, errors.New("store: the transaction is over")
	}
	if err := c.t.later.err; err != nil {
		return nil, err
	}
	waiting := c.t.later.b.QueuedQueries
	commit := c.commitBehind != nil && c.commitBehind(sql)
	if len(waiting) == 0 && !commit {
		return c.Tx.Query(ctx, sql, args...)
	}
	c.t.later = Batch{}
	var b pgx.Batch
	b.QueuedQueries = waiting
	b.Queue(sql, args...)
	if commit {
		c.commitBehind = nil
		c.t.commitSent = true
		b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
			if tag.String() == "ROLLBACK" {
				return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
			}
			c.committed = true
			return nil
		})
	}
	br := c.Tx.SendBatch(ctx, &b)
	for _, q := range waiting {
		var err error
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			_ = br.Close()
			return nil, batchError(err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow is Query of one row.
func (c *carrier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return firstRow{rows}
}

// Exec is Query, its rows read to the end.
func (c *carrier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	for rows.Next() {
	}
	rows.Close()
	return rows.CommandTag(), rows.Err()
}

// SendBatch sends what waits first, in a trip of its own.
func (c *carrier) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if c.committed {
		return c.t.conn.SendBatch(ctx, b)
	}
	if err := c.t.send(ctx, nil, false); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return c.Tx.SendBatch(ctx, b)
}

// batchRows are the last query's rows of a batch, which ends with them.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error // the batch's, at its end
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err, r.br = r.br.Close(), nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// firstRow is the first row of rows, as pgx.Row.
type firstRow struct{ rows pgx.Rows }

func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// BeforeCommit runs fn in the transaction just before it commits, once
// per key however often it is asked: work that follows from everything the
// transaction did (a ticket's clocks after all its changes) is done once,
// after the last change. What waits is sent first when a statement of it
// has an answer, so fn sees what the transaction's Later reads read; that
// trip would have gone with the commit anyway. An error from fn rolls the
// transaction back.
func (t *Tx) BeforeCommit(key string, fn func(ctx context.Context) error) {
	if t.hookKeys[key] {
		return
	}
	if t.hookKeys == nil {
		t.hookKeys = map[string]bool{}
	}
	t.hookKeys[key] = true
	t.hooks = append(t.hooks, fn)
}

// CommitWith has fn make the transaction's last query at Commit, after
// the BeforeCommit hooks, on a begun pgx.Tx (River's InsertTx): the first
// of fn's queries that carries says yes to goes to the database with what
// waits before it and COMMIT behind it, in one trip, so that a unit of
// work whose last statement is another library's costs that statement no
// trip of its own. Its queries after that one run outside the
// transaction, which is over; Committed tells fn so. The commit rides only
// where commitWithLast's rule allows (no answer waiting to be checked, no
// large value), and only behind a query carries knows: otherwise fn runs
// first and the commit takes its own trip, as it would have. Work given by
// earlier calls runs before, each query in its next trip. Commit returns
// fn's error even once the commit went (the transaction is then over, and
// Rollback does nothing): fn decides, by Committed, whether what failed
// after it is worth the caller's error.
func (t *Tx) CommitWith(carries func(sql string) bool, fn func(ctx context.Context, tx pgx.Tx) error) {
	t.last = append(t.last, lastQuery{carries: carries, fn: fn})
}

// Committed reports whether tx, as CommitWith gave it to its work, has
// committed behind one of that work's queries.
func Committed(tx pgx.Tx) bool {
	c, ok := tx.(*carrier)
	return ok && c.committed
}

// commitBehind runs the work CommitWith was given, the last of it with
// the commit behind its query where it can. committed is false when the
// commit still needs a trip of its own.
func (t *Tx) commitBehind(ctx context.Context) (committed bool, err error) {
	last := t.last
	t.last = nil
	for i, l := range last {
		pgxTx, err := t.Pgx(ctx)
		if err != nil {
			return false, err
		}
		c, _ := pgxTx.(*carrier)
		if c != nil && i == len(last)-1 && !t.later.checks() && len(t.later.bulk) == 0 {
			c.commitBehind = l.carries
		}
		err = l.fn(ctx, pgxTx)
		if c != nil && c.committed {
			t.done = true
			t.release()
			return true, err
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// Commit runs the BeforeCommit hooks, sends what waits and commits. A
// unit of work that never went to the database has nothing to commit.
// After a failed Commit, Rollback ends the transaction and gives its
// connection back (Run does).
func (t *Tx) Commit(ctx context.Context) error {
	for len(t.hooks) > 0 { // a hook may add another
		// A hook reads what waits answered; statements that answer
		// nothing may wait on, for the commit's trip.
		if t.later.answers() {
			if err := t.send(ctx, nil, false); err != nil {
				return err
			}
		}
		hooks := t.hooks
		t.hooks = nil
		for _, h := range hooks {
			if err := h(ctx); err != nil {
				return err
			}
		}
	}
	if len(t.last) > 0 {
		if committed, err := t.commitBehind(ctx); committed || err != nil {
			return err
		}
	}
	sent, err := t.commitWithLast(ctx)
	if sent && err == nil {
		t.done = true
		t.release()
		return nil
	}
	if err != nil {
		return err // Rollback ends the transaction
	}
	if err := t.send(ctx, nil, false); err != nil {
		return err
	}
	t.done = true
	if t.tx == nil {
		return nil
	}
	defer t.release()
	t.commitSent = true
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", interpretError(err))
	}
	return nil
}

// Rollback ends the transaction without its changes; what waits is
// dropped. After Commit it does nothing.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.done {
		return nil
	}
	t.done, t.later = true, Batch{}
	if t.tx == nil {
		t.release()
		return nil
	}
	defer t.release()
	return t.tx.Rollback(ctx)
}

// Exec runs a statement in the transaction, after what waits.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

// Query runs a query in the transaction, after what waits.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Query(ctx, sql, args...)
}

// QueryRow runs a query of one row in the transaction, after what waits.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	tx, err := t.begun(ctx)
	if err != nil {
		return errRow{err}
	}
	return tx.QueryRow(ctx, sql, args...)
}

// SendBatch sends b in the transaction, after what waits, in one trip.
func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := t.begun(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return tx.SendBatch(ctx, b)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
