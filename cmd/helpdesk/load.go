package main

import (
	"context"
	"embed"
	"encoding/csv"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"helpdesk/store"
)

// demoData is the demo's customers and agents, in the binary so that
// `helpdesk load` works from any folder.
//
//go:embed demodata/*.csv
var demoData embed.FS

func cmdLoad(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("load", "load [-reset] [-dir DIR]",
		"Loads customers from customers.csv (id,name,email) and agents from agents.csv\n"+
			"(name,display_name,email,teams, with teams separated by ;): the demo's 50 customers and 3\n"+
			"agents, built into the binary, or your own from -dir. With -reset it first empties every table\n"+
			"(tickets, messages, results, keys, jobs) and numbers tickets from T-500001 again. Without it,\n"+
			"existing rows are updated.", getenv, stdout, stderr)
	db := databaseSetting(fs)
	dir := fs.String("dir", "", "a folder with your own customers.csv and agents.csv; default the demo's")
	reset := fs.Bool("reset", false, "empty every table first")
	if err := fs.parseNoArgs(args); err != nil {
		return err
	}
	source, name := demoSource(*dir)
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	customers, agents, err := loadData(ctx, pool, source, *reset)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "loaded %d customers and %d agents from %s\n", customers, agents, name)
	return nil
}

// demoSource is the folder to read: dir, or the demo's built-in data.
func demoSource(dir string) (fs.FS, string) {
	if dir == "" {
		sub, _ := fs.Sub(demoData, "demodata")
		return sub, "the demo's data"
	}
	return os.DirFS(dir), dir
}

// loadData reads both files before it writes anything, then writes in one
// transaction: a bad file changes nothing.
func loadData(ctx context.Context, pool *pgxpool.Pool, dir fs.FS, reset bool) (customers, agents int, err error) {
	custRows, err := readCSV(dir, "customers.csv", "id", "name", "email")
	if err != nil {
		return 0, 0, err
	}
	agentRows, err := readCSV(dir, "agents.csv", "name", "display_name", "email", "teams")
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
			teams := []string{}
			for _, t := range strings.Split(r[3], ";") {
				if t = strings.TrimSpace(t); t != "" {
					teams = append(teams, t)
				}
			}
			if err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: r[0], DisplayName: r[1], Email: r[2], Teams: teams}); err != nil {
				return usageErrorf("agents.csv: agent %s: %v", r[0], err)
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
func readCSV(dir fs.FS, name string, columns ...string) ([][]string, error) {
	f, err := dir.Open(name)
	if err != nil {
		return nil, usageErrorf("%s: %v", name, err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = len(columns)
	rows, err := r.ReadAll()
	if err != nil {
		return nil, usageErrorf("%s: %v", name, err)
	}
	if len(rows) == 0 || !slices.Equal(rows[0], columns) {
		return nil, usageErrorf("%s: the first line must be %s", name, strings.Join(columns, ","))
	}
	return rows[1:], nil
}
