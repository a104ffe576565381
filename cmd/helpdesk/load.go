package main

import (
	"cmp"
	"context"
	"embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
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
	source, name, err := demoSource(*dir)
	if err != nil {
		return err
	}
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
func demoSource(dir string) (fs.FS, string, error) {
	if dir == "" {
		sub, _ := fs.Sub(demoData, "demodata")
		return sub, "the demo's data", nil
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, "", usageErrorf("-dir %s: no folder there (want one with customers.csv and agents.csv)", dir)
	}
	return os.DirFS(dir), dir, nil
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
	if err := checkRows(custRows, agentRows); err != nil {
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
			err := st.UpsertCustomer(ctx, &store.InsertCustomerParams{ID: r[0], Name: r[1], Email: r[2]})
			if errors.Is(err, store.ErrConflict) {
				return usageErrorf("customers.csv: customer %s: %s is another customer's address already", r[0], r[2])
			}
			if err != nil {
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
			err := st.UpsertAgent(ctx, &store.UpsertAgentParams{Name: r[0], DisplayName: r[1], Email: r[2], Teams: teams})
			if errors.Is(err, store.ErrConflict) {
				return usageErrorf("agents.csv: agent %s: %s is another agent's address already", r[0], r[2])
			}
			if err != nil {
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

// checkRows checks every value before the database sees any: the line and
// the value wrong, and what it should look like. It writes each address
// back as mail.ParseAddress reads it.
// A value given twice (an id, a name, an address) is refused, where the
// second would silently overwrite the first.
func checkRows(customers, agents [][]string) error {
	// seen remembers on which line of a file each value was first given.
	seen := map[string]int{}
	twice := func(file, what, value string, line int) error {
		key := file + "\x00" + what + "\x00" + strings.ToLower(value)
		if first, ok := seen[key]; ok {
			return usageErrorf("%s line %d: %s %q is on line %d too", file, line, what, value, first)
		}
		seen[key] = line
		return nil
	}
	for i, r := range customers {
		line := i + 2 // after the header
		if !vocab.CustomerIDPattern.MatchString(r[0]) {
			return usageErrorf("customers.csv line %d: id %q: want C- and at least four digits, such as C-0007", line, r[0])
		}
		if err := desk.CheckName(r[1]); err != nil {
			return usageErrorf("customers.csv line %d: %s: %v", line, r[0], err)
		}
		a, err := mail.ParseAddress(r[2])
		if err != nil || a.Name != "" {
			return usageErrorf("customers.csv line %d: email %q: want one address such as ada@example.com", line, r[2])
		}
		r[2] = a.Address // as mail from it names it: an IDN domain in its ASCII form
		if err := cmp.Or(twice("customers.csv", "id", r[0], line), twice("customers.csv", "email", r[2], line)); err != nil {
			return err
		}
	}
	for i, r := range agents {
		line := i + 2
		if !vocab.AgentNamePattern.MatchString(r[0]) {
			return usageErrorf("agents.csv line %d: name %q: lower case letters, digits, . _ - (up to 64), such as alice", line, r[0])
		}
		if r[1] != "" {
			if err := desk.CheckName(r[1]); err != nil {
				return usageErrorf("agents.csv line %d: display_name of %s: %v", line, r[0], err)
			}
		}
		a, err := mail.ParseAddress(r[2])
		if err != nil || a.Name != "" {
			return usageErrorf("agents.csv line %d: email %q: want one address such as alice@support.example.com", line, r[2])
		}
		r[2] = a.Address
		if err := cmp.Or(twice("agents.csv", "name", r[0], line), twice("agents.csv", "email", r[2], line)); err != nil {
			return err
		}
		for _, t := range strings.Split(r[3], ";") {
			if t = strings.TrimSpace(t); t != "" && !desk.TeamName.MatchString(t) {
				return usageErrorf("agents.csv line %d: team %q: lower case letters, digits, _ - (teams separated by ;), such as billing;shipping", line, t)
			}
		}
	}
	return nil
}
