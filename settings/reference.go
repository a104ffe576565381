package settings

import (
	"fmt"
	"io"
	"strings"
)

// Group is the settings of one subsystem, for the reference.
type Group struct {
	Title    string // "Inbound mail"
	About    string // one paragraph: what the group configures
	Settings []Setting
}

// Reference writes the configuration reference: a table of each group's
// settings (variable, flag, default, meaning). It is generated, never
// written by hand: docs/configuration.md is its output.
func Reference(w io.Writer, title, intro string, groups []Group) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n%s\n", title, intro)
	for _, g := range groups {
		fmt.Fprintf(&b, "\n## %s\n\n", g.Title)
		if g.About != "" {
			fmt.Fprintf(&b, "%s\n\n", g.About)
		}
		b.WriteString("| variable | flag | default | meaning |\n|---|---|---|---|\n")
		for _, s := range g.Settings {
			env, flag, def := "", "", "unset"
			if s.Env != "" {
				env = "`" + s.Env + "`"
			}
			if s.Flag != "" {
				flag = "`-" + s.Flag + "`"
			}
			if s.Default != "" {
				def = "`" + Mask(&s, s.Default) + "`"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", env, flag, def, cell(s.Help))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell makes text fit in a table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
