package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/store"
)

func cmdMail(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mail", "mail reparse MESSAGE",
		"reparse   reads an inbound message again from the raw mail kept with it, and replaces its\n"+
			"          text and attachments: after a parser fix. MESSAGE is the message's\n"+
			"          number (from GET /v1/tickets/{id}/messages) or its <Message-ID>.", getenv, stdout, stderr)
	db := databaseSetting(fs)
	var deskConfig desk.Config
	fs.declare(pick(deskConfig.Settings(), "HELPDESK_ATTACHMENT_MAX_BYTES")...)
	sub, name, rest := subcommand(args, "reparse")
	if err := fs.parse(rest); err != nil {
		return err
	}
	if sub != "reparse" || name == "" {
		fs.Usage()
		return usageErrorf("want mail reparse MESSAGE")
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	id, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		if !strings.HasPrefix(name, "<") {
			name = "<" + name + ">"
		}
		if id, err = st.MessageByEmailID(ctx, name); errors.Is(err, store.ErrNotFound) {
			return usageErrorf("there is no message %s", name)
		} else if err != nil {
			return err
		}
	}
	raw, err := st.RawEmail(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return usageErrorf("there is no message %d", id)
	}
	if err != nil {
		return err
	}
	if raw == nil {
		return usageErrorf("message %d did not come by email, or came before raw mail was kept", id)
	}
	m, err := inbound.Parse(raw)
	if err != nil {
		return fmt.Errorf("message %d: %w", id, err)
	}
	// Reparsing queues nothing: the use cases need no queue for it.
	if err := desk.New(pool, nil, deskConfig).Reparse(ctx, id, m); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "message %d read again from its %d raw bytes: %d bytes of text, %d attachments\n", id, len(raw), len(m.Text), len(m.Attachments))
	return nil
}
