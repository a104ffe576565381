// Command helpdesk runs the helpdesk worker service: its API, its queue and their tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"unicode/utf8"

	"github.com/helpdesk-dev/helpdesk/settings"
)

const usage = `helpdesk: a worker service for support teams

usage: helpdesk <command> [flags]

commands:
  migrate     apply the database migrations (River's and helpdesk's); safe to run twice
  serve       run the API and the triage workers until SIGTERM or SIGINT
  jobs        look at and retry jobs: jobs show ID, jobs dead, jobs retry ID
  apikey      API keys: apikey create -actor customer:C-0022 | agent:NAME, apikey list, apikey revoke ID
  load        load the demo's customers and agents, or your own with -dir (-reset empties everything first)
  agent       add, list and disable agents: agent add NAME -email ADDR -team TEAM
  customer    add and list customers: customer add -email ADDR -name NAME
  mailbox     IMAP mailboxes the workers fetch: mailbox add NAME -imap imaps://… -address ADDR, list, status, disable, connect
  ticket      ticket similar ID: the solved tickets most like one, by their embeddings
  sla         SLA targets per priority: sla set -priority 1 -first-response 1h, list, delete, due
  calendar    business hours for SLA clocks: calendar set NAME -tz Europe/Berlin -hours "Mon-Fri 09:00-17:00"
  demo        show both kinds of duplicate made harmless, on a scratch database (demo build)
  simulator   run the simulated AI provider on its own
  provider    show the AI provider's circuit breaker and pace
  suppressions  list (or -clear) the addresses that bounced for good
  mail        mail reparse MESSAGE: read an inbound message again from its raw mail
  burst       replay 180 tickets against a provider quota, time-scaled, and chart it (demo build)
  version     print the module version and the VCS revision it was built from

Every command logs to stderr at HELPDESK_LOG_LEVEL (debug, info, warn, error; default info)
in HELPDESK_LOG_FORMAT (text or json; default text).

Run "helpdesk <command> --help" for a command's flags.
`

// demoCommands are the commands of a binary built with -tags demo: the
// duplicate demo and the burst, with the crash hooks they need.
var demoCommands = map[string]func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run runs one command and returns the exit code: 0 done, 1 failed, 2 bad usage.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	// No secret the environment or the arguments hold reaches the output,
	// whatever error or log line quotes it.
	scrubOut, scrubErr := settings.NewScrubber(stdout), settings.NewScrubber(stderr)
	for _, sc := range []*settings.Scrubber{scrubOut, scrubErr} {
		hideSecrets(sc, getenv, args)
	}
	stdout, stderr = scrubOut, scrubErr
	logger, err := newLogger(getenv("HELPDESK_LOG_LEVEL"), getenv("HELPDESK_LOG_FORMAT"), stderr)
	if err != nil {
		fmt.Fprintf(stderr, "helpdesk: %v\n", err)
		return 2
	}
	// Names, addresses and numbers are UTF-8, as PostgreSQL's text is: an
	// argument that is not is refused here, not by the database. It is not
	// quoted back, as it may be a secret.
	for i, a := range args {
		if !utf8.ValidString(a) {
			fmt.Fprintf(stderr, "helpdesk: argument %d is not UTF-8 text\n", i+1)
			return 2
		}
	}
	switch args[0] {
	case "migrate":
		err = cmdMigrate(ctx, args[1:], getenv, stdout, stderr)
	case "serve":
		err = cmdServe(ctx, args[1:], getenv, logger, stdout, stderr)
	case "jobs":
		err = cmdJobs(ctx, args[1:], getenv, stdout, stderr)
	case "apikey":
		err = cmdAPIKey(ctx, args[1:], getenv, stdout, stderr)
	case "load":
		err = cmdLoad(ctx, args[1:], getenv, stdout, stderr)
	case "simulator":
		err = cmdSimulator(ctx, args[1:], getenv, logger, stdout, stderr)
	case "agent":
		err = cmdAgent(ctx, args[1:], getenv, stdout, stderr)
	case "customer":
		err = cmdCustomer(ctx, args[1:], getenv, stdout, stderr)
	case "mail":
		err = cmdMail(ctx, args[1:], getenv, stdout, stderr)
	case "suppressions":
		err = cmdSuppressions(ctx, args[1:], getenv, stdout, stderr)
	case "mailbox":
		err = cmdMailbox(ctx, args[1:], getenv, stdout, stderr)
	case "ticket":
		err = cmdTicket(ctx, args[1:], getenv, stdout, stderr)
	case "sla":
		err = cmdSLA(ctx, args[1:], getenv, stdout, stderr)
	case "calendar":
		err = cmdCalendar(ctx, args[1:], getenv, stdout, stderr)
	case "provider":
		err = cmdProvider(ctx, args[1:], getenv, stdout, stderr)
	case "version":
		err = cmdVersion(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		demo, ok := demoCommands[args[0]]
		switch {
		case ok:
			err = demo(ctx, args[1:], getenv, stdout, stderr)
		case args[0] == "demo" || args[0] == "burst":
			fmt.Fprintf(stderr, "helpdesk: %s is not in this binary: it is built without the demo (make demo builds one with it: go build -tags demo ./cmd/helpdesk)\n", args[0])
			return 2
		default:
			fmt.Fprintf(stderr, "helpdesk: unknown command %q\n\n%s", args[0], usage)
			return 2
		}
	}
	var usageErr *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "helpdesk %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "helpdesk %s: %v\n", args[0], err)
		return 1
	}
}

// newLogger is the logger of HELPDESK_LOG_LEVEL and HELPDESK_LOG_FORMAT;
// a value it does not know is an error, not a silent default.
func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	var json bool
	list := logSettings(&l, &json)
	for i, v := range []string{level, format} {
		if err := list[i].Apply(v); err != nil {
			return nil, err
		}
	}
	opts := &slog.HandlerOptions{Level: l}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// version is stamped by make build (-ldflags "-X main.version=…", from git
// describe); go install leaves it empty, and the module's version stands.
var version string

// cmdVersion prints what the build info says: the module's version, the
// VCS revision and time, and the Go version.
func cmdVersion(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		if wantsHelp(args) {
			fmt.Fprintln(stdout, "usage: helpdesk version\n\nPrints the module version, the VCS revision and time it was built from, and the Go version.")
			return nil
		}
		return usageErrorf("version takes no arguments")
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return errors.New("this binary has no build info")
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	revision := settings["vcs.revision"]
	if revision == "" {
		revision = "unknown (built outside a VCS checkout, or with -buildvcs=false)"
	} else if settings["vcs.modified"] == "true" {
		revision += " (with uncommitted changes)"
	}
	v := info.Main.Version
	if version != "" {
		v = version
	}
	fmt.Fprintf(stdout, "helpdesk %s\nmodule %s\nrevision %s\n", v, info.Main.Path, revision)
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(stdout, "committed %s\n", t)
	}
	fmt.Fprintf(stdout, "built with %s\n", info.GoVersion)
	return nil
}
