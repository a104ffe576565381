package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/helpdesk-dev/helpdesk/settings"
)

// logSettings are the two settings every command reads before its own
// flags: they shape the log of the command itself.
func logSettings(level *slog.Level, json *bool) []settings.Setting {
	return []settings.Setting{
		settings.Func("HELPDESK_LOG_LEVEL", "", "info", "`debug`, `info`, `warn` or `error`; every command logs to stderr at this level",
			func(v string) error {
				if err := level.UnmarshalText([]byte(v)); err != nil {
					return settings.Wantf("debug, info, warn or error")
				}
				return nil
			}),
		settings.Func("HELPDESK_LOG_FORMAT", "", "text", "`text` or `json` (slog), for a log collector",
			func(v string) error {
				switch v {
				case "text", "json":
					*json = v == "json"
					return nil
				}
				return settings.Wantf("text or json")
			}),
	}
}

// referenceIntro opens docs/configuration.md.
const referenceIntro = `Every setting of helpdesk, generated from the declarations next to the code each configures
(` + "`go test ./cmd/helpdesk -run TestConfigurationReference -update`" + `, or ` + "`make docs`" + `, writes this file;
a test fails when it is stale). Each is an environment variable and the flag of the same name on the
commands that take it (` + "`helpdesk serve --help`" + ` lists serve's); a flag wins over the variable, the
variable over the default. A value a setting cannot take stops the command with a message that names
the variable, and exit code 2. Passwords in URLs and secrets are never shown, in help or errors.`

// configurationReference writes docs/configuration.md.
func configurationReference(w io.Writer) error {
	var cfg serveConfig
	var level slog.Level
	var json bool
	var simulatorAddr string
	groups := append([]settings.Group{{Title: "Logging", About: "Read by every command, from the environment only.",
		Settings: logSettings(&level, &json)}}, cfg.groups()...)
	groups = append(groups, settings.Group{Title: "The simulated provider", About: "`helpdesk simulator`, the AI provider's stand-in.",
		Settings: simulatorSettings(&simulatorAddr)})
	if err := settings.Reference(w, "Configuration", referenceIntro, groups); err != nil {
		return fmt.Errorf("configuration reference: %w", err)
	}
	return nil
}
