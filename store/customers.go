package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Customer is a person or company whose tickets helpdesk answers.
type Customer struct {
	ID        string // C-0022
	Email     string
	Name      string
	CreatedAt time.Time
}

// InsertCustomerParams are the fields of a new customer.
type InsertCustomerParams struct {
	ID    string
	Email string
	Name  string
}

const customerColumns = `id, email, name, created_at`

func scanCustomer(row pgx.Row) (*Customer, error) {
	var c Customer
	if err := row.Scan(&c.ID, &c.Email, &c.Name, &c.CreatedAt); err != nil {
		return nil, interpretError(err)
	}
	return &c, nil
}

// InsertCustomer adds a customer; an id or email already taken is ErrConflict.
func (s *Store) InsertCustomer(ctx context.Context, p *InsertCustomerParams) (*Customer, error) {
	c, err := scanCustomer(s.db.QueryRow(ctx,
		`INSERT INTO customers (id, email, name) VALUES ($1, $2, $3) RETURNING `+customerColumns,
		p.ID, p.Email, p.Name))
	if err != nil {
		return nil, fmt.Errorf("insert customer %s: %w", p.ID, err)
	}
	return c, nil
}

// GetCustomer returns the customer with the given id, or ErrNotFound.
func (s *Store) GetCustomer(ctx context.Context, id string) (*Customer, error) {
	return one(ctx, s, func(b *Batch, c *Customer) { b.GetCustomer(id, c) })
}

// GetCustomer queues GetCustomer; into gets the customer.
func (b *Batch) GetCustomer(id string, into *Customer) {
	queueRow(b, "get customer", id, scanCustomer, into, `SELECT `+customerColumns+` FROM customers WHERE id = $1`, id)
}

// CustomerOfTicket queues the read of the customer who opened the
// ticket; into gets the customer.
func (b *Batch) CustomerOfTicket(ticketID string, into *Customer) {
	queueRow(b, "customer of", ticketID, scanCustomer, into,
		`SELECT `+customerColumns+` FROM customers WHERE id = (SELECT customer_id FROM tickets WHERE id = $1)`, ticketID)
}

// UpsertCustomer adds the customer, or updates its email and name.
func (s *Store) UpsertCustomer(ctx context.Context, p *InsertCustomerParams) error {
	_, err := s.db.Exec(ctx,
		`INSERT INTO customers (id, email, name) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET email = EXCLUDED.email, name = EXCLUDED.name`,
		p.ID, p.Email, p.Name)
	if err != nil {
		return fmt.Errorf("upsert customer %s: %w", p.ID, interpretError(err))
	}
	return nil
}

// CustomerByEmail returns the customer with this address, in any case, or ErrNotFound.
func (s *Store) CustomerByEmail(ctx context.Context, email string) (*Customer, error) {
	c, err := optional(ctx, s, func(b *Batch, into **Customer) { b.CustomerByEmail(email, into) })
	if err == nil && c == nil {
		err = fmt.Errorf("customer by email: %w", ErrNotFound)
	}
	return c, err
}

// CustomerByEmail queues CustomerByEmail; into gets the customer, nil if none.
func (b *Batch) CustomerByEmail(email string, into **Customer) {
	queueOptionalRow(b, "customer by email", email, scanCustomer, into, `SELECT `+customerColumns+` FROM customers WHERE lower(email) = lower($1)`, email)
}

// InsertCustomerByEmail adds a customer who wrote in without an account,
// numbered from customer_number_seq.
func (s *Store) InsertCustomerByEmail(ctx context.Context, email, name string) (*Customer, error) {
	c, err := scanCustomer(s.db.QueryRow(ctx, `INSERT INTO customers (id, email, name)
		VALUES ('C-' || nextval('customer_number_seq'), $1, $2) RETURNING `+customerColumns, email, name))
	if err != nil {
		return nil, fmt.Errorf("insert customer %s: %w", email, err)
	}
	return c, nil
}

// ListCustomers returns customers by id, a page at a time after afterID.
func (s *Store) ListCustomers(ctx context.Context, afterID string, limit int) ([]*Customer, error) {
	rows, err := s.db.Query(ctx, `SELECT `+customerColumns+` FROM customers WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list customers: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Customer, error) { return scanCustomer(row) })
	if err != nil {
		return nil, fmt.Errorf("list customers: %w", err)
	}
	return list, nil
}

// GetCustomers returns the customers with these ids, by id.
func (s *Store) GetCustomers(ctx context.Context, ids []string) (map[string]*Customer, error) {
	rows, err := s.db.Query(ctx, `SELECT `+customerColumns+` FROM customers WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("get customers: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Customer, error) { return scanCustomer(row) })
	if err != nil {
		return nil, fmt.Errorf("get customers: %w", err)
	}
	out := make(map[string]*Customer, len(list))
	for _, c := range list {
		out[c.ID] = c
	}
	return out, nil
}
