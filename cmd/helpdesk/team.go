package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// nameAmongFlags takes a subcommand's NAME from after the flags, or from
// between them (Go's flag package stops at the first argument that is not
// a flag), when it did not come first; the flags after it are parsed too.
func (fs *flagSet) nameAmongFlags(name string) (string, error) {
	for name == "" && fs.NArg() > 0 && !strings.HasPrefix(fs.Arg(0), "-") {
		name = fs.Arg(0)
		if err := fs.parse(fs.Args()[1:]); err != nil {
			return "", err
		}
	}
	return name, nil
}

// subcommand splits `CMD SUB [NAME] [flags]`: the subcommand, a leading
// positional name if the subcommand takes one, and the rest for the flags
// (Go's flag package stops at the first argument that is not a flag).
func subcommand(args []string, named ...string) (sub, name string, rest []string) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return "", "", args
	}
	sub, rest = args[0], args[1:]
	for _, n := range named {
		if sub == n && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			return sub, rest[0], rest[1:]
		}
	}
	return sub, "", rest
}

func cmdAgent(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("agent", "agent add NAME -email ADDR -team TEAM[,TEAM…] [-name \"Display Name\"] [-signature TEXT] [-admin] | agent list | agent disable NAME",
		"add       adds an agent, or updates one: its address, display name and teams (triage assigns\n"+
			"          each ticket to the least busy active agent of its team); -admin lets it manage\n"+
			"          webhooks, suppressions, agents and River UI's jobs and queues (-admin=false takes it back)\n"+
			"list      lists the agents with their teams\n"+
			"disable   stops an agent: its API keys answer 401 within a second, and it is assigned\n"+
			"          nothing more", getenv, stdout, stderr)
	db := databaseSetting(fs)
	email := fs.String("email", "", "add: the agent's address")
	teams := fs.String("team", "", "add: the agent's teams, separated by commas")
	display := fs.String("name", "", "add: the agent's display name; default NAME")
	signature := fs.String("signature", "", "add: the agent's signature below every reply (\\n for a new line); unset keeps the one it has")
	admin := fs.Bool("admin", false, "add: the agent is an admin; unset keeps what it is (a new agent is none)")
	strict := fs.Bool("strict", false, "add: refuse a team no agent is in yet, rather than make it (a typo makes a new team otherwise)")
	sub, name, rest := subcommand(args, "add", "disable")
	if err := fs.parse(rest); err != nil {
		return err
	}
	// NAME may come after the flags too, or between them.
	if sub == "add" || sub == "disable" {
		var err error
		if name, err = fs.nameAmongFlags(name); err != nil {
			return err
		}
	}
	if sub != "add" && sub != "disable" && sub != "list" {
		fs.Usage()
		return usageErrorf("want agent add, agent list or agent disable")
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q: agent %s takes one NAME (agent add NAME -email ADDR -team TEAM)", fs.Arg(0), sub)
	}
	var p store.UpsertAgentParams
	switch sub {
	case "add":
		if _, err := vocab.ParseActor("agent:" + name); err != nil {
			return usageErrorf("agent name %q: lower case letters, digits, . _ - (up to 64)", name)
		}
		a, err := mail.ParseAddress(*email)
		if err != nil || a.Name != "" {
			return usageErrorf("-email %q: want one address such as dana@support.example.com", *email)
		}
		p = store.UpsertAgentParams{Name: name, DisplayName: strings.TrimSpace(*display), Email: a.Address, Teams: []string{}}
		if p.DisplayName == "" {
			p.DisplayName = name
		}
		if err := desk.CheckName(p.DisplayName); err != nil {
			return usageErrorf("-name: %v", err)
		}
		if fs.set("admin") {
			p.Admin = admin
		}
		if fs.set("signature") {
			sig := strings.ReplaceAll(*signature, `\n`, "\n")
			if err := desk.CheckSignature(sig); err != nil {
				return usageErrorf("-signature: %v", err)
			}
			p.Signature = &sig
		}
		for _, t := range strings.Split(*teams, ",") {
			if t = strings.TrimSpace(t); !desk.TeamName.MatchString(t) {
				return usageErrorf("-team %q: want team names such as billing,shipping (lower case letters, digits, _ -)", *teams)
			}
			p.Teams = append(p.Teams, t)
		}
	case "disable":
		if name == "" {
			return usageErrorf("`agent disable` takes the agent's name")
		}
	case "list":
	default:
		fs.Usage()
		return usageErrorf("want agent add, agent list or agent disable")
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	switch sub {
	case "add":
		teams, err := st.Teams(ctx)
		if err != nil {
			return err
		}
		for _, t := range p.Teams {
			if slices.Contains(teams, t) {
				continue
			}
			known := "there are none yet"
			if len(teams) > 0 {
				known = "the teams are " + strings.Join(teams, ", ")
			}
			if *strict {
				return usageErrorf("-team %s: no agent is in team %s (%s); without -strict it is made", t, t, known)
			}
			fmt.Fprintf(stderr, "helpdesk agent: team %s is new: no agent was in it (%s); -strict refuses new teams\n", t, known)
		}
		if err := st.UpsertAgent(ctx, &p); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return usageErrorf("another agent has the address %s", p.Email)
			}
			return err
		}
		role := ""
		if p.Admin != nil && *p.Admin {
			role = ", admin"
		}
		fmt.Fprintf(stdout, "agent %s (%s <%s>) in %s%s\n", p.Name, p.DisplayName, p.Email, strings.Join(p.Teams, ", "), role)
		fmt.Fprintf(stdout, "make a key with: helpdesk apikey create -actor agent:%s\n", p.Name)
	case "disable":
		if err := st.DisableAgent(ctx, name); errors.Is(err, store.ErrNotFound) {
			return usageErrorf("there is no agent %s", name)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "agent %s disabled: its keys no longer work\n", name)
	case "list":
		agents, err := st.ListAgents(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tDISPLAY NAME\tEMAIL\tTEAMS\tSTATE")
		for _, a := range agents {
			state := "active"
			if !a.Active() {
				state = "disabled " + a.DisabledAt.Format(time.DateOnly)
			}
			if a.Admin {
				state += ", admin"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", a.Name, a.DisplayName, a.Email, strings.Join(a.Teams, ","), state)
		}
		return w.Flush()
	}
	return nil
}

func cmdCustomer(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("customer", "customer add -email ADDR -name NAME | customer list",
		"add    adds a customer with the next number (C-100000 and up) and prints it\n"+
			"list   lists the customers", getenv, stdout, stderr)
	db := databaseSetting(fs)
	email := fs.String("email", "", "add: the customer's address")
	name := fs.String("name", "", "add: the customer's name")
	sub, _, rest := subcommand(args)
	if err := fs.parse(rest); err != nil {
		return err
	}
	if sub != "add" && sub != "list" {
		fs.Usage()
		return usageErrorf("want customer add or customer list")
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	var address string
	switch sub {
	case "add":
		a, err := mail.ParseAddress(*email)
		if err != nil || a.Name != "" {
			return usageErrorf("-email %q: want one address such as ada@example.com", *email)
		}
		if err := desk.CheckName(strings.TrimSpace(*name)); err != nil {
			return usageErrorf("-name: want the customer's name: %v", err)
		}
		address = a.Address
	case "list":
	default:
		fs.Usage()
		return usageErrorf("want customer add or customer list")
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	if sub == "add" {
		if _, err := st.CustomerByEmail(ctx, address); err == nil {
			return usageErrorf("a customer with %s exists already", address)
		}
		c, err := st.InsertCustomerByEmail(ctx, address, strings.TrimSpace(*name))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", c.ID)
		fmt.Fprintf(stderr, "customer %s: %s <%s>\n", c.ID, c.Name, c.Email)
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tEMAIL")
	after := ""
	for {
		page, err := st.ListCustomers(ctx, after, 500)
		if err != nil {
			return err
		}
		for _, c := range page {
			fmt.Fprintf(w, "%s\t%s\t%s\n", c.ID, c.Name, c.Email)
		}
		if len(page) < 500 {
			return w.Flush()
		}
		after = page[len(page)-1].ID
	}
}

// apikeyList and apikeyRevoke are `apikey list` and `apikey revoke`.
func apikeyList(ctx context.Context, st *store.Store, actor vocab.Actor, stdout io.Writer) error {
	keys, err := st.ListAPIKeys(ctx, actor)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tACTOR\tCREATED\tLAST USED\tREVOKED")
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(time.RFC3339)
	}
	for _, k := range keys {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", k.ID, k.Actor, k.CreatedAt.Format(time.RFC3339), when(k.LastUsedAt), when(k.RevokedAt))
	}
	return w.Flush()
}

func apikeyRevoke(ctx context.Context, st *store.Store, id string, stdout io.Writer) error {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return usageErrorf("key id must be a positive integer from `apikey list`, got %q", id)
	}
	if err := st.RevokeAPIKey(ctx, n); errors.Is(err, store.ErrNotFound) {
		return usageErrorf("there is no API key %d", n)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "API key %d revoked: it answers 401 from now on\n", n)
	return nil
}
