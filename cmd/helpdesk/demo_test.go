//go:build demo

package main

import (
	"bytes"
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

func TestDemoShowsBothDuplicatesMadeHarmless(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	res, err := runDemo(context.Background(), storetest.URL(), "", &out, jobstest.Logger())
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}

	if res.First.TicketID != "T-500001" || res.Second.TicketID != res.First.TicketID || res.Second.JobID != res.First.JobID || !res.Second.Replayed {
		t.Errorf("part 1 answers: %+v then %+v", res.First, res.Second)
	}
	if res.AfterRequests != (store.Counts{Tickets: 1, Jobs: 1, AIResults: 0}) {
		t.Errorf("after the requests: %+v", res.AfterRequests)
	}
	if res.CrashState.State != "running" || res.CrashState.Attempt != 1 || res.AfterCrash != (store.Counts{Tickets: 1, Jobs: 1, AIResults: 2}) {
		t.Errorf("after the crash: %+v %+v", res.CrashState, res.AfterCrash)
	}
	if res.EndState.State != "succeeded" || res.EndState.Attempt != 2 || res.AfterAll != (store.Counts{Tickets: 1, Jobs: 1, AIResults: 3}) {
		t.Errorf("at the end: %+v %+v", res.EndState, res.AfterAll)
	}
	if calls := jobstest.TotalCalls(res.ProviderCalls); calls != 3 {
		t.Errorf("provider calls %v, want 3", res.ProviderCalls)
	}
	if len(res.Deliveries) != 2 || res.Deliveries[0].MessageID != res.Deliveries[1].MessageID ||
		!bytes.Equal(res.Deliveries[0].Raw, res.Deliveries[1].Raw) || res.Deliveries[0].MessageID != res.Reply.EmailMessageID {
		t.Errorf("part 3 deliveries: %+v", res.Deliveries)
	}
	for _, d := range res.Deliveries {
		for _, id := range append(d.References, d.InReplyTo) {
			if id == d.MessageID {
				t.Errorf("a delivery cites itself: %+v", d)
			}
		}
	}
	for _, want := range []string{
		"second: 202 ticket T-500001 job 1 (Idempotent-Replayed: true)",
		"stopped by: store/idempotency_keys.go:",
		"stopped by: jobs/triage.go:",
		"store/ai_runs.go:",
		"same Message-ID: true; same bytes: true; cites itself: false",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestLoadAndAPIKeyCommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": migratedURL(t)}
	dir := filepath.Join("demodata")

	if code, out, stderr := runCmd(t, env, "load", "-reset"); code != 0 || !strings.Contains(out, "loaded 50 customers and 3 agents") {
		t.Fatalf("load: exit %d %q %q", code, out, stderr)
	}
	if code, out, _ := runCmd(t, env, "load", "-dir", dir); code != 0 || !strings.Contains(out, "loaded 50 customers") {
		t.Errorf("loading twice: exit %d %q", code, out)
	}
	if code, _, stderr := runCmd(t, env, "load", "-dir", t.TempDir()); code != 2 || !strings.Contains(stderr, "customers.csv") {
		t.Errorf("load from an empty folder: exit %d %q", code, stderr)
	}
	missing := filepath.Join(t.TempDir(), "no-such-folder")
	if code, _, stderr := runCmd(t, env, "load", "-dir", missing); code != 2 || !strings.Contains(stderr, "-dir "+missing+": no folder there") {
		t.Errorf("load from a folder that is not there: exit %d %q", code, stderr)
	}

	code, out, _ := runCmd(t, env, "apikey", "create", "-actor", "customer:C-0022")
	if code != 0 || !strings.HasPrefix(out, "hd_") {
		t.Errorf("apikey create: exit %d %q", code, out)
	}
	for _, actor := range []string{"customer:C-0099", "agent:nobody", "root", "customer:22"} {
		if code, _, stderr := runCmd(t, env, "apikey", "create", "-actor", actor); code != 2 || stderr == "" {
			t.Errorf("apikey for %s: exit %d %q, want 2 with a message", actor, code, stderr)
		}
	}
}

func TestYourOwnTeam(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": migratedURL(t)}
	run := func(args ...string) (string, string) {
		t.Helper()
		code, out, stderr := runCmd(t, env, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, %q %q", args, code, out, stderr)
		}
		return out, stderr
	}
	run("agent", "add", "dana", "-email", "dana@support.example.com", "-team", "billing,shipping", "-name", "Dana Scully")
	run("agent", "add", "fox", "-email", "fox@support.example.com", "-team", "shipping")
	if out, _ := run("agent", "list"); !strings.Contains(out, "dana") || !strings.Contains(out, "billing,shipping") || !strings.Contains(out, "Dana Scully") {
		t.Errorf("agent list: %q", out)
	}
	id, _ := run("customer", "add", "-email", "walter@example.com", "-name", "Walter Skinner")
	id = strings.TrimSpace(id)
	if !strings.HasPrefix(id, "C-1") {
		t.Fatalf("customer add printed %q, want a new C-number", id)
	}
	if out, _ := run("customer", "list"); !strings.Contains(out, id) || !strings.Contains(out, "Walter Skinner") {
		t.Errorf("customer list: %q", out)
	}
	key, _ := run("apikey", "create", "-actor", "agent:dana")
	if !strings.HasPrefix(key, "hd_") {
		t.Fatalf("apikey create printed %q", key)
	}
	out, _ := run("apikey", "list", "-actor", "agent:dana")
	if !strings.Contains(out, "agent:dana") || strings.Contains(out, strings.TrimSpace(key)) {
		t.Errorf("apikey list: %q (must never show the key)", out)
	}
	run("apikey", "revoke", "1")
	if out, _ := run("apikey", "list"); !strings.Contains(out, "agent:dana") || strings.Count(out, "\n") != 2 {
		t.Errorf("apikey list after revoke: %q", out)
	}
	run("agent", "disable", "fox")
	if out, _ := run("agent", "list"); !strings.Contains(out, "disabled") {
		t.Errorf("agent list after disable: %q", out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "add", "Dana!", "-email", "d@example.com", "-team", "billing"}, "agent name"},
		{[]string{"agent", "add", "eve", "-email", "not an address", "-team", "billing"}, "-email"},
		{[]string{"agent", "add", "eve", "-email", "eve@example.com", "-team", "Billing Team"}, "-team"},
		{[]string{"agent", "add", "eve", "-email", "dana@support.example.com", "-team", "billing"}, "another agent has the address"},
		{[]string{"agent", "add", "eve", "-email", "DANA@Support.example.com", "-team", "billing"}, "another agent has the address"},
		{[]string{"agent", "disable", "nobody"}, "there is no agent nobody"},
		{[]string{"customer", "add", "-email", "walter@example.com", "-name", "Again"}, "exists already"},
		{[]string{"customer", "add", "-email", "x@example.com"}, "-name"},
		{[]string{"apikey", "revoke", "999"}, "there is no API key 999"},
		{[]string{"apikey", "revoke", "x"}, "positive integer"},
		{[]string{"apikey", "create", "-actor", "agent:nobody"}, "there is no agent nobody"},
		{[]string{"agent", "fire", "dana"}, "want agent add"},
		// Bytes PostgreSQL's text refuses are refused before it sees them.
		{[]string{"agent", "disable", "d\xffna"}, "argument 3 is not UTF-8 text"},
		{[]string{"mailbox", "status", "\xfe"}, "argument 3 is not UTF-8 text"},
		{[]string{"customer", "add", "-email", "y@example.com", "-name", "Walter\tWhite"}, "-name: want the customer's name: name must not contain control characters"},
		{[]string{"agent", "add", "eve", "-email", "eve@example.com", "-team", "billing", "-name", strings.Repeat("E", 201)}, "-name: name must be 1 to 200 characters"},
	} {
		if code, _, stderr := runCmd(t, env, tc.args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 naming %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestAScratchDatabaseIsDroppedWhenTheRunIsInterrupted: the drop has time
// of its own, so a run stopped by Ctrl-C (its context cancelled) leaves
// no database behind.
func TestAScratchDatabaseIsDroppedWhenTheRunIsInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	dbURL, drop, err := scratchDatabase(ctx, storetest.URL(), jobstest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	cancel()
	drop()
	var left bool
	if err := storetest.NewPool(t).QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left {
		t.Errorf("the scratch database %s is left behind", name)
	}
}
