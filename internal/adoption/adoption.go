// Package adoption reads the adoption period of an election table (the one
// reader of its marker) and tells the MySQL-table recipe's table from
// sqlelect's (the one reader of a table's layout). It is shared by package
// election (Run's preflight, its errors) and package schema (migrations,
// Adopt, Migrator.Adoption, which begins and ends periods), which cannot
// import each other.
package adoption

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Marker starts the comment of the election table's lease_ms column during
// an adoption period (schema.Migrator.Adopt begins one, EndAdoption ends
// it), while the column's DEFAULT is the adopted lease: the recipe's
// timeout plus one second.
const Marker = "sqlelect adoption"

// Queryer is a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Lease reads the adoption period of table (a name, optionally qualified by
// a database; unqualified, in the connection's default database): the
// adopted lease, and ok false outside a period, or when the table has no
// lease_ms (missing, or not sqlelect's). One information_schema read.
func Lease(ctx context.Context, db Queryer, table string) (lease time.Duration, ok bool, err error) {
	cond, args := tableCond(table)
	var def sql.NullString
	err = db.QueryRowContext(ctx, `SELECT COLUMN_DEFAULT FROM information_schema.COLUMNS
WHERE `+cond+` AND COLUMN_NAME = 'lease_ms' AND COLUMN_COMMENT LIKE ?`,
		append(args, Marker+"%")...).Scan(&def)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the adoption period: %w", err)
	}
	ms, err := strconv.ParseInt(strings.Trim(def.String, "'"), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("reading the adoption period: lease_ms's default %q: %w", def.String, err)
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}
