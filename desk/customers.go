package desk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/helpdesk-dev/helpdesk/store"
)

// CreateCustomer adds a customer with the next number (C-100000 and up),
// in a transaction of its own; an address taken already, in any case, is
// ErrCustomerExists.
func (d *Desk) CreateCustomer(ctx context.Context, email, name string) (c *store.Customer, err error) {
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		c, err = d.CreateCustomerTx(ctx, tx, email, name)
		return err
	})
	return c, err
}

// CreateCustomerTx is CreateCustomer in the caller's transaction.
func (d *Desk) CreateCustomerTx(ctx context.Context, tx *store.Tx, email, name string) (*store.Customer, error) {
	st := tx.Store()
	if _, err := st.CustomerByEmail(ctx, email); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrCustomerExists, email)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	c, err := st.InsertCustomerByEmail(ctx, email, strings.TrimSpace(name))
	if errors.Is(err, store.ErrConflict) {
		// Added by someone else since the look: the unique index on the
		// address says so.
		return nil, fmt.Errorf("%w: %s", ErrCustomerExists, email)
	}
	return c, err
}

// newCustomerTx adds the customer a mail comes from, named by its From's
// display name, else by the local part of its address. A copy of the same
// mail that adds the same customer at the same moment conflicts, and the
// filing is run again (FileInbound).
func (d *Desk) newCustomerTx(ctx context.Context, st *store.Store, address, displayName string) (*store.Customer, error) {
	name := displayName
	if name == "" {
		name, _, _ = strings.Cut(address, "@")
	}
	return st.InsertCustomerByEmail(ctx, address, name)
}
