// Package migrations holds helpdesk's numbered schema migrations as embedded SQL files.
//
// Each version N has NNN_name.up.sql and NNN_name.down.sql. store.Migrate
// applies them after River's own migrations; add a file pair here, never edit
// one that has shipped.
package migrations

import "embed"

// FS holds every *.up.sql and *.down.sql file of this folder.
//
//go:embed *.sql
var FS embed.FS
