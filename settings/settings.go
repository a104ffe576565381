// Package settings declares each configuration value once: its environment variable, flag, default and help, next to the code it configures.
//
// It is a folder of its own because every subsystem (store, desk, jobs,
// api, inbound, mail, provider) declares a table of its settings with it,
// and the commands compose those tables into their flags, read the
// environment through them, and generate the configuration reference
// (docs/configuration.md) from them; so a new setting is one line, and its
// default, its help and its documentation cannot drift apart.
package settings

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Setting is one configuration value: where it comes from, its default,
// what it means, and the field it fills.
type Setting struct {
	Env     string // the environment variable; "" for a flag only
	Flag    string // the flag's name, without the dash
	Default string // the default as it would be written; "" for none
	Help    string
	Secret  bool // its value is never shown, in help, errors or logs

	parse  func(string) error // fills the field from a value; "" is not passed
	isZero func() bool        // reports whether the field holds its zero value
}

// Name is how errors name the setting: "HELPDESK_X (-x)".
func (s *Setting) Name() string {
	switch {
	case s.Env == "":
		return "-" + s.Flag
	case s.Flag == "":
		return s.Env
	}
	return s.Env + " (-" + s.Flag + ")"
}

// Set fills the field from v; an empty v leaves it as it is. A value the
// setting cannot take is an *Error that names the setting and says what
// it wants, without a secret.
func (s *Setting) Set(v string) error {
	if v == "" {
		return nil
	}
	if err := s.parse(v); err != nil {
		var want *Want
		if !errors.As(err, &want) {
			want = &Want{What: err.Error()}
		}
		return &Error{Setting: s.Name(), Value: Mask(s, v), Want: want.What}
	}
	return nil
}

// Apply fills the field from v, or from the default when v is empty.
func (s *Setting) Apply(v string) error {
	if err := s.Set(s.Default); err != nil {
		return fmt.Errorf("the default of %w", err)
	}
	return s.Set(v)
}

// Want is what a parse function says it wanted, for Error.
type Want struct{ What string }

func (w *Want) Error() string { return "want " + w.What }

// Wantf makes a Want.
func Wantf(format string, args ...any) error { return &Want{What: fmt.Sprintf(format, args...)} }

// Error is a value a setting cannot take.
type Error struct {
	Setting string // "HELPDESK_X (-x)"
	Value   string // masked
	Want    string
}

func (e *Error) Error() string { return fmt.Sprintf("%s = %q: want %s", e.Setting, e.Value, e.Want) }

// Defaults fills every field that holds its zero value with its
// setting's default: the configuration of code built without flags, such
// as tests and tools, is serve's.
func Defaults(list []Setting) {
	for i := range list {
		s := &list[i]
		if s.Default != "" && s.isZero() {
			if err := s.Set(s.Default); err != nil {
				panic("settings: the default of " + err.Error()) // a mistake in a table, found by any test
			}
		}
	}
}

// Duration is a positive duration such as 2s or 1m.
func Duration(p *time.Duration, env, flag, def, help string) Setting {
	return Setting{Env: env, Flag: flag, Default: def, Help: help, isZero: func() bool { return *p == 0 },
		parse: func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return Wantf("a positive duration such as 2s or 1m")
			}
			*p = d
			return nil
		}}
}

// Int is a whole number of 1 or more.
func Int(p *int, env, flag, def, help string) Setting {
	return Setting{Env: env, Flag: flag, Default: def, Help: help, isZero: func() bool { return *p == 0 },
		parse: func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return Wantf("a whole number of 1 or more")
			}
			*p = n
			return nil
		}}
}

// Int64 is Int for a larger range, such as sizes in bytes.
func Int64(p *int64, env, flag, def, help string) Setting {
	return Setting{Env: env, Flag: flag, Default: def, Help: help, isZero: func() bool { return *p == 0 },
		parse: func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return Wantf("a whole number of 1 or more")
			}
			*p = n
			return nil
		}}
}

// Bool is 1 or 0 (true and false are taken too). Its zero value is false,
// so Defaults never turns it on: code built without flags opts in.
func Bool(p *bool, env, flag, def, help string) Setting {
	return Setting{Env: env, Flag: flag, Default: def, Help: help, isZero: func() bool { return false },
		parse: func(v string) error {
			switch v {
			case "1", "true":
				*p = true
			case "0", "false":
				*p = false
			default:
				return Wantf("1 or 0")
			}
			return nil
		}}
}

// Text is any text.
func Text(p *string, env, flag, def, help string) Setting {
	return Setting{Env: env, Flag: flag, Default: def, Help: help, isZero: func() bool { return *p == "" },
		parse: func(v string) error { *p = v; return nil }}
}

// Secret is text that is never shown.
func Secret(p *string, env, flag, help string) Setting {
	s := Text(p, env, flag, "", help)
	s.Secret = true
	return s
}

// Func is a setting whose value parse reads; parse returns Wantf("…") for
// a value it cannot take. Defaults leaves it alone.
func Func(env, flag, def, help string, parse func(string) error) Setting {
	return Setting{Env: env, Flag: flag, Default: def, Help: help, parse: parse, isZero: func() bool { return false }}
}

// ZeroWhen says when s's field holds its zero value, so that Defaults
// fills a Func setting too.
func (s Setting) ZeroWhen(isZero func() bool) Setting {
	s.isZero = isZero
	return s
}

// Find returns the setting of an environment variable in list, nil if
// there is none.
func Find(list []Setting, env string) *Setting {
	for i := range list {
		if list[i].Env == env {
			return &list[i]
		}
	}
	return nil
}

// secretName matches the settings whose values are secrets by their name.
var secretName = regexp.MustCompile(`(?i)(key|secret|password|token)`)

// dsnPassword is the password of a key=value connection string.
var dsnPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// Mask is a setting's value fit to print: a secret's whole value and a
// URL's password are replaced. A URL that does not parse is masked from
// its "://" to its last "@", so that a password with characters that break
// the parse (%zz, #, @) is never shown either.
func Mask(s *Setting, value string) string {
	if value == "" {
		return ""
	}
	if s.Secret || secretName.MatchString(s.Env+s.Flag) {
		return "********"
	}
	return MaskURL(value)
}

// MaskURL hides the password of a URL, or of a key=value connection
// string, in text that may hold one.
func MaskURL(value string) string {
	if dsnPassword.MatchString(value) { // host=… password=… dbname=…
		return dsnPassword.ReplaceAllString(value, "${1}xxxxx")
	}
	scheme, rest, ok := strings.Cut(value, "://")
	if !ok {
		return value
	}
	if u, err := url.Parse(value); err == nil {
		if u.User == nil {
			return value
		}
		if _, has := u.User.Password(); !has {
			return value
		}
		return u.Redacted()
	}
	// Unparseable: whatever sits between :// and the last @ may be a
	// password; the host after it is kept, so the error still says where.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "://xxxxx" + rest[at:]
	}
	return value
}

// HostPort is an address to listen on, host:port with a port from 0 to
// 65535; "" for none.
func HostPort(p *string, env, flag, def, help string) Setting {
	return Setting{Env: env, Flag: flag, Default: def, Help: help, isZero: func() bool { return *p == "" },
		parse: func(v string) error {
			if err := checkHostPort(v); err != nil {
				return err
			}
			*p = v
			return nil
		}}
}

// LoopbackHostPort is HostPort on a loopback address only, for listeners
// without authentication.
func LoopbackHostPort(p *string, env, flag, help string) Setting {
	s := HostPort(p, env, flag, "", help)
	s.parse = func(v string) error {
		if err := checkHostPort(v); err != nil {
			return err
		}
		host, _, _ := net.SplitHostPort(v)
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return Wantf("a loopback address such as 127.0.0.1:6060 (it has no authentication)")
		}
		*p = v
		return nil
	}
	return s
}

func checkHostPort(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return Wantf("host:port, such as 127.0.0.1:8080")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return Wantf("host:port with a port from 0 to 65535")
	}
	return nil
}

// URL is an http or https URL (or of the schemes given); "" for none.
func URL(p *string, env, flag, def, help string, schemes ...string) Setting {
	if len(schemes) == 0 {
		schemes = []string{"http", "https"}
	}
	return Setting{Env: env, Flag: flag, Default: def, Help: help, isZero: func() bool { return *p == "" },
		parse: func(v string) error {
			u, err := url.Parse(v)
			if err == nil && u.Host != "" {
				for _, scheme := range schemes {
					if strings.EqualFold(u.Scheme, scheme) {
						*p = v
						return nil
					}
				}
			}
			return Wantf("a URL such as %s://host/…, of scheme %s", schemes[0], strings.Join(schemes, " or "))
		}}
}
