package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/golang-migrate/migrate/v4"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/schema"
)

var migrateCmd = &command{
	name:    "migrate",
	args:    "up|down|version|force N [--yes]",
	summary: "create, drop or inspect the election table (embedded golang-migrate migrations)",
	detail: `  up         apply every pending migration (creates ` + election.DefaultTable + `)
  down       revert every migration: DROPS the table and every election in it
             (asks on a terminal; --yes to confirm otherwise)
  version    print the applied version
  force N    record version N without running anything, after a failed
             migration left the schema dirty (-1: none)

The applied version is kept in the table ` + schema.MigrationsTable + `. The DSN must name
a database; migrate manages the table ` + election.DefaultTable + ` only (to use another
name, copy the DDL from package schema into your own migrations).`,
	example: `export SQLELECT_DSN='app:secret@tcp(db:3306)/app'
sqlelect migrate up
sqlelect migrate version`,
	run: (*cli).migrate,
}

func (c *cli) migrate(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	yes := fs.Bool("yes", false, "do not ask before migrate down")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return failf(exitUsage, "missing action: up, down, version or force N (see 'sqlelect migrate --help')")
	}
	action := args[0]
	var forceTo int
	switch {
	case (action == "up" || action == "down" || action == "version") && len(args) == 1:
	case action == "force" && len(args) == 2:
		forceTo, err = strconv.Atoi(args[1])
		if err != nil || forceTo < -1 {
			return failf(exitUsage, "force %q: the version must be an integer, -1 or more", args[1])
		}
	default:
		return failf(exitUsage, "invalid arguments %q: want up, down, version or force N", args)
	}
	if co.table != election.DefaultTable {
		return failf(exitUsage, "--table %s: migrate manages the table %s only", co.table, election.DefaultTable)
	}

	// Check the connection first, for a precise exit code.
	db, err := co.connect(context.Background(), nil)
	if err != nil {
		return err
	}
	db.Close()
	cfg, _, err := co.dsnConfig()
	if err != nil {
		return err
	}
	if cfg.DBName == "" {
		return failf(exitUsage, "migrate needs a DSN that names a database (…/DBNAME)")
	}
	m, err := schema.Open(cfg.FormatDSN())
	if err != nil {
		return migrateError(err)
	}
	defer m.Close()
	before, dirty, err := m.Version()
	if err != nil {
		return migrateError(err)
	}

	switch action {
	case "version":
		fmt.Fprintf(c.stdout, "schema version %d (latest %d)%s\n", before, schema.Latest(), dirtyNote(before, dirty))
		return nil
	case "up":
		err = m.Up()
	case "down":
		if err := c.confirm(fmt.Sprintf("Really drop the table %s and every election in it?", election.DefaultTable), *yes); err != nil {
			return err
		}
		err = m.Down()
	case "force":
		if err := m.Force(forceTo); err != nil {
			return migrateError(err)
		}
		fmt.Fprintf(c.stdout, "schema version forced from %d to %d (no migration was run)\n", before, forceTo)
		return nil
	}
	if errors.Is(err, schema.ErrNoChange) {
		fmt.Fprintf(c.stdout, "schema version %d (latest %d): no change\n", before, schema.Latest())
		return nil
	}
	if err != nil {
		return migrateError(err)
	}
	after, dirty, err := m.Version()
	if err != nil {
		return migrateError(err)
	}
	what := "applied"
	if action == "down" {
		what = "reverted; table " + election.DefaultTable + " dropped"
	}
	fmt.Fprintf(c.stdout, "schema version %d -> %d (latest %d): %s%s\n", before, after, schema.Latest(), what, dirtyNote(after, dirty))
	return nil
}

func dirtyNote(v uint, dirty bool) string {
	if !dirty {
		return ""
	}
	return fmt.Sprintf(", DIRTY: a migration failed half-way; repair the schema, then run 'sqlelect migrate force %d'", v)
}

func migrateError(err error) error {
	var d migrate.ErrDirty
	if errors.As(err, &d) {
		return wrapf(exitError, err, "the schema is dirty at version %d: repair it, then run 'sqlelect migrate force %d'", d.Version, d.Version)
	}
	if errors.Is(err, migrate.ErrLocked) || errors.Is(err, migrate.ErrLockTimeout) {
		return wrapf(exitError, err, "another migration is running")
	}
	return err
}
