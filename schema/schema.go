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
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
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
	v, dirty, err := s.Version()
	if err != nil {
		return err
	}
	if v > int(Latest()) {
		return newerError(v, action)
	}
	if dirty {
		return nil // golang-migrate reports ErrDirty
	}
	l, err := inspect(s.ctx, s.conn)
	if err != nil {
		return err
	}
	if l.kind == adoption.KindRecipe || l.kind == adoption.KindForeign || l.kind == adoption.KindMissing && v > 0 {
		return &LayoutError{layout: l, Table: tableName, Version: v, Action: action}
	}
	// golang-migrate records a version (dirty) before it runs that
	// migration's DDL, so a version read after the layout is at least the
	// layout's when this table records it: read it again, so that another
	// migrator running meanwhile (replicas starting together) is not taken
	// for another tool.
	if v, dirty, err = s.Version(); err != nil {
		return err
	}
	cv := columnsVersion(l)
	if cv == 5 || cv == 7 {
		// Versions 6 and 8 change no column of the table: 6 adds the term
		// floor's table, 8 its column marked_at.
		q := `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`
		if cv == 7 {
			q = `SELECT COUNT(*) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'marked_at'`
		}
		var n int
		if err := s.conn.QueryRowContext(s.ctx, q, tableName+"_floor").Scan(&n); err != nil {
			return fmt.Errorf("schema: reading the tables: %w", err)
		}
		if n > 0 {
			cv++
		}
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

func newerError(v int, action string) error {
	return fmt.Errorf("%w: %s records version %d, this binary's latest is %d; %s refused, nothing done: "+
		"use the sqlelect (or package schema) that migrated it, or a newer one", ErrSchemaNewer, MigrationsTable, v, Latest(), action)
}

// Latest returns the highest version among the embedded migrations.
func Latest() uint {
	var latest uint
	for _, name := range upFiles() {
		var v uint
		if _, err := fmt.Sscanf(name, "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// wrap prefixes golang-migrate's own errors; the session's have the
// prefix already, and ErrNoChange stays as it is.
func wrap(err error) error {
	if err == nil || errors.Is(err, migrate.ErrNoChange) || strings.HasPrefix(err.Error(), "schema: ") {
		return err
	}
	return fmt.Errorf("schema: %w", err)
}

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
		b.WriteString("-- " + name + "\n")
		b.Write(data)
		b.WriteString("\n")
	}
	s := b.String()
	if table != "" && table != "service_election" {
		s = strings.ReplaceAll(s, "service_election", table)
	}
	return s
}

func upFiles() []string {
	names, _ := fs.Glob(migrations.FS(), "*.up.sql")
	sort.Strings(names)
	return names
}
