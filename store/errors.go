package store

import (
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrNotFound is returned when a row asked for by its key does not exist.
	ErrNotFound = errors.New("not found")

	// ErrConflict is returned when a write breaks a unique or foreign key
	// constraint: the row exists already, or what it points to does not.
	ErrConflict = errors.New("conflict")
)

// interpretError maps the driver's errors onto the store's sentinels, once,
// so callers test with errors.Is and never look at SQLSTATE codes.
func interpretError(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505", "23503": // unique_violation, foreign_key_violation
			return &constraintError{constraint: pgErr.ConstraintName, err: err}
		}
	}
	return err
}

// Unavailable reports whether err says PostgreSQL could not be reached or
// the connection broke, rather than that it refused what was asked: the
// same request may succeed once it is back.
func Unavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF)
}

// BadContent tells an error that PostgreSQL raised about the data itself
// (class 22, data exception: a NUL, invalid UTF-8, a value out of range;
// class 23 other than a unique key, which a retry resolves) from a fault
// of the database or the machine, which may pass.
func BadContent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	class := pgErr.Code[:2]
	return class == "22" || (class == "23" && pgErr.Code != "23505")
}

// constraintError keeps the driver's message and the constraint's name while
// matching ErrConflict.
type constraintError struct {
	constraint string
	err        error
}

func (e *constraintError) Error() string { return e.err.Error() }
func (e *constraintError) Unwrap() error { return e.err }

func (e *constraintError) Is(target error) bool {
	// A ticket's customer that is not there: the same error whether or not
	// the insert's row was read back (InsertTicket).
	// A step's result that another delivery of its job saved (InsertAIRun).
	// An Idempotency-Key an earlier request claimed (ClaimIdempotencyKey).
	return target == ErrConflict || (target == ErrUnknownCustomer && e.constraint == "tickets_customer_id_fkey") ||
		(target == ErrStepSaved && e.constraint == "ai_runs_one_per_job_task") ||
		(target == ErrKeyTaken && e.constraint == "idempotency_keys_actor_key")
}
