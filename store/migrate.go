package store

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/helpdesk-dev/helpdesk/migrations"
)

// migrationLockID serialises concurrent `helpdesk migrate` runs on one
// schema; any constant unlikely to collide with another application's
// advisory lock will do. The lock's second key is the schema's name
// (hashtext), so that runs on two schemas of one database (two desks, or
// the tests' schemas, several hundred a run) do not wait for each other.
const migrationLockID = 0x68656c70 // "help"

// Migration is one numbered step of helpdesk's schema.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

// MigrateResult tells which of our versions a run applied or rolled back,
// and River's schema version afterwards.
type MigrateResult struct {
	Versions     []int
	RiverVersion int
}

var migrationFileRE = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.(up|down)\.sql$`)

// Migrations returns helpdesk's migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, entry := range entries {
		m := migrationFileRE.FindStringSubmatch(entry.Name())
		if m == nil {
			continue
		}
		version, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(migrations.FS, entry.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", entry.Name(), err)
		}
		mig := byVersion[version]
		if mig == nil {
			mig = &Migration{Version: version, Name: m[2]}
			byVersion[version] = mig
		}
		if m[3] == "up" {
			mig.Up = string(body)
		} else {
			mig.Down = string(body)
		}
	}
	var out []Migration
	for _, mig := range byVersion {
		if mig.Up == "" || mig.Down == "" {
			return nil, fmt.Errorf("migration %03d_%s needs both an up and a down file", mig.Version, mig.Name)
		}
		out = append(out, *mig)
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, mig := range out {
		if mig.Version != i+1 {
			return nil, fmt.Errorf("migration versions must run 1, 2, 3…: found %03d at position %d", mig.Version, i+1)
		}
	}
	return out, nil
}

// MigrateUp applies River's migrations and then every helpdesk migration not
// yet applied, holding the schema's migration lock: a run beside it on the
// same schema (another replica's, at a deploy) waits, then finds nothing
// to apply. Running it again changes nothing.
func MigrateUp(ctx context.Context, pool *pgxpool.Pool) (*MigrateResult, error) {
	unlock, err := lockMigrations(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer unlock()
	riverResult, err := migrateRiver(ctx, pool, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, err
	}
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	result := &MigrateResult{RiverVersion: riverResult}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		applied, err := readApplied(ctx, tx)
		if err != nil {
			return err
		}
		for _, mig := range all {
			if applied[mig.Version] {
				continue
			}
			if _, err := tx.Exec(ctx, mig.Up); err != nil {
				return fmt.Errorf("apply migration %03d_%s: %w", mig.Version, mig.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO helpdesk_migration (version, name) VALUES ($1, $2)`, mig.Version, mig.Name); err != nil {
				return fmt.Errorf("record migration %03d: %w", mig.Version, err)
			}
			result.Versions = append(result.Versions, mig.Version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

// MigrateDown rolls back the newest `steps` helpdesk migrations. With
// withRiver it then removes River's tables too, which only makes sense once
// all of ours are gone.
func MigrateDown(ctx context.Context, pool *pgxpool.Pool, steps int, withRiver bool) (*MigrateResult, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	unlock, err := lockMigrations(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer unlock()
	result := &MigrateResult{}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		applied, err := readApplied(ctx, tx)
		if err != nil {
			return err
		}
		for i := len(all) - 1; i >= 0 && len(result.Versions) < steps; i-- {
			mig := all[i]
			if !applied[mig.Version] {
				continue
			}
			if _, err := tx.Exec(ctx, mig.Down); err != nil {
				return fmt.Errorf("roll back migration %03d_%s: %w", mig.Version, mig.Name, err)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM helpdesk_migration WHERE version = $1`, mig.Version); err != nil {
				return fmt.Errorf("unrecord migration %03d: %w", mig.Version, err)
			}
			result.Versions = append(result.Versions, mig.Version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if withRiver {
		if result.RiverVersion, err = migrateRiver(ctx, pool, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1}); err != nil {
			return nil, err
		}
	}
	return result, nil
}

// PendingMigrations returns the versions of helpdesk migrations not yet
// applied, so `serve` can refuse to start on an old schema.
func PendingMigrations(ctx context.Context, db DBTX) ([]int, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('helpdesk_migration') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("look for helpdesk_migration: %w", err)
	}
	applied := map[int]bool{}
	if exists {
		rows, err := db.Query(ctx, `SELECT version FROM helpdesk_migration`)
		if err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		for _, v := range versions {
			applied[v] = true
		}
	}
	var pending []int
	for _, mig := range all {
		if !applied[mig.Version] {
			pending = append(pending, mig.Version)
		}
	}
	return pending, nil
}

// lockMigrations waits for the migration lock of pool's schema and takes
// it, on a connection of its own, for River's migrations and ours: River's
// migrator takes no lock, and two runs at once on a new schema failed
// in River's steps, each creating what the other had. Closing the
// connection lets go of its lock however the run ended, so the lock never
// stays behind on a pooled connection.
func lockMigrations(ctx context.Context, pool *pgxpool.Pool) (unlock func(), err error) {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	unlock = func() { _ = conn.Close(context.Background()) }
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, migrationLockID); err != nil {
		unlock()
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	return unlock, nil
}

// readApplied reads which of our migrations the schema has.
func readApplied(ctx context.Context, tx pgx.Tx) (map[int]bool, error) {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS helpdesk_migration (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return nil, fmt.Errorf("create helpdesk_migration: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT version FROM helpdesk_migration`)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}

func migrateRiver(ctx context.Context, pool *pgxpool.Pool, direction rivermigrate.Direction, opts *rivermigrate.MigrateOpts) (int, error) {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return 0, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, direction, opts); err != nil {
		return 0, fmt.Errorf("river migrations %s: %w", direction, err)
	}
	if direction == rivermigrate.DirectionDown && opts != nil && opts.TargetVersion == -1 {
		return 0, nil // River's tables, river_migration included, are gone
	}
	versions, err := migrator.ExistingVersions(ctx)
	if err != nil {
		return 0, fmt.Errorf("river migration status: %w", err)
	}
	if len(versions) == 0 {
		return 0, nil
	}
	return versions[len(versions)-1].Version, nil
}
