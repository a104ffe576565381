package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func cmdAPIKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("apikey", "apikey create -actor customer:C-0022 | agent:NAME | apikey list [-actor A] | apikey revoke ID",
		"create   makes an API key for the actor and prints it once; only its SHA-256 is stored.\n"+
			"         A customer key sees and opens that customer's tickets; an agent key sees all.\n"+
			"list     lists the keys (id, actor, created, last used, revoked), never the keys themselves\n"+
			"revoke   stops a key: it answers 401 within a second", getenv, stdout, stderr)
	db := databaseSetting(fs)
	actorFlag := fs.String("actor", "", "customer:C-0022 or agent:NAME")
	sub, id, rest := subcommand(args, "revoke")
	if err := fs.parse(rest); err != nil {
		return err
	}
	if sub != "create" && sub != "list" && sub != "revoke" {
		fs.Usage()
		return usageErrorf("want apikey create, apikey list or apikey revoke")
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	var actor vocab.Actor
	switch sub {
	case "create":
		var err error
		if actor, err = vocab.ParseActor(*actorFlag); err != nil {
			return usageErrorf("-actor: %v", err)
		}
	case "list":
		if *actorFlag != "" {
			if _, err := vocab.ParseActor(*actorFlag); err != nil {
				return usageErrorf("-actor: %v", err)
			}
		}
	case "revoke":
		if id == "" {
			return usageErrorf("`apikey revoke` takes a key id from `apikey list`")
		}
	default:
		fs.Usage()
		return usageErrorf("want apikey create, apikey list or apikey revoke")
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch sub {
	case "list":
		return apikeyList(ctx, store.New(pool), vocab.Actor(*actorFlag), stdout)
	case "revoke":
		return apikeyRevoke(ctx, store.New(pool), id, stdout)
	}
	key, err := createAPIKey(ctx, store.New(pool), actor)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", key)
	fmt.Fprintf(stderr, "API key for %s: shown once, keep it. Send it as Authorization: Bearer KEY\n", actor)
	return nil
}

// createAPIKey checks that the actor exists and stores a new key for it.
func createAPIKey(ctx context.Context, st *store.Store, actor vocab.Actor) (string, error) {
	var err error
	if actor.IsAgent() {
		_, err = st.GetAgent(ctx, actor.ID())
	} else {
		_, err = st.GetCustomer(ctx, actor.ID())
	}
	if errors.Is(err, store.ErrNotFound) {
		return "", usageErrorf("there is no %s %s (helpdesk %s add makes one; helpdesk load adds the demo's)", actor.Kind(), actor.ID(), actor.Kind())
	}
	if err != nil {
		return "", err
	}
	key, sha := api.NewAPIKey()
	if err := st.InsertAPIKey(ctx, actor, sha); err != nil {
		return "", err
	}
	return key, nil
}
