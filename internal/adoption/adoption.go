// Package adoption reads an election table's columns (the one reader of a
// table's layout), tells the MySQL-table recipe's table from sqlelect's,
// and finds the adoption period in them (the one reader of its marker). It
// is shared by package election (Run's preflight, its errors) and package
// schema (migrations, Adopt, Migrator.Adoption, which begins and ends
// periods), which cannot import each other.
package adoption

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Marker starts the comment of the election table's lease_ms column during
// an adoption period (schema.Migrator.Adopt begins one, EndAdoption ends
// it), while the column's DEFAULT is the adopted lease: the recipe's
// timeout plus one second.
const Marker = "sqlelect adoption"

// Queryer is a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Column is a column as information_schema.COLUMNS describes it.
type Column struct {
	Name    string `db:"column_name"`    // COLUMN_NAME, in lower case
	Type    string `db:"column_type"`    // COLUMN_TYPE, e.g. "tinyint(3) unsigned"
	Data    string `db:"data_type"`      // DATA_TYPE in lower case, e.g. "tinyint"
	Key     string `db:"column_key"`     // COLUMN_KEY: "PRI" for a primary key column
	Default string `db:"column_default"` // COLUMN_DEFAULT, "" for NULL
	Comment string `db:"column_comment"` // COLUMN_COMMENT
}

// Kind classifies what a database holds under a table's name.
type Kind int

// The kinds of layout Classify tells apart.
const (
	KindMissing  Kind = iota // no such table
	KindSqlelect             // sqlelect's table (every column of version 1, maybe more)
	KindRecipe               // the recipe's table: anchor (integer, primary key), service_id (string), last_seen_active (timestamp), nothing else
	KindForeign              // anything else
)

// V1Columns are the columns of sqlelect's migration 1, in order.
var V1Columns = []string{"anchor", "service_id", "last_seen_active", "term", "term_started_at",
	"lease_ms", "released", "acquired", "value", "backend", "connection_id"}

// Columns reads the columns of table (a name, optionally qualified by a
// database; unqualified, in the connection's default database), in order;
// none when there is no such table.
func Columns(ctx context.Context, db Queryer, table string) (cols []Column, err error) {
	return columns(ctx, db, table, "")
}

// columns is Columns, of column only unless that is "".
func columns(ctx context.Context, db Queryer, table, column string) (cols []Column, err error) {
	// The names as literals where they can be (stmt.Put): one round trip.
	var q strings.Builder
	q.WriteString(`SELECT LOWER(COLUMN_NAME) AS column_name, COLUMN_TYPE AS column_type, LOWER(DATA_TYPE) AS data_type,
  COLUMN_KEY AS column_key, COALESCE(COLUMN_DEFAULT, '') AS column_default, COLUMN_COMMENT AS column_comment
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = `)
	var args []any
	name := table
	if d, n, ok := strings.Cut(table, "."); ok {
		args, name = stmt.Put(&q, args, d), n
	} else {
		q.WriteString(`DATABASE()`)
	}
	q.WriteString(` AND TABLE_NAME = `)
	args = stmt.Put(&q, args, name)
	if column != "" {
		q.WriteString(` AND COLUMN_NAME = `)
		args = stmt.Put(&q, args, column)
	}
	// Every column, whatever the session's sql_select_limit: a LIMIT of
	// the statement's own overrides it.
	q.WriteString(` ORDER BY ORDINAL_POSITION LIMIT 18446744073709551615`)
	rows, err := db.QueryContext(ctx, q.String(), args...)
	if err == nil {
		defer rows.Close()
		err = sqlx.StructScan(rows, &cols)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", table, err)
	}
	return cols, nil
}

// Classify tells what cols (as Columns reads them) make: sqlelect's table
// when every column of V1Columns is there, the recipe's when there are
// exactly its three columns with its types (in any order), no table when
// there are none, else a foreign one.
func Classify(cols []Column) Kind {
	if len(cols) == 0 {
		return KindMissing
	}
	byName := map[string]Column{}
	for _, c := range cols {
		byName[c.Name] = c
	}
	if !slices.ContainsFunc(V1Columns, func(name string) bool { return byName[name].Name == "" }) {
		return KindSqlelect // none of its columns is missing
	}
	anchor, service, seen := byName["anchor"], byName["service_id"], byName["last_seen_active"]
	integer := map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true}
	if len(cols) == 3 && integer[anchor.Data] && anchor.Key == "PRI" &&
		(service.Data == "varchar" || service.Data == "char") && seen.Data == "timestamp" {
		return KindRecipe
	}
	return KindForeign
}

// Lease reads the adoption period of table (see Columns): the adopted
// lease, and ok false outside a period, or when the table has no lease_ms
// (missing, or not sqlelect's). One information_schema read.
func Lease(ctx context.Context, db Queryer, table string) (lease time.Duration, ok bool, err error) {
	cols, err := columns(ctx, db, table, "lease_ms")
	if err != nil {
		return 0, false, err
	}
	for _, c := range cols {
		// As the migrations' LIKE 'sqlelect adoption%' (the comment's
		// collation ignores case).
		if c.Name == "lease_ms" && strings.HasPrefix(strings.ToLower(c.Comment), Marker) {
			ms, err := strconv.ParseInt(strings.Trim(c.Default, "'"), 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("reading the adoption period: lease_ms's default %q: %w", c.Default, err)
			}
			return time.Duration(ms) * time.Millisecond, true, nil
		}
	}
	return 0, false, nil
}
