package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Batch gathers statements, each table's queued by the method in that
// table's file, to send in one round trip: pgx pipelines them, they run in
// order, and the first error stops the rest. The intake writes a ticket,
// its first message, its events and the request's answer this way.
type Batch struct {
	b   pgx.Batch
	err error // a statement that could not be queued; Send returns it
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
	if b.err != nil {
		return b.err
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

// queueRow queues a query of one row, which scan reads; into gets it. An
// error names the row as what and subject ("get ticket T-500001").
func queueRow[T any](b *Batch, what string, subject any, scan func(pgx.Row) (*T, error), into *T, sql string, args ...any) {
	b.b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		v, err := scan(row)
		if err != nil {
			return fmt.Errorf("%s %v: %w", what, subject, err)
		}
		*into = *v
		return nil
	})
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

// BeginBatch returns a batch whose first statement begins a transaction:
// InTx sends it, so the transaction's first statements cost no round trip
// of their own.
func BeginBatch() *Batch {
	b := &Batch{}
	b.b.BeginTx(pgx.TxOptions{})
	return b
}

// InTx begins a transaction on pool with first (from BeginBatch) and its
// statements, runs fn in it, and commits; an error from either rolls it
// back and is returned.
func InTx(ctx context.Context, pool *pgxpool.Pool, first *Batch, fn func(tx pgx.Tx) error) error {
	if first.err != nil {
		return first.err
	}
	br := pool.SendBatch(ctx, &first.b)
	tx := br.Tx()
	if tx == nil {
		err := br.Close()
		if err == nil {
			err = errors.New("store: InTx needs a batch from BeginBatch")
		}
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }() // nothing after Commit
	if err := br.Close(); err != nil {
		return batchError(err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
