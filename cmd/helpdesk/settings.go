package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"helpdesk/desk"
)

// usageError is a mistake in the command line or the environment: exit 2,
// with the message, and nothing done.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// setting is one configuration value: a flag whose default comes from an
// environment variable, so both name it in their errors.
type setting struct {
	env  string
	flag string
	val  string
}

func (s *setting) name() string {
	if s.env == "" {
		return "-" + s.flag
	}
	return s.env + " (-" + s.flag + ")"
}

func (s *setting) fail(want string) error {
	return usageErrorf("%s = %q: want %s", s.name(), s.val, want)
}

// flagSet is a subcommand's flags with their environment variables.
type flagSet struct {
	*flag.FlagSet
	getenv func(string) string
}

func newFlagSet(name, synopsis, about string, getenv func(string) string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: helpdesk %s\n\n%s\n", synopsis, about)
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintf(stderr, "\nflags (each defaults to the environment variable named in brackets):\n")
			fs.PrintDefaults()
		}
	}
	return &flagSet{FlagSet: fs, getenv: getenv}
}

// setting declares a flag that defaults to $env, else to def.
func (fs *flagSet) setting(flagName, env, def, usage string) *setting {
	s := &setting{env: env, flag: flagName}
	v := def
	if env != "" {
		if e := fs.getenv(env); e != "" {
			v = e
		}
		usage += " [$" + env + "]"
	}
	fs.StringVar(&s.val, flagName, v, usage)
	return s
}

// parse reads the arguments; -h and --help print the usage and are not an error.
func (fs *flagSet) parse(args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return usageErrorf("%v", err)
	}
	return nil
}

func (s *setting) duration() (time.Duration, error) {
	d, err := time.ParseDuration(s.val)
	if err != nil || d <= 0 {
		return 0, s.fail("a positive duration such as 2s or 1m")
	}
	return d, nil
}

func (s *setting) positiveInt() (int, error) {
	n, err := strconv.Atoi(s.val)
	if err != nil || n < 1 {
		return 0, s.fail("a whole number of 1 or more")
	}
	return n, nil
}

func (s *setting) required() (string, error) {
	if strings.TrimSpace(s.val) == "" {
		return "", usageErrorf("%s is not set", s.name())
	}
	return s.val, nil
}

// hostPort accepts host:port with a valid port.
func (s *setting) hostPort() (string, error) {
	_, port, err := net.SplitHostPort(s.val)
	if err != nil {
		return "", s.fail("host:port, such as 127.0.0.1:8080")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", s.fail("host:port with a port from 0 to 65535")
	}
	return s.val, nil
}

// loopbackAddr accepts host:port on a loopback address only, for services
// without authentication such as the simulator.
func (s *setting) loopbackAddr() (string, error) {
	if _, err := s.hostPort(); err != nil {
		return "", err
	}
	host, _, _ := net.SplitHostPort(s.val)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", s.fail("a loopback address such as 127.0.0.1:8090 (it has no authentication)")
	}
	return s.val, nil
}

// errs collects the first error of several conversions, so that one pass
// reports on every setting in order.
type errs struct{ err error }

func duration(e *errs, s *setting) time.Duration {
	d, err := s.duration()
	e.keep(err)
	return d
}

func positiveInt(e *errs, s *setting) int {
	n, err := s.positiveInt()
	e.keep(err)
	return n
}

func (e *errs) keep(err error) {
	if e.err == nil {
		e.err = err
	}
}

// set reports whether the flag was given on the command line.
func (fs *flagSet) set(name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// attachmentMaxSetting is the largest attachment whose content is kept.
func attachmentMaxSetting(fs *flagSet) *setting {
	return fs.setting("attachment-max-bytes", "HELPDESK_ATTACHMENT_MAX_BYTES", strconv.Itoa(desk.DefaultAttachmentMaxBytes),
		"largest attachment whose content is kept (in mail, larger ones keep only their name, type and size) or uploaded")
}
