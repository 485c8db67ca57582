package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sqlelect/sqlelect/internal/adoption"
)

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

// layout is the table's columns, in order, and what they make it.
type layout struct {
	kind    adoption.Kind
	columns []adoption.Column
}

// inspect reads the columns of the table in the connection's current database.
func inspect(ctx context.Context, q adoption.Queryer) (layout, error) {
	cols, err := adoption.Columns(ctx, q, tableName)
	if err != nil {
		return layout{}, fmt.Errorf("schema: %w", err)
	}
	return layout{kind: adoption.Classify(cols), columns: cols}, nil
}

// columnsVersion is the lowest schema version that has every column of l:
// 7 with decision, 5 with priority, 4 with transfer_to, else 1 (versions 2 and 3 change no
// column's name). 0 for a table that is not sqlelect's.
func columnsVersion(l layout) int {
	if l.kind != adoption.KindSqlelect {
		return 0
	}
	v := 1
	for _, c := range l.columns {
		switch c.Name {
		case "transfer_to":
			v = max(v, 4)
		case "priority":
			v = max(v, 5)
		case "decision":
			v = max(v, 7)
		}
	}
	return v
}

// LayoutError says why the table cannot be migrated as it is: what was
// found and what to do. It wraps ErrRecipeTable, ErrForeignTable or
// ErrTableMissing.
type LayoutError struct {
	layout
	Table   string // service_election
	Version int    // the version recorded by golang-migrate, -1 for none
	Action  string // what was refused: "migrate up", "adopt"…
}

func (e *LayoutError) Unwrap() error {
	switch e.kind {
	case adoption.KindRecipe:
		return ErrRecipeTable
	case adoption.KindMissing:
		return ErrTableMissing
	}
	return ErrForeignTable
}

func (e *LayoutError) Error() string {
	switch e.kind {
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
