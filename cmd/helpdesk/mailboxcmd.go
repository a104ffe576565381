package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/fetcher"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/oauth"
	"github.com/helpdesk-dev/helpdesk/store"
)

const mailboxSynopsis = "mailbox add NAME -imap imaps://USER:PASS@HOST[:PORT]/FOLDER -address ADDR [-team TEAM] [-from \"Name <ADDR>\"]\n" +
	"           [-processed FOLDER] [-after-import move|flag|keep] [-authserv-id ID] [-since now|DATE|TIME] |\n" +
	"       mailbox list | mailbox status NAME | mailbox disable NAME |\n" +
	"       mailbox connect NAME -oauth microsoft|google|custom -client-id ID [-client-secret S] [-token-url URL] [-device-url URL] [-scopes S]"

func cmdMailbox(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mailbox", mailboxSynopsis,
		"add       adds an IMAP mailbox the workers fetch, or changes it (its checkpoint stays): every message\n"+
			"          past the last one filed becomes a ticket or joins one, exactly once; then it is moved to\n"+
			"          -processed (default Processed, made when missing), flagged $HelpdeskImported, or kept, never\n"+
			"          deleted. imap:// takes STARTTLS when offered (?tls=required insists, ?tls=none never); imaps://\n"+
			"          is TLS from the start. The address is the support address customers write to: its tickets'\n"+
			"          replies go out From it (-from names it), and they are -team's. -authserv-id names the MTA in\n"+
			"          front of its server whose Authentication-Results its mail is judged by. -since imports only\n"+
			"          the mail its server took from then on (now, 2026-11-01 in UTC, or 2026-11-01T09:00:00+01:00):\n"+
			"          older mail stays where it is, unread; without it, every message in the folder is imported.\n"+
			"list      lists the mailboxes and where their fetching stands\n"+
			"status    shows one mailbox: its checkpoint, connection, last success and last error\n"+
			"disable   stops fetching a mailbox (add it again to go on where it stopped)\n"+
			"connect   signs the mailbox in with OAuth 2.0 (Microsoft 365, Google): shows where to sign in with\n"+
			"          which code, waits, and keeps the refresh token; -imap's user is the account", getenv, stdout, stderr)
	db := databaseSetting(fs)
	imapURL := fs.String("imap", "", "add: imaps://USER:PASS@HOST[:PORT]/FOLDER or imap://…; a password with reserved characters percent-encoded")
	address := fs.String("address", "", "add: the support address its mail is to, such as support@example.com")
	team := fs.String("team", "", "add: the team its tickets belong to; unset: triage chooses")
	from := fs.String("from", "", "add: the From of its replies, such as \"Example Support <support@example.com>\"; default the address")
	processed := fs.String("processed", "Processed", "add: the folder filed messages move to")
	after := fs.String("after-import", "move", "add: move, flag or keep")
	authservID := fs.String("authserv-id", "", "add: the authserv-id of the MTA in front of its server, whose Authentication-Results "+
		"its mail is judged by, or microsoft365; default its provider's (Microsoft 365, Google), else HELPDESK_INBOUND_AUTHSERV_ID")
	since := fs.String("since", "", "add: import only the mail its server took from then on: now, a date (2026-11-01, UTC) or a time "+
		"(2026-11-01T09:00:00+01:00); default every message in the folder")
	provider := fs.String("oauth", "", "connect: microsoft, google or custom")
	clientID := fs.String("client-id", "", "connect: the application's client id")
	clientSecret := fs.String("client-secret", "", "connect: its client secret, if it has one")
	tokenURL := fs.String("token-url", "", "connect: the token endpoint (custom, or a tenant of one's own)")
	deviceURL := fs.String("device-url", "", "connect: the device authorization endpoint (custom)")
	scopes := fs.String("scopes", "", "connect: the scopes, separated by spaces; default the provider's for IMAP and SMTP")
	sub, name, rest := subcommand(args, "add", "status", "disable", "connect")
	if err := fs.parse(rest); err != nil {
		return err
	}
	if sub != "list" {
		var err error
		if name, err = fs.nameAmongFlags(name); err != nil {
			return err
		}
	}
	switch {
	case sub != "add" && sub != "list" && sub != "status" && sub != "disable" && sub != "connect":
		fs.Usage()
		return usageErrorf("want mailbox add, list, status, disable or connect")
	case fs.NArg() > 0:
		return usageErrorf("unexpected argument %q: mailbox %s takes one NAME", fs.Arg(0), sub)
	case sub != "list" && name == "":
		return usageErrorf("mailbox %s takes the mailbox's NAME", sub)
	}
	var params *desk.MailboxParams
	if sub == "add" {
		ep, err := fetcher.ParseURL(*imapURL)
		if err != nil {
			return usageErrorf("-imap: %v", err)
		}
		params = &desk.MailboxParams{Name: name, IMAPURL: ep.String(), Password: ep.Password, Address: *address, Team: *team,
			Folder: ep.Folder, ProcessedFolder: *processed, AfterImport: *after, AuthservID: *authservID}
		if *since != "" {
			at, err := parseSince(*since, time.Now())
			if err != nil {
				return usageErrorf("-since: %v", err)
			}
			params.ImportSince = &at
		}
		if *from != "" {
			a, err := mail.ParseAddress(*from)
			if err != nil {
				return usageErrorf("-from %q: want a name and an address, such as \"Example Support <support@example.com>\"", *from)
			}
			params.From = a
		}
	}
	var client *oauth.Client
	if sub == "connect" {
		client = &oauth.Client{Provider: *provider, ClientID: *clientID, ClientSecret: *clientSecret, TokenURL: *tokenURL, DeviceURL: *deviceURL}
		if *scopes != "" {
			client.Scopes = strings.Fields(*scopes)
		}
		if _, err := client.Config(); err != nil || *clientID == "" {
			return usageErrorf("-oauth %q -client-id %q: want microsoft, google or custom (with -token-url and -device-url), and the application's client id",
				*provider, *clientID)
		}
	}
	pool, err := openDatabase(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	cases := desk.New(pool, nil, desk.Config{})
	switch sub {
	case "add":
		m, err := cases.AddMailbox(ctx, params)
		if errors.Is(err, desk.ErrInvalidMailbox) || errors.Is(err, desk.ErrUnknownTeam) {
			return usageErrorf("%v", err)
		} else if err != nil {
			return err
		}
		which := "every message in the folder"
		if m.ImportSince != nil {
			which = "the mail its server took from " + when(m.ImportSince) + " on"
		}
		fmt.Fprintf(stdout, "mailbox %s: %s for %s; the workers fetch %s within 10s (after import: %s)\n",
			m.Name, m.IMAPURL, m.Address, which, afterImport(m))
	case "list":
		list, err := cases.Mailboxes(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tADDRESS\tIMAP\tSTATE\tLAST SUCCESS\tIMPORTED")
		for _, m := range list {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", m.Name, m.Address, m.IMAPURL, mailboxState(m), when(m.LastSuccessAt), m.Imported)
		}
		return w.Flush()
	case "status":
		m, err := cases.Mailbox(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return usageErrorf("there is no mailbox %s", name)
		} else if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "mailbox\t%s\naddress\t%s\nimap\t%s\nstate\t%s\nafter import\t%s\n", m.Name, m.Address, m.IMAPURL, mailboxState(m),
			afterImport(m))
		if m.AuthservID != "" {
			fmt.Fprintf(w, "judged by\t%s's Authentication-Results\n", m.AuthservID)
		}
		if m.ImportSince != nil {
			fmt.Fprintf(w, "imports\tmail its server took from %s on\n", when(m.ImportSince))
		}
		uv := "-"
		if m.UIDValidity != nil {
			uv = fmt.Sprint(*m.UIDValidity)
		}
		fmt.Fprintf(w, "checkpoint\tUIDVALIDITY %s, last UID %d (%d resets)\nimported\t%d\nlast success\t%s\n", uv, m.LastUID, m.UIDValidityResets,
			m.Imported, when(m.LastSuccessAt))
		if m.LastError != nil {
			since := ""
			if m.LastErrorAt != nil && m.LastSuccessAt != nil && m.LastSuccessAt.After(*m.LastErrorAt) {
				since = " (fetched since)"
			}
			fmt.Fprintf(w, "last error\t%s: %s%s\n", when(m.LastErrorAt), *m.LastError, since)
		}
		if m.OAuth != nil {
			fmt.Fprintf(w, "oauth\t%s, connected %v, token until %s\n", m.OAuth.Provider, m.OAuth.Connected, when(m.OAuth.ExpiresAt))
		}
		return w.Flush()
	case "disable":
		if err := cases.DisableMailbox(ctx, name); errors.Is(err, store.ErrNotFound) {
			return usageErrorf("there is no mailbox %s", name)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "mailbox %s disabled: the workers let it go within 10s; add it again to go on where it stopped\n", name)
	case "connect":
		m, err := cases.Mailbox(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return usageErrorf("there is no mailbox %s: mailbox add it first", name)
		} else if err != nil {
			return err
		}
		tok, err := oauth.Connect(ctx, client, func(uri, code string) {
			fmt.Fprintf(stdout, "Sign in as the mailbox's account at %s with the code %s; this waits until you did.\n", uri, code)
		})
		if err != nil {
			return err
		}
		o := &store.OAuth{Provider: client.Provider, ClientID: client.ClientID, ClientSecret: client.ClientSecret, TokenURL: client.TokenURL,
			Scopes: strings.Join(client.Scopes, " ")}
		// Only how it signs in changes: its team and From name, kept with
		// its address, stay.
		if err := cases.ConnectMailbox(ctx, m.Name, o, tok.AccessToken, tok.RefreshToken, tok.Expiry); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "mailbox %s connected with %s: the workers sign in with XOAUTH2 and refresh the token as it expires\n", name, client.Provider)
	}
	return nil
}

func mailboxState(m *store.Mailbox) string {
	switch {
	case m.DisabledAt != nil:
		return "disabled"
	case m.Connected:
		return "connected"
	case m.LastError != nil:
		return "failing"
	}
	return "waiting"
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// afterImport says what is done with a message once filed.
func afterImport(m *store.Mailbox) string {
	switch m.AfterImport {
	case desk.AfterImportMove:
		return "move to " + m.ProcessedFolder
	case desk.AfterImportFlag:
		return "flag $HelpdeskImported"
	}
	return m.AfterImport
}

// parseSince reads mailbox add's -since: now, a date (midnight UTC) or an
// RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "now" {
		return now, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want now, a date such as 2026-11-01 or a time such as 2026-11-01T09:00:00+01:00", v)
}
