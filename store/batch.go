package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Batch gathers statements, each table's queued by the method in that
// table's file, to send in one round trip: pgx pipelines them, they run in
// order, and the first error stops the rest. Each query is defined once,
// as a Batch method; the Store method of the same name, where there is
// one, sends a batch of that query alone (one, exec).
type Batch struct {
	b    pgx.Batch
	err  error // a statement that could not be queued; Send returns it
	bulk []bulk
	// reads are the queued statements whose answer is only read, never
	// checked: they may go in the trip that commits (Tx.Commit), since no
	// answer of theirs can call for a rollback. (One that fails to scan
	// makes Commit report an error for a transaction that committed: mark
	// only reads whose failure says nothing of the writes, and whose
	// writes are safe to try again.)
	reads map[*pgx.QueuedQuery]bool
}

// bulk is a large value that a batch writes as rows of one chunk each,
// in trips of their own after its statements: the driver copies every
// parameter of a batch into one buffer, twice, and a large mail or file
// must never be copied whole.
type bulk struct {
	sql    string // INSERT … VALUES ($1 key, $2 seq, $3 data) ON CONFLICT DO NOTHING
	key    any
	chunks [][]byte
}

// bulkTrip is how many bytes of chunks go in one trip.
const bulkTrip = 1 << 20

// Add queues other's statements after b's.
func (b *Batch) Add(other *Batch) {
	if other.err != nil {
		b.fail(other.err)
	}
	b.b.QueuedQueries = append(b.b.QueuedQueries, other.b.QueuedQueries...)
	b.bulk = append(b.bulk, other.bulk...)
	for q := range other.reads {
		b.readOnly(q)
	}
}

// answers reports whether a statement queued has an answer to read or
// check.
func (b *Batch) answers() bool {
	for _, q := range b.b.QueuedQueries {
		if q.Fn != nil {
			return true
		}
	}
	return false
}

// checks reports whether a statement queued has an answer to check: one
// that may call for a rollback once it is read, so that the commit cannot
// go in its trip.
func (b *Batch) checks() bool {
	for _, q := range b.b.QueuedQueries {
		if q.Fn != nil && !b.reads[q] {
			return true
		}
	}
	return false
}

// readOnly marks q as a statement whose answer checks nothing (Batch.reads).
func (b *Batch) readOnly(q *pgx.QueuedQuery) {
	if b.reads == nil {
		b.reads = map[*pgx.QueuedQuery]bool{}
	}
	b.reads[q] = true
}

// writeBulk sends the chunks of large values, a few per trip, in the
// transaction tx.
func writeBulk(ctx context.Context, tx pgx.Tx, list []bulk) error {
	for _, w := range list {
		for start := 0; start < len(w.chunks); {
			var trip pgx.Batch
			for size := 0; start < len(w.chunks) && (size == 0 || size+len(w.chunks[start]) <= bulkTrip); start++ {
				trip.Queue(w.sql, w.key, start, w.chunks[start])
				size += len(w.chunks[start])
			}
			if err := batchError(tx.SendBatch(ctx, &trip).Close()); err != nil {
				return err
			}
		}
	}
	return nil
}

// fail records why a statement could not be queued; the first reason wins.
func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Send runs the batch on the store's connection or transaction. Each
// statement's result reaches where its queuing method said; the first
// error is returned. Outside a transaction the statements are one
// implicit transaction: all of them or none; inside one, an error aborts it.
func (s *Store) Send(ctx context.Context, b *Batch) error {
	if tx, ok := s.db.(*Tx); ok {
		return tx.send(ctx, b, false)
	}
	if b.err != nil {
		return b.err
	}
	if len(b.bulk) > 0 {
		return errors.New("store: a large value is written only in a transaction (store.Run)")
	}
	if b.b.Len() == 0 {
		return nil
	}
	return batchError(s.db.SendBatch(ctx, &b.b).Close())
}

// batchError interprets the driver's error of a statement that had no
// method of ours to do it.
func batchError(err error) error {
	var ce *constraintError
	if err == nil || errors.As(err, &ce) {
		return err
	}
	return interpretError(err)
}

// texts queues a query of one text column; into gets its rows.
func (b *Batch) texts(what, sql string, into *[]string, args ...any) {
	b.b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		*into = list
		return nil
	})
}

// queueRows queues a query of rows, which scan reads one by one; got
// receives them all. An error names them as what ("messages of T-500001").
func queueRows[T any](b *Batch, what string, scan func(pgx.Row) (T, error), got func([]T), sql string, args ...any) {
	b.b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		got(list)
		return nil
	})
}

// queueRow queues a query of one row, which scan reads; into gets it. An
// error names the row as what and subject ("get ticket T-500001").
func queueRow[T any](b *Batch, what string, subject any, scan func(pgx.Row) (*T, error), into *T, sql string, args ...any) *pgx.QueuedQuery {
	q := b.b.Queue(sql, args...)
	q.QueryRow(func(row pgx.Row) error {
		v, err := scan(row)
		if err != nil {
			return fmt.Errorf("%s %v: %w", what, subject, err)
		}
		*into = *v
		return nil
	})
	return q
}

// queueOptionalRow is queueRow for a row that may not be there: into
// gets nil then.
func queueOptionalRow[T any](b *Batch, what string, subject any, scan func(pgx.Row) (*T, error), into **T, sql string, args ...any) {
	b.b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		v, err := scan(row)
		switch {
		case errors.Is(err, ErrNotFound):
			*into = nil
		case err != nil:
			return fmt.Errorf("%s %v: %w", what, subject, err)
		default:
			*into = v
		}
		return nil
	})
}

// errBatchedAttachments: a message's attachments name its id, which a
// batch knows only when the message was numbered first (NextMessageID).
var errBatchedAttachments = errors.New("store: a batched message with attachments needs its number from NextMessageID")

// one is the direct form of a batch method that reads into a value: a
// batch of that query alone, sent now.
func one[T any](ctx context.Context, s *Store, queue func(b *Batch, into *T)) (*T, error) {
	var b Batch
	v := new(T)
	queue(&b, v)
	if err := s.Send(ctx, &b); err != nil {
		return nil, err
	}
	return v, nil
}

// optional is one for a batch method whose row may not be there.
func optional[T any](ctx context.Context, s *Store, queue func(b *Batch, into **T)) (*T, error) {
	var b Batch
	var v *T
	queue(&b, &v)
	if err := s.Send(ctx, &b); err != nil {
		return nil, err
	}
	return v, nil
}

// exec is the direct form of a batch method that writes.
func exec(ctx context.Context, s *Store, queue func(b *Batch)) error {
	var b Batch
	queue(&b)
	return s.Send(ctx, &b)
}
