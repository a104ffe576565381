package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// The mistakes of a first day, each answered with what to do.
func TestFirstDayMistakesSayWhatToDo(t *testing.T) {
	t.Parallel()

	t.Run("ACommandOnADatabaseNeverMigratedSaysToMigrate", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": storetest.NewURL(t)}
		for _, args := range [][]string{{"agent", "list"}, {"load"}, {"jobs", "dead"}, {"customer", "list"}} {
			code, _, stderr := runCmd(t, env, args...)
			if code == 0 || !strings.Contains(stderr, "run `helpdesk migrate`") || strings.Contains(stderr, "does not exist") {
				t.Errorf("%v: exit %d, %q; want to be told to migrate", args, code, stderr)
			}
		}
	})

	t.Run("ACustomerIdNotInTheFormatIsRefusedBeforeTheDatabase", func(t *testing.T) {
		t.Parallel()
		dir := loadDir(t, "C-7,Ada Lovelace,ada@example.com")
		env := map[string]string{"DATABASE_URL": migratedURL(t)}
		code, _, stderr := runCmd(t, env, "load", "-dir", dir)
		if code != 2 || !strings.Contains(stderr, `customers.csv line 2: id "C-7": want C- and at least four digits, such as C-0007`) ||
			strings.Contains(stderr, "constraint") {
			t.Errorf("exit %d, %q", code, stderr)
		}
	})

	// A second line for the same customer would overwrite the first, and a
	// name PostgreSQL's text cannot hold would come back as its error.
	t.Run("ARowGivenTwiceOrANameWithAControlCharacterIsRefusedBeforeTheDatabase", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": migratedURL(t)}
		for rows, want := range map[string]string{
			"C-0001,Ada,ada@example.com\nC-0001,Bram,bram@example.com": `customers.csv line 3: id "C-0001" is on line 2 too`,
			"C-0001,Ada,ada@example.com\nC-0002,Bram,ADA@example.com":  `customers.csv line 3: email "ADA@example.com" is on line 2 too`,
			"C-0001,Ada\x00Lovelace,ada@example.com":                   "customers.csv line 2: C-0001: name must not contain control characters",
			"C-0001,Ada \xff,ada@example.com":                          "customers.csv line 2: C-0001: name must be UTF-8",
		} {
			code, _, stderr := runCmd(t, env, "load", "-dir", loadDir(t, rows))
			if code != 2 || !strings.Contains(stderr, want) || strings.Contains(stderr, "SQLSTATE") {
				t.Errorf("%q: exit %d, %q; want exit 2 saying %q", rows, code, stderr, want)
			}
		}
		if code, stdout, _ := runCmd(t, env, "customer", "list"); code != 0 || strings.Contains(stdout, "C-0001") {
			t.Errorf("customer list after refused loads: exit %d, %q", code, stdout)
		}
		// An address that is another customer's already, in the database.
		if code, _, stderr := runCmd(t, env, "load", "-dir", loadDir(t, "C-0001,Ada,ada@example.com")); code != 0 {
			t.Fatalf("load: exit %d, %q", code, stderr)
		}
		code, _, stderr := runCmd(t, env, "load", "-dir", loadDir(t, "C-0002,Ada Two,ada@example.com"))
		if want := "customer C-0002: ada@example.com is another customer's address already"; code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, %q; want exit 2 saying %q", code, stderr, want)
		}
	})

	// Mail from jörg@bücher.de names jörg@xn--bcher-kva.de (RFC 5891):
	// loaded, the same customer is the one mail finds.
	t.Run("AnAddressIsLoadedAsMailFromItNamesIt", func(t *testing.T) {
		t.Parallel()
		dir := loadDir(t, "C-0007,Jörg Müller,jörg@BÜCHER.de")
		env := map[string]string{"DATABASE_URL": migratedURL(t)}
		if code, _, stderr := runCmd(t, env, "load", "-dir", dir); code != 0 {
			t.Fatalf("load: exit %d, %q", code, stderr)
		}
		if code, stdout, stderr := runCmd(t, env, "customer", "list"); code != 0 || !strings.Contains(stdout, "jörg@xn--bcher-kva.de") {
			t.Errorf("customer list: exit %d, %q %q; want jörg@xn--bcher-kva.de", code, stdout, stderr)
		}
	})

	t.Run("AnUnknownTeamIsWarnedAboutAndRefusedWhenStrict", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": migratedURL(t)}
		if code, _, stderr := runCmd(t, env, "agent", "add", "alice", "-email", "alice@example.com", "-team", "billing"); code != 0 {
			t.Fatal(stderr)
		}
		code, _, stderr := runCmd(t, env, "agent", "add", "dana", "-email", "dana@example.com", "-team", "biling", "-strict")
		if code != 2 || !strings.Contains(stderr, "no agent is in team biling (the teams are billing)") {
			t.Errorf("-strict: exit %d, %q", code, stderr)
		}
		code, _, stderr = runCmd(t, env, "agent", "add", "dana", "-email", "dana@example.com", "-team", "biling")
		if code != 0 || !strings.Contains(stderr, "team biling is new") {
			t.Errorf("without -strict: exit %d, %q; want it made, with a warning", code, stderr)
		}
	})

	t.Run("TheAgentsNameMayComeAfterTheFlags", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": migratedURL(t)}
		code, stdout, stderr := runCmd(t, env, "agent", "add", "-email", "scully@example.com", "-team", "x-files", "scully")
		if code != 0 || !strings.Contains(stdout, "agent scully") {
			t.Errorf("exit %d, %q %q", code, stdout, stderr)
		}
		code, stdout, stderr = runCmd(t, env, "agent", "add", "-email", "mulder@example.com", "mulder", "-team", "x-files")
		if code != 0 || !strings.Contains(stdout, "agent mulder") {
			t.Errorf("between the flags: exit %d, %q %q", code, stdout, stderr)
		}
		code, _, stderr = runCmd(t, env, "agent", "add", "mulder", "-email", "mulder@example.com", "-team", "x-files", "again")
		if code != 2 || !strings.Contains(stderr, "takes one NAME") {
			t.Errorf("two names: exit %d, %q", code, stderr)
		}
	})

	t.Run("HelpSaysWhereMailWithoutARelayGoes", func(t *testing.T) {
		t.Parallel()
		_, stdout, _ := runCmd(t, map[string]string{}, "serve", "--help")
		if strings.Contains(stdout, "in memory") || !strings.Contains(stdout, "captured, not sent, in the Maildir") {
			t.Errorf("serve --help: %s", stdout)
		}
	})
}

func TestMailboxCommand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": migratedURL(t)}
	if code, _, stderr := runCmd(t, env, "agent", "add", "dana", "-email", "dana@example.org", "-team", "billing"); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := runCmd(t, env, "mailbox", "add", "billing", "-imap", "imaps://billing%40example.org:Imap-S3cret@imap.example.org/INBOX",
		"-address", "billing@example.org", "-team", "billing", "-from", "Example Billing <billing@example.org>")
	if code != 0 || !strings.Contains(stdout, "mailbox billing") || !strings.Contains(stdout, "after import: move to Processed") {
		t.Fatalf("add: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := runCmd(t, env, "mailbox", "add", "flagged", "-imap", "imaps://flagged%40example.org:pw@imap.example.org/INBOX",
		"-address", "flagged@example.org", "-after-import", "flag"); code != 0 || !strings.Contains(stdout, "after import: flag $HelpdeskImported") {
		t.Errorf("add, flagging: exit %d, %q %q", code, stdout, stderr)
	}
	for _, args := range [][]string{{"mailbox", "list"}, {"mailbox", "status", "billing"}} {
		code, stdout, stderr := runCmd(t, env, args...)
		if code != 0 || strings.Contains(stdout+stderr, "Imap-S3cret") || !strings.Contains(stdout, "billing@example.org") {
			t.Errorf("%v: exit %d, %q %q", args, code, stdout, stderr)
		}
	}
	// An error the fetcher has since got past is shown as such.
	if _, err := openPool(t, env["DATABASE_URL"]).Exec(context.Background(), `UPDATE mailboxes SET last_error = 'sign in: NO',
		last_error_at = now() - interval '1 minute', last_success_at = now() WHERE name = 'billing'`); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCmd(t, env, "mailbox", "status", "billing"); code != 0 || !strings.Contains(stdout, "sign in: NO (fetched since)") {
		t.Errorf("status after a recovery: exit %d, %q %q", code, stdout, stderr)
	}
	// Each move into the folder read would make the message new again.
	if code, _, stderr := runCmd(t, env, "mailbox", "add", "loop", "-imap", "imaps://loop@imap.example.org/INBOX", "-address", "loop@example.org",
		"-processed", "inbox"); code != 2 || !strings.Contains(stderr, "is the folder read") {
		t.Errorf("a processed folder that is the folder read: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCmd(t, env, "mailbox", "add", "x", "-imap", "ftp://a@b/", "-address", "x@example.org"); code != 2 || !strings.Contains(stderr, "-imap") {
		t.Errorf("a bad URL: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCmd(t, env, "mailbox", "add", "y", "-imap", "imaps://y@imap.example.org/", "-address", "y@example.org", "-team", "nobody"); code != 2 ||
		!strings.Contains(stderr, "no such team") {
		t.Errorf("an unknown team: exit %d, %q", code, stderr)
	}
	// A company's own MTA in front of its server, whose
	// Authentication-Results the mailbox's mail is judged by.
	if code, _, stderr := runCmd(t, env, "mailbox", "add", "own", "-imap", "imaps://own@imap.example.org/INBOX", "-address", "own@example.org",
		"-authserv-id", "mx.example.org"); code != 0 {
		t.Errorf("add with an authserv-id: exit %d, %q", code, stderr)
	}
	if code, stdout, stderr := runCmd(t, env, "mailbox", "status", "own"); code != 0 || !strings.Contains(stdout, "judged by     mx.example.org's Authentication-Results") {
		t.Errorf("status with an authserv-id: exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, stderr := runCmd(t, env, "mailbox", "add", "own", "-imap", "imaps://own@imap.example.org/INBOX", "-address", "own@example.org",
		"-authserv-id", "mx.example.org; dmarc=pass"); code != 2 || !strings.Contains(stderr, "authserv-id") {
		t.Errorf("an authserv-id that is not one: exit %d, %q", code, stderr)
	}
	// A team that wants a clean queue imports only the mail from now on.
	if code, _, stderr := runCmd(t, env, "mailbox", "add", "fresh", "-imap", "imaps://fresh@imap.example.org/INBOX", "-address", "fresh@example.org",
		"-since", "2026-11-01"); code != 0 {
		t.Errorf("add with -since: exit %d, %q", code, stderr)
	}
	if code, stdout, stderr := runCmd(t, env, "mailbox", "status", "fresh"); code != 0 || !strings.Contains(stdout, "imports       mail its server took from 2026-11-01T00:00:00Z on") {
		t.Errorf("status with -since: exit %d, %q %q", code, stdout, stderr)
	}
	for _, bad := range []string{"yesterday", "2026-13-01", time.Now().Add(48 * time.Hour).Format(time.RFC3339)} {
		if code, _, stderr := runCmd(t, env, "mailbox", "add", "fresh", "-imap", "imaps://fresh@imap.example.org/INBOX", "-address", "fresh@example.org",
			"-since", bad); code != 2 || !strings.Contains(stderr, "since") {
			t.Errorf("-since %s: exit %d, %q", bad, code, stderr)
		}
	}
	if code, _, stderr := runCmd(t, env, "mailbox", "add", "fresh", "-imap", "imaps://fresh@imap.example.org/INBOX", "-address", "fresh@example.org",
		"-since", "now"); code != 0 {
		t.Errorf("add with -since now: exit %d, %q", code, stderr)
	}
	if code, stdout, _ := runCmd(t, env, "mailbox", "disable", "billing"); code != 0 || !strings.Contains(stdout, "disabled") {
		t.Errorf("disable: exit %d, %q", code, stdout)
	}
}

// Connecting a mailbox with OAuth changes how it signs in, nothing else:
// its team and From name, kept with its address, stay.
func TestMailboxConnectKeepsTheTeamAndFrom(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": migratedURL(t)}
	if code, _, stderr := runCmd(t, env, "agent", "add", "dana", "-email", "dana@example.org", "-team", "billing"); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := runCmd(t, env, "mailbox", "add", "billing", "-imap", "imaps://billing%40example.org@outlook.office365.com/INBOX",
		"-address", "billing@example.org", "-team", "billing", "-from", "Example Billing <billing@example.org>"); code != 0 {
		t.Fatal(stderr)
	}
	// A device flow approved at once.
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/device" {
			_, _ = w.Write([]byte(`{"device_code":"dev-1","user_code":"ABCD-EFGH","verification_uri":"https://login.example/device","expires_in":600,"interval":1}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"access-0","refresh_token":"refresh-1","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(idp.Close)
	code, stdout, stderr := runCmd(t, env, "mailbox", "connect", "billing", "-oauth", "custom", "-client-id", "helpdesk",
		"-token-url", idp.URL+"/token", "-device-url", idp.URL+"/device", "-scopes", "mail")
	if code != 0 || !strings.Contains(stdout, "ABCD-EFGH") || !strings.Contains(stdout, "connected with custom") {
		t.Fatalf("connect: exit %d, %q %q", code, stdout, stderr)
	}
	var from string
	var team *string
	if err := openPool(t, env["DATABASE_URL"]).QueryRow(context.Background(),
		`SELECT from_name, team FROM support_addresses WHERE address = 'billing@example.org'`).Scan(&from, &team); err != nil {
		t.Fatal(err)
	}
	if from != "Example Billing" || team == nil || *team != "billing" {
		t.Errorf("after connect: From name %q, team %v; want Example Billing and billing kept", from, team)
	}
	if code, stdout, _ := runCmd(t, env, "mailbox", "status", "billing"); code != 0 || !strings.Contains(stdout, "oauth         custom, connected true") {
		t.Errorf("status: exit %d, %q", code, stdout)
	}
}

func TestTicketSimilarCommand(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	pool := openPool(t, dbURL)
	ctx := context.Background()
	c, err := store.New(pool).InsertCustomerByEmail(ctx, "ada@example.com", "Ada Lovelace")
	if err != nil {
		t.Fatal(err)
	}
	// Three tickets with embeddings of their own: the asked one, a solved
	// one pointing nearly the same way and a solved one at right angles.
	var ids []string
	for i, v := range []struct {
		subject, status string
		vec             []float32
	}{
		{"Refund please", "open", []float32{1, 0.1, 0}},
		{"Refund for my kettle", "solved", []float32{1, 0.2, 0}},
		{"Where is my parcel", "solved", []float32{0, 0, 1}},
	} {
		var id string
		err := pool.QueryRow(ctx, `WITH t AS (INSERT INTO tickets (id, customer_id, subject, status, team, solved_at)
				VALUES ('T-' || (900001 + $1::int), $2, $3, $4, 'billing', CASE WHEN $4 = 'solved' THEN now() END) RETURNING id)
			INSERT INTO ticket_embeddings (ticket_id, embedding) SELECT id, $5 FROM t RETURNING ticket_id`,
			i, c.ID, v.subject, v.status, v.vec).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	env := map[string]string{"DATABASE_URL": dbURL}

	code, stdout, stderr := runCmd(t, env, "ticket", "similar", ids[0])
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], ids[1]) || !strings.HasPrefix(lines[2], ids[2]) {
		t.Fatalf("exit %d, %q %q: want the refund above the parcel", code, stdout, stderr)
	}
	if code, stdout, _ := runCmd(t, env, "ticket", "similar", ids[0], "-limit", "1"); code != 0 || strings.Count(stdout, "\n") != 2 {
		t.Errorf("-limit 1: exit %d, %q", code, stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ticket", "similar", "T-999999"}, "no ticket T-999999"},
		{[]string{"ticket", "similar", "C-0001"}, "ticket's number"},
		{[]string{"ticket", "similar", ids[0], "-status", "open"}, "-status"},
		{[]string{"ticket", "similar", ids[0], "-limit", "0"}, "-limit"},
	} {
		if code, _, stderr := runCmd(t, env, c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q: want 2 naming %q", c.args, code, stderr, c.want)
		}
	}
}

func TestSLACommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": migratedURL(t)}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calendar", "set", "office", "-tz", "Europe/Berlin", "-hours", "Mon-Fri 09:00-17:00", "-holidays", "2026-12-25,2026-12-26"},
			"calendar office (Europe/Berlin): Mon-Fri 09:00-17:00; holidays 2026-12-25,2026-12-26"},
		{[]string{"calendar", "set", "us", "-tz", "America/New_York", "-hours", "Mon-Fri 09:00-17:00"}, "calendar us"},
		// Chatwoot's own example: Friday 16:30 plus one business hour.
		{[]string{"sla", "due", "-from", "2026-01-16T16:30:00+01:00", "-target", "1h", "-calendar", "office"}, "2026-01-19T09:30:00+01:00"},
		{[]string{"sla", "due", "-from", "2026-03-27T16:00:00+01:00", "-target", "2h", "-calendar", "office"}, "2026-03-30T10:00:00+02:00"},
		{[]string{"sla", "due", "-from", "2026-10-30T16:00:00-04:00", "-target", "2h", "-calendar", "us"}, "2026-11-02T10:00:00-05:00"},
		{[]string{"sla", "due", "-from", "2026-12-24T16:00:00+01:00", "-target", "2h", "-calendar", "office"}, "2026-12-28T10:00:00+01:00"},
		{[]string{"sla", "due", "-from", "2026-01-12T09:00:00+01:00", "-target", "50h", "-calendar", "office"}, "2026-01-20T11:00:00+01:00"},
		{[]string{"sla", "due", "-from", "2026-03-28T23:30:00Z", "-target", "1h"}, "2026-03-29T00:30:00Z"},
		{[]string{"sla", "set", "-priority", "1", "-first-response", "1h", "-next-response", "4h", "-resolution", "24h", "-calendar", "office"},
			"sla policy for priority 1: first response 1h0m0s, next response 4h0m0s, resolution 24h0m0s, warning 20% before, calendar office"},
		{[]string{"sla", "list"}, "1         *     1h0m0s"},
		{[]string{"sla", "delete", "-priority", "1"}, "deleted"},
	} {
		if code, stdout, stderr := runCmd(t, env, c.args...); code != 0 || !strings.Contains(stdout, c.want) {
			t.Errorf("%v: exit %d, %q %q: want %q", c.args, code, stdout, stderr, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sla", "set", "-priority", "1"}, "at least one"},
		{[]string{"sla", "set", "-priority", "5", "-first-response", "1h"}, "-priority"},
		{[]string{"sla", "set", "-priority", "1", "-first-response", "-5h"}, "whole seconds from 1s"},
		{[]string{"sla", "set", "-priority", "1", "-first-response", "1h", "-calendar", "mars"}, "no such calendar"},
		{[]string{"sla", "set", "-priority", "1", "-first-response", "1h", "-team", "nobody"}, "no such team"},
		{[]string{"sla", "delete", "-priority", "2"}, "no policy"},
		{[]string{"sla", "due", "-from", "friday", "-target", "1h"}, "RFC 3339"},
		{[]string{"calendar", "set", "x", "-tz", "Mars/Base", "-hours", "Mon 09:00-17:00"}, "time zone"},
		{[]string{"calendar", "set", "x", "-tz", "UTC", "-hours", "Mon 17:00-09:00"}, "interval"},
		{[]string{"calendar", "set", "24x7", "-tz", "UTC", "-hours", "Mon 09:00-17:00"}, "built in"},
	} {
		if code, _, stderr := runCmd(t, env, c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q: want 2 naming %q", c.args, code, stderr, c.want)
		}
	}
}

// loadDir is a folder for helpdesk load: customers.csv with the customer
// row given, agents.csv with alice.
func loadDir(t *testing.T, customer string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"customers.csv": "id,name,email\n" + customer + "\n",
		"agents.csv":    "name,display_name,email,teams\nalice,Alice,alice@example.com,billing\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
