package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/settings"
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
	return usageErrorf("%s = %q: want %s", s.name(), masked(s.env+s.flag, s.val), want)
}

// pick is the settings of list with these environment variables, for a
// command that takes a few of a subsystem's.
func pick(list []settings.Setting, envs ...string) []settings.Setting {
	var out []settings.Setting
	for _, env := range envs {
		s := settings.Find(list, env)
		if s == nil {
			panic("no setting " + env) // a mistake in the command, found by any test of it
		}
		out = append(out, *s)
	}
	return out
}

// masked is a flag's value fit to print: a URL's password and a secret's
// whole value are replaced.
func masked(name, value string) string {
	return settings.Mask(&settings.Setting{Env: name}, value)
}

// flagSet is a subcommand's flags with their environment variables.
// Asked for help, it prints to stdout; a mistake goes to stderr.
type flagSet struct {
	*flag.FlagSet
	getenv   func(string) string
	stdout   io.Writer
	stderr   io.Writer
	usageOut io.Writer
	declared []declared // the settings of subsystems' tables, applied by parse
}

// declared is a setting of a table and the flag's value that fills it.
type declared struct {
	setting settings.Setting
	value   *string
}

// declare adds the settings' flags. After parse, each setting's field is
// filled from its flag, else its environment variable, else its default;
// a value it cannot take is a usage error that names it.
func (fs *flagSet) declare(list ...settings.Setting) {
	for _, s := range list {
		v := s.Default
		usage := s.Help
		if s.Env != "" {
			if e := fs.getenv(s.Env); e != "" {
				v = e
			}
			usage += " [$" + s.Env + "]"
		}
		value := new(string)
		fs.StringVar(value, s.Flag, v, usage)
		fs.Lookup(s.Flag).DefValue = settings.Mask(&s, v)
		fs.declared = append(fs.declared, declared{setting: s, value: value})
	}
}

// asGiven is a setting's error with the value as it was given (a check of
// several settings together sees only what they were parsed into), as a
// usage error.
func (fs *flagSet) asGiven(err error) error {
	var se *settings.Error
	if !errors.As(err, &se) {
		return err
	}
	for _, d := range fs.declared {
		if d.setting.Name() == se.Setting {
			se.Value = settings.Mask(&d.setting, *d.value)
		}
	}
	return &usageError{msg: se.Error()}
}

// apply fills the declared settings' fields, in the order declared.
func (fs *flagSet) apply() error {
	for i := range fs.declared {
		d := &fs.declared[i]
		if err := d.setting.Apply(*d.value); err != nil {
			var se *settings.Error
			if errors.As(err, &se) {
				return &usageError{msg: se.Error()}
			}
			return err
		}
	}
	return nil
}

func newFlagSet(name, synopsis, about string, getenv func(string) string, stdout, stderr io.Writer) *flagSet {
	f := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), getenv: getenv, stdout: stdout, stderr: stderr, usageOut: stderr}
	f.SetOutput(stderr)
	f.Usage = func() {
		w := f.usageOut
		fmt.Fprintf(w, "usage: helpdesk %s\n\n%s\n", synopsis, about)
		var any bool
		f.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintf(w, "\nflags (each defaults to the environment variable named in brackets):\n")
			f.SetOutput(w)
			f.PrintDefaults()
			f.SetOutput(f.stderr)
		}
	}
	return f
}

// setting declares a flag that defaults to $env, else to def. The default
// shown in the usage never holds a secret.
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
	fs.Lookup(flagName).DefValue = masked(env+flagName, v)
	return s
}

// wantsHelp reports whether the arguments ask for help anywhere before a
// "--", a subcommand's arguments included.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// parse reads the arguments; -h and --help anywhere print the usage to
// stdout and are not an error.
func (fs *flagSet) parse(args []string) error {
	if wantsHelp(args) {
		fs.usageOut = fs.stdout
		fs.Usage()
		return flag.ErrHelp
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return usageErrorf("%v", err)
	}
	return fs.apply()
}

// parseNoArgs is parse for a command that takes flags only.
func (fs *flagSet) parseNoArgs(args []string) error {
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
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

// urlOf accepts a URL with one of the schemes (an empty value too, when
// the setting is optional).
func (s *setting) urlOf(schemes ...string) error {
	if s.val == "" {
		return nil
	}
	u, err := url.Parse(s.val)
	if err == nil {
		for _, scheme := range schemes {
			if strings.EqualFold(u.Scheme, scheme) && (u.Host != "" || strings.HasPrefix(scheme, "postgres")) {
				return nil
			}
		}
	}
	return s.fail("a URL such as " + schemes[0] + "://host/…, of scheme " + strings.Join(schemes, " or "))
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

// allSettings are every setting any command declares: the ones whose
// values a scrubber must know.
func allSettings() []settings.Setting {
	var cfg serveConfig
	var level slog.Level
	var json bool
	var simulatorAddr string
	list := append(logSettings(&level, &json), simulatorSettings(&simulatorAddr)...)
	for _, g := range cfg.groups() {
		list = append(list, g.Settings...)
	}
	return list
}

// hideSecrets tells sc every secret the environment and the arguments
// hold: secret settings whole, passwords of URLs and connection strings.
func hideSecrets(sc *settings.Scrubber, getenv func(string) string, args []string) {
	list := allSettings()
	byFlag := map[string]*settings.Setting{}
	for i := range list {
		s := &list[i]
		if s.Env != "" {
			sc.Hide(settings.SecretParts(s, getenv(s.Env))...)
		}
		if s.Flag != "" {
			byFlag[s.Flag] = s
		}
	}
	for i, a := range args {
		name, value, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if s, ok := byFlag[name]; ok && strings.HasPrefix(a, "-") {
			if !inline && i+1 < len(args) {
				value = args[i+1]
			}
			sc.Hide(settings.SecretParts(s, value)...)
		}
		sc.Hide(settings.SecretParts(nil, a)...)
	}
}
