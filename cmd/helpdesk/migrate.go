package main

import (
	"context"
	"fmt"
	"io"

	"github.com/helpdesk-dev/helpdesk/store"
)

func cmdMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", "migrate [flags] [up | down]",
		"up (the default) applies River's migrations, then helpdesk's; running it again changes nothing.\n"+
			"down rolls back the newest helpdesk migration, or -steps of them; with -river and\n"+
			"every helpdesk migration rolled back, River's tables go too.", getenv, stdout, stderr)
	db := databaseSetting(fs)
	steps := fs.setting("steps", "", "1", "down: how many helpdesk migrations to roll back")
	withRiver := fs.Bool("river", false, "down: also remove River's tables")
	if err := fs.parse(args); err != nil {
		return err
	}
	direction := "up"
	if fs.NArg() > 0 {
		direction = fs.Arg(0)
	}
	if fs.NArg() > 1 || (direction != "up" && direction != "down") {
		return usageErrorf("want `migrate up` or `migrate down`, got %q", fs.Args())
	}
	n, err := steps.positiveInt()
	if err != nil {
		return err
	}
	pool, err := connectDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()

	if direction == "up" {
		res, err := store.MigrateUp(ctx, pool)
		if err != nil {
			return err
		}
		if len(res.Versions) == 0 {
			fmt.Fprintf(stdout, "already up to date (River schema version %d)\n", res.RiverVersion)
		} else {
			fmt.Fprintf(stdout, "applied helpdesk migrations %v (River schema version %d)\n", res.Versions, res.RiverVersion)
		}
		return nil
	}
	if *withRiver {
		all, err := store.Migrations()
		if err != nil {
			return err
		}
		n = len(all)
	}
	res, err := store.MigrateDown(ctx, pool, n, *withRiver)
	if err != nil {
		return err
	}
	msg := "rolled back helpdesk migrations " + fmt.Sprint(res.Versions)
	if len(res.Versions) == 0 {
		msg = "no helpdesk migration to roll back"
	}
	if *withRiver {
		msg += "; removed River's tables"
	}
	fmt.Fprintln(stdout, msg)
	return nil
}
