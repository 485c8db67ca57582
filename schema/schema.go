// Package schema applies the embedded migrations of package migrations with
// golang-migrate, reports the schema version, and exposes the DDL for users
// who keep their own migrations.
//
// Migrations run on a connection of their own, opened from a DSN with
// multiStatements=true added; the elections' own DSN does not need it.
// golang-migrate records the version in the table sqlelect_schema_migrations,
// so it does not collide with an application's own schema_migrations.
package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/sqlelect/sqlelect/migrations"
)

// MigrationsTable is where golang-migrate records the applied version.
const MigrationsTable = "sqlelect_schema_migrations"

// ErrNoChange is returned by Up and Down when there was nothing to do.
var ErrNoChange = migrate.ErrNoChange

// Migrator applies the migrations to one database. Close it when done.
// It is not safe for concurrent use; golang-migrate takes a database lock
// (GET_LOCK) so that two migrators on different machines do not collide.
type Migrator struct {
	m   *migrate.Migrate
	drv database.Driver
	db  *sql.DB
}

// checkTimeout bounds the statements Up, Down and Steps run before
// golang-migrate's own (which take no context).
const checkTimeout = 30 * time.Second

// Open parses dsn (go-sql-driver/mysql format), adds multiStatements=true,
// opens a connection of its own and prepares golang-migrate with the
// embedded migrations. The DSN must name a database.
func Open(dsn string) (*Migrator, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("schema: invalid DSN: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("schema: the DSN names no database")
	}
	cfg.MultiStatements = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	drv, err := migratemysql.WithInstance(db, &migratemysql.Config{MigrationsTable: MigrationsTable, DatabaseName: cfg.DBName})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("schema: %w", err)
	}
	src, err := iofs.New(migrations.FS(), ".")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("schema: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "mysql", drv)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &Migrator{m: m, drv: drv, db: db}, nil
}

// Up applies every pending migration. It returns ErrNoChange when the
// schema is current. It first checks what the database holds and does
// nothing, returning an error that says what to do, when the database
// records a version newer than Latest (ErrSchemaNewer), when a table named
// service_election exists with another layout (a *LayoutError wrapping
// ErrRecipeTable: see Adopt; or ErrForeignTable), or when the table is
// missing although a version is recorded (ErrTableMissing).
func (g *Migrator) Up() error {
	if err := g.check("migrate up"); err != nil {
		return err
	}
	return wrap(g.m.Up())
}

// Down reverts every migration: it drops the election table. It refuses,
// as Up does, a schema newer than Latest and a table that is not sqlelect's
// (it would drop it), and a missing table with a version recorded (the
// down migrations would fail half-way).
func (g *Migrator) Down() error {
	if err := g.check("migrate down"); err != nil {
		return err
	}
	return wrap(g.m.Down())
}

// Steps applies n migrations up (n > 0) or down (n < 0), after the checks
// of Up.
func (g *Migrator) Steps(n int) error {
	if err := g.check(fmt.Sprintf("migrate steps %d", n)); err != nil {
		return err
	}
	return wrap(g.m.Steps(n))
}

// check refuses to run migrations the database cannot take; see Up.
func (g *Migrator) check(action string) error {
	v, dirty, err := g.drv.Version()
	if err != nil {
		return wrap(err)
	}
	if v > int(Latest()) {
		return newerError(v, action)
	}
	if dirty {
		return nil // golang-migrate reports ErrDirty
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	l, err := inspect(ctx, g.db, Table)
	if err != nil {
		return err
	}
	if l.Kind == KindRecipe || l.Kind == KindForeign || l.Kind == KindMissing && v > 0 {
		return &LayoutError{Layout: l, Version: v, Action: action}
	}
	// golang-migrate records a version (dirty) before it runs that
	// migration's DDL, so a version read after the layout is at least the
	// layout's when this table records it: read it again, so that another
	// migrator running meanwhile (replicas starting together) is not taken
	// for another tool.
	if v, dirty, err = g.drv.Version(); err != nil {
		return wrap(err)
	}
	cv := columnsVersion(l)
	if cv == 5 || cv == 7 {
		// Versions 6 and 8 change no column of Table: 6 adds the term
		// floor's table, 8 its column marked_at.
		q := `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`
		if cv == 7 {
			q = `SELECT COUNT(*) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = 'marked_at'`
		}
		var n int
		if err := g.db.QueryRowContext(ctx, q, Table+"_floor").Scan(&n); err != nil {
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
			ErrUnrecorded, Table, cv, MigrationsTable, recorded, action, MigrationsTable, cv, cv)
	}
	return nil
}

func newerError(v int, action string) error {
	return fmt.Errorf("%w: %s records version %d, this binary's latest is %d; %s refused, nothing done: "+
		"use the sqlelect (or package schema) that migrated it, or a newer one", ErrSchemaNewer, MigrationsTable, v, Latest(), action)
}

// Force sets the recorded version without running anything, after a failed
// migration left the schema dirty (-1 for none).
func (g *Migrator) Force(version int) error { return wrap(g.m.Force(version)) }

// Version returns the applied version and whether it is dirty; version 0
// means none applied.
func (g *Migrator) Version() (version uint, dirty bool, err error) {
	v, d, err := g.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	return v, d, wrap(err)
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

// Close closes the migrator's own connection.
func (g *Migrator) Close() error {
	srcErr, dbErr := g.m.Close()
	return errors.Join(srcErr, dbErr)
}

func wrap(err error) error {
	if err == nil || errors.Is(err, migrate.ErrNoChange) {
		return err
	}
	return fmt.Errorf("schema: %w", err)
}

// DDL returns the up migrations, in order, as one SQL script, with the table
// renamed to table when it is not empty and not service_election, and with
// it the names derived from it (table_floor, table_decision). Table must be
// an unqualified name that election.ValidateTable accepts (at most 55
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
