package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// withAda gives the test a schema of its own holding Ada, customer
// C-0001, whom most store tests write tickets for.
func withAda(tb testing.TB) (*pgxpool.Pool, *store.Store) {
	tb.Helper()
	pool := storetest.NewPool(tb)
	st := store.New(pool)
	addAda(tb, st)
	return pool, st
}

// addAda writes Ada, customer C-0001.
func addAda(tb testing.TB, st *store.Store) {
	tb.Helper()
	if _, err := st.InsertCustomer(context.Background(), &store.InsertCustomerParams{ID: "C-0001", Email: "ada@example.com", Name: "Ada"}); err != nil {
		tb.Fatal(err)
	}
}
