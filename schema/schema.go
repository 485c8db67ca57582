// Package schema applies the embedded migrations of package migrations with
// golang-migrate, reports the schema version, and exposes the DDL for users
// who keep their own migrations.
//
// A Migrator works on the caller's *sql.DB and never closes it. Each call
// holds one connection of its pool for its duration, runs every statement
// under the call's ctx, and runs a migration file's statements one at a
// time, so the DSN needs nothing special (no multiStatements). golang-migrate
// records the version in the table sqlelect_schema_migrations, so it does
// not collide with an application's own schema_migrations.
//
// When ctx ends, the call returns ctx's error at once: the driver closes the
// connection, and the server ends the session (releasing golang-migrate's
// lock) when it notices. A statement already sent may still complete on the
// server; a migration interrupted so leaves the version dirty, as a failed
// one does (see Force).
package schema

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/golang-migrate/migrate/v4"

	"github.com/sqlelect/sqlelect/internal/adoption"
	"github.com/sqlelect/sqlelect/migrations"
)

// MigrationsTable is where golang-migrate records the applied version.
const MigrationsTable = "sqlelect_schema_migrations"

// tableName is the table the embedded migrations manage.
const tableName = "service_election"

// ErrNoChange is returned by Up and Down when there was nothing to do.
var ErrNoChange = migrate.ErrNoChange

// Errors of Up, Down, Steps, Adopt and Unadopt that mean nothing was done.
// The returned error is a *LayoutError (or wraps ErrSchemaNewer) with the
// details; check the kind with errors.Is.
var (
	// ErrRecipeTable means the table has the layout of the MySQL-table
	// recipe sqlelect grows out of (anchor, service_id, last_seen_active):
	// Adopt converts it in place, keeping its holder.
	ErrRecipeTable = errors.New("schema: the table is the MySQL-table recipe's")
	// ErrForeignTable means the table exists with a layout that is neither
	// sqlelect's nor the recipe's.
	ErrForeignTable = errors.New("schema: the table is not sqlelect's")
	// ErrTableMissing means the table is absent although a version is
	// recorded, or Adopt found no table.
	ErrTableMissing = errors.New("schema: the table is missing")
	// ErrSchemaNewer means the database records a version higher than the
	// embedded migrations know: a newer sqlelect migrated it.
	ErrSchemaNewer = errors.New("schema: the database's schema is newer than this binary's migrations")
	// ErrUnrecorded means the table has the columns of a later version than
	// MigrationsTable records: another tool applied the migrations and
	// recorded them elsewhere (golang-migrate's CLI without
	// x-migrations-table=sqlelect_schema_migrations records them in
	// schema_migrations).
	ErrUnrecorded = errors.New("schema: the table is ahead of the version sqlelect_schema_migrations records")
)

// Migrator applies the migrations to the database of a *sql.DB. Its calls
// may run concurrently; golang-migrate takes a database lock (GET_LOCK,
// waiting up to 10 s) so that two migrations, on this machine or another,
// do not collide.
type Migrator struct {
	db *sql.DB
}

// New returns a Migrator for db, whose DSN (go-sql-driver/mysql) must name
// a database. It touches nothing: each call uses one connection of db for
// its duration. The caller owns db; the Migrator never closes it.
func New(db *sql.DB) *Migrator { return &Migrator{db: db} }

// Up applies every pending migration. It returns ErrNoChange when the
// schema is current. It first checks what the database holds and does
// nothing, returning an error that says what to do, when the database
// records a version newer than Latest (ErrSchemaNewer), when a table named
// service_election exists with another layout (a *LayoutError wrapping
// ErrRecipeTable: see Adopt; or ErrForeignTable), or when the table is
// missing although a version is recorded (ErrTableMissing).
func (g *Migrator) Up(ctx context.Context) error {
	return g.migrate(ctx, "migrate up", (*migrate.Migrate).Up)
}

// Down reverts every migration: it drops the election table. It refuses,
// as Up does, a schema newer than Latest and a table that is not sqlelect's
// (it would drop it), and a missing table with a version recorded (the
// down migrations would fail half-way).
func (g *Migrator) Down(ctx context.Context) error {
	return g.migrate(ctx, "migrate down", (*migrate.Migrate).Down)
}

// Steps applies n migrations up (n > 0) or down (n < 0), after the checks
// of Up.
func (g *Migrator) Steps(ctx context.Context, n int) error {
	return g.migrate(ctx, fmt.Sprintf("migrate steps %d", n), func(m *migrate.Migrate) error { return m.Steps(n) })
}

// migrate runs f after the checks of Up.
func (g *Migrator) migrate(ctx context.Context, action string, f func(*migrate.Migrate) error) error {
	return run(ctx, g.db, func(s *session, m *migrate.Migrate) error {
		if err := s.check(action); err != nil {
			return err
		}
		return f(m)
	})
}

// Force sets the recorded version without running anything, after a failed
// migration left the schema dirty (-1 for none).
func (g *Migrator) Force(ctx context.Context, version int) error {
	return run(ctx, g.db, func(_ *session, m *migrate.Migrate) error { return m.Force(version) })
}

// Version returns the applied version and whether it is dirty; version 0
// means none applied.
func (g *Migrator) Version(ctx context.Context) (version uint, dirty bool, err error) {
	err = run(ctx, g.db, func(s *session, _ *migrate.Migrate) error {
		v, d, err := s.Version()
		version, dirty = uint(max(v, 0)), d
		return err
	})
	return version, dirty, err
}

// check refuses to run migrations the database cannot take; see Up.
func (s *session) check(action string) error {
	v, dirty, cols, err := s.state(action, true)
	switch kind := adoption.Classify(cols); {
	case err != nil || dirty:
		return err // golang-migrate reports ErrDirty
	case kind == adoption.KindRecipe || kind == adoption.KindForeign || kind == adoption.KindMissing && v > 0:
		return &LayoutError{columns: cols, Table: tableName, Version: v, Action: action}
	case kind == adoption.KindMissing:
		return nil
	}
	// cv is the lowest schema version that has every column of the table
	// and of its floor, members and history tables: 4 with transfer_to, 5
	// with priority, 6 with the floor table as well, 7 with decision, 8
	// with the floor's marked_at, 9 with the members table as well, 10
	// with the history table, else 1 (versions 2 and 3 change no column's
	// name; versions 6, 8, 9 and 10 none of the table's).
	floor, err := adoption.Columns(s.ctx, s.conn, tableName+"_floor")
	if err != nil {
		return err // run prefixes it
	}
	members, err := adoption.Columns(s.ctx, s.conn, tableName+"_members")
	if err != nil {
		return err
	}
	history, err := adoption.Columns(s.ctx, s.conn, tableName+"_history")
	if err != nil {
		return err
	}
	added := map[string]int{"transfer_to": 4, "priority": 5, "decision": 7}
	cv := 1
	for _, c := range cols {
		cv = max(cv, added[c.Name])
	}
	if cv == 5 && len(floor) > 0 || cv == 7 && slices.ContainsFunc(floor, func(c adoption.Column) bool { return c.Name == "marked_at" }) {
		cv++
	}
	if cv == 8 && len(members) > 0 {
		cv++
	}
	if cv == 9 && len(history) > 0 {
		cv++
	}
	// golang-migrate records a version (dirty) before it runs that
	// migration's DDL, so a version read after the layout is at least the
	// layout's when this table records it: read it again, so that another
	// migrator running meanwhile (replicas starting together) is not taken
	// for another tool.
	if v, dirty, err = s.Version(); err != nil {
		return err
	}
	if cv > max(v, 0) && !dirty {
		recorded := fmt.Sprintf("records version %d", v)
		if v <= 0 {
			recorded = "records no version"
		}
		return fmt.Errorf("%w: the table %s has the columns of version %d but %s %s; %s refused, nothing done: "+
			"another tool migrated it, such as golang-migrate's CLI without x-migrations-table=%s (it records in schema_migrations); "+
			"if that tool applied every migration up to %d, record it with 'sqlelect migrate force %d', then run 'sqlelect migrate up'",
			ErrUnrecorded, tableName, cv, MigrationsTable, recorded, action, MigrationsTable, cv, cv)
	}
	return nil
}

// state reads the recorded version and, unless it is dirty, the table's
// columns, in order (adoption.Classify tells what they make it). It
// refuses a dirty version unless dirtyOK, then one newer than Latest.
func (s *session) state(action string, dirtyOK bool) (v int, dirty bool, cols []adoption.Column, err error) {
	if v, dirty, err = s.Version(); err != nil {
		return 0, false, nil, err
	}
	switch {
	case dirty && !dirtyOK:
		return 0, false, nil, fmt.Errorf("schema: %s records version %d as dirty: repair the schema and 'sqlelect migrate force' first", MigrationsTable, v)
	case v > int(Latest()):
		return 0, false, nil, fmt.Errorf("%w: %s records version %d, this binary's latest is %d; %s refused, nothing done: "+
			"use the sqlelect (or package schema) that migrated it, or a newer one", ErrSchemaNewer, MigrationsTable, v, Latest(), action)
	case dirty:
		return v, true, nil, nil
	}
	cols, err = adoption.Columns(s.ctx, s.conn, tableName)
	return v, false, cols, err // run prefixes err
}

// Latest returns the highest version among the embedded migrations: their
// number, as they are numbered from 1 without a gap (TestLatest).
func Latest() uint { return uint(len(upFiles())) }

// DDL returns the up migrations, in order, as one SQL script, with the table
// renamed to table when it is not empty and not service_election, and with
// it the names derived from it (table_floor, table_decision). Table must be
// an unqualified name that election.Config.Validate accepts (at most 55
// characters, so that those fit MySQL's 64), validated by the caller. Use it
// to copy the schema into migrations of your own: the Migrator and
// `sqlelect migrate` manage service_election only.
func DDL(table string) string {
	var b strings.Builder
	for _, name := range upFiles() {
		data, _ := fs.ReadFile(migrations.FS(), name)
		fmt.Fprintf(&b, "-- %s\n%s\n", name, data)
	}
	return strings.ReplaceAll(b.String(), tableName, cmp.Or(table, tableName))
}

func upFiles() []string {
	names, _ := fs.Glob(migrations.FS(), "*.up.sql")
	slices.Sort(names)
	return names
}

// LayoutError says why the table cannot be migrated as it is: what was
// found and what to do. It wraps ErrRecipeTable, ErrForeignTable or
// ErrTableMissing.
type LayoutError struct {
	columns []adoption.Column // in order: adoption.Classify tells the kind
	Table   string            // service_election
	Version int               // the version recorded by golang-migrate, -1 for none
	Action  string            // what was refused: "migrate up", "adopt"…
}

func (e *LayoutError) Unwrap() error {
	sentinel := map[adoption.Kind]error{adoption.KindRecipe: ErrRecipeTable, adoption.KindMissing: ErrTableMissing}[adoption.Classify(e.columns)]
	return cmp.Or(sentinel, ErrForeignTable)
}

func (e *LayoutError) Error() string {
	switch adoption.Classify(e.columns) {
	case adoption.KindMissing:
		if e.Action == "adopt" {
			return fmt.Sprintf("schema: there is no table %s to adopt: run 'sqlelect migrate up' to create it", e.Table)
		}
		return fmt.Sprintf("schema: the table %s is missing but %s records version %d; %s refused, nothing done: "+
			"run 'sqlelect migrate force -1' (then 'sqlelect migrate up' to create it)", e.Table, MigrationsTable, e.Version, e.Action)
	case adoption.KindRecipe:
		return fmt.Sprintf("schema: the table %s has the layout of the MySQL-table recipe (%s); %s refused, nothing done: "+
			"run 'sqlelect migrate adopt' to convert it in place, keeping its current holder "+
			"(docs/adopting.md, \"Moving from the MySQL-table recipe\")", e.Table, e.columnList(), e.Action)
	}
	hint := fmt.Sprintf("rename or drop it (RENAME TABLE %s TO %s_old) or point the DSN at another database", e.Table, e.Table)
	for _, c := range e.columns {
		if c.Name == "host" || c.Name == "hostname" {
			hint = fmt.Sprintf("if it is the recipe's table with the holder in %s: stop the recipe's nodes (their statements name that column), "+
				"ALTER TABLE %s RENAME COLUMN %s TO service_id, then run 'sqlelect migrate adopt'; otherwise %s", c.Name, e.Table, c.Name, hint)
		}
	}
	return fmt.Sprintf("schema: the table %s exists but is neither sqlelect's nor the MySQL-table recipe's: columns found: %s; "+
		"sqlelect's has %s; %s refused, nothing done: %s", e.Table, e.columnList(), strings.Join(adoption.V1Columns, ", "), e.Action, hint)
}

func (e *LayoutError) columnList() string {
	parts := make([]string, len(e.columns))
	for i, c := range e.columns {
		parts[i] = c.Name + " " + c.Type
		if c.Key == "PRI" {
			parts[i] += " primary key"
		}
	}
	return strings.Join(parts, ", ")
}
