package adoption

import (
	"context"
	"fmt"
	"strings"
)

// Column is a column as information_schema.COLUMNS describes it.
type Column struct {
	Name string // COLUMN_NAME, in lower case
	Type string // COLUMN_TYPE, e.g. "tinyint(3) unsigned"
	Data string // DATA_TYPE in lower case, e.g. "tinyint"
	Key  string // COLUMN_KEY: "PRI" for a primary key column
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

// tableCond is the information_schema condition on TABLE_SCHEMA and
// TABLE_NAME that selects table (a name, optionally qualified by a
// database; unqualified, in the connection's default database), and its
// arguments.
func tableCond(table string) (string, []any) {
	if d, n, ok := strings.Cut(table, "."); ok {
		return `TABLE_SCHEMA = ? AND TABLE_NAME = ?`, []any{d, n}
	}
	return `TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, []any{table}
}

// Columns reads the columns of table (see tableCond), in order; none when
// there is no such table.
func Columns(ctx context.Context, db Queryer, table string) ([]Column, error) {
	cond, args := tableCond(table)
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, COLUMN_KEY
FROM information_schema.COLUMNS WHERE `+cond+` ORDER BY ORDINAL_POSITION`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type, &c.Data, &c.Key); err != nil {
			return nil, fmt.Errorf("reading the columns of %s: %w", table, err)
		}
		c.Name, c.Data = strings.ToLower(c.Name), strings.ToLower(c.Data)
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
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
	ours := true
	for _, name := range V1Columns {
		_, ok := byName[name]
		ours = ours && ok
	}
	if ours {
		return KindSqlelect
	}
	anchor, service, seen := byName["anchor"], byName["service_id"], byName["last_seen_active"]
	integer := map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "bigint": true}
	if len(cols) == 3 && integer[anchor.Data] && anchor.Key == "PRI" &&
		(service.Data == "varchar" || service.Data == "char") && seen.Data == "timestamp" {
		return KindRecipe
	}
	return KindForeign
}
