package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/store"
)

func cmdLoad(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("load", "load [-reset] [-dir testdata/demo]",
		"Loads the demo's customers (C-0001 … C-0050) and agents from customers.csv and agents.csv.\n"+
			"With -reset it first empties every table (tickets, messages, results, keys, jobs) and\n"+
			"numbers tickets from T-500001 again. Without it, existing rows are updated.", getenv, stderr)
	db := databaseSetting(fs)
	dir := fs.String("dir", filepath.Join("testdata", "demo"), "folder with customers.csv and agents.csv")
	reset := fs.Bool("reset", false, "empty every table first")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	customers, agents, err := loadDemoData(ctx, pool, *dir, *reset)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "loaded %d customers and %d agents from %s\n", customers, agents, *dir)
	return nil
}

// loadDemoData reads both files before it writes anything, then writes in
// one transaction: a bad file changes nothing.
func loadDemoData(ctx context.Context, pool *pgxpool.Pool, dir string, reset bool) (customers, agents int, err error) {
	custRows, err := readCSV(filepath.Join(dir, "customers.csv"), "id", "name", "email")
	if err != nil {
		return 0, 0, err
	}
	agentRows, err := readCSV(filepath.Join(dir, "agents.csv"), "name", "display_name", "email")
	if err != nil {
		return 0, 0, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		st := store.New(tx)
		if reset {
			if err := st.Reset(ctx); err != nil {
				return err
			}
		}
		for _, r := range custRows {
			if err := st.UpsertCustomer(ctx, &store.InsertCustomerParams{ID: r[0], Name: r[1], Email: r[2]}); err != nil {
				return err
			}
		}
		for _, r := range agentRows {
			if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: r[0], DisplayName: r[1], Email: r[2]}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return len(custRows), len(agentRows), nil
}

// readCSV reads a file whose header is exactly the given columns.
func readCSV(path string, columns ...string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("%v (run from the repository's root or pass -dir)", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = len(columns)
	rows, err := r.ReadAll()
	if err != nil {
		return nil, usageErrorf("%s: %v", path, err)
	}
	if len(rows) == 0 || !slices.Equal(rows[0], columns) {
		return nil, usageErrorf("%s: the first line must be %v", path, columns)
	}
	return rows[1:], nil
}
