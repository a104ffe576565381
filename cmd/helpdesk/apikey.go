package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"helpdesk/api"
	"helpdesk/store"
)

func cmdAPIKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("apikey", "apikey create -actor customer:C-0022 | agent:NAME",
		"Makes an API key for the actor and prints it once; only its SHA-256 is stored.\n"+
			"A customer key sees and opens that customer's tickets; an agent key sees all and acts on jobs.", getenv, stderr)
	db := databaseSetting(fs)
	actorFlag := fs.String("actor", "", "customer:C-0022 or agent:NAME")
	if len(args) > 0 && args[0] == "create" {
		args = args[1:]
	} else if err := fs.parse(args); err != nil {
		return err // --help
	} else {
		return usageErrorf("want `apikey create -actor customer:C-0022`")
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	actor, err := api.ParseActor(*actorFlag)
	if err != nil {
		return usageErrorf("-actor: %v", err)
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	key, err := createAPIKey(ctx, store.New(pool), actor)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", key)
	fmt.Fprintf(stderr, "API key for %s: shown once, keep it. Send it as Authorization: Bearer KEY\n", actor)
	return nil
}

// createAPIKey checks that the actor exists and stores a new key for it.
func createAPIKey(ctx context.Context, st *store.Store, actor api.Actor) (string, error) {
	var err error
	if actor.IsAgent() {
		_, err = st.GetAgent(ctx, actor.ID)
	} else {
		_, err = st.GetCustomer(ctx, actor.ID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return "", usageErrorf("there is no %s %s (helpdesk load adds the demo's customers and agents)", actor.Kind, actor.ID)
	}
	if err != nil {
		return "", err
	}
	key, sha := api.NewAPIKey()
	if err := st.InsertAPIKey(ctx, actor.String(), sha); err != nil {
		return "", err
	}
	return key, nil
}
