package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// explainLayout adds to an ErrSchemaMismatch what the table holds, so that
// a table of another layout (the MySQL-table recipe's, say) is named as
// such instead of only "out of date": the columns found and what to do.
// Other errors, and a failure to read the columns, return err as it is.
func explainLayout(ctx context.Context, db *sql.DB, table string, err error) error {
	if !errors.Is(err, ErrSchemaMismatch) {
		return err
	}
	dbExpr, name := "DATABASE()", table
	args := []any{}
	if d, n, ok := strings.Cut(table, "."); ok {
		dbExpr, name, args = "?", n, append(args, d)
	}
	rows, qerr := db.QueryContext(ctx, `SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = `+dbExpr+` AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, append(args, name)...)
	if qerr != nil {
		return err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var n, typ string
		if rows.Scan(&n, &typ) != nil {
			return err
		}
		cols = append(cols, n+" "+typ)
	}
	if rows.Err() != nil || len(cols) == 0 {
		return err
	}
	hint := "`sqlelect migrate up` brings sqlelect's table up to date, or says what to do with another table"
	if len(cols) == 3 && strings.HasPrefix(cols[0], "anchor ") && strings.HasPrefix(cols[1], "service_id ") &&
		strings.HasPrefix(cols[2], "last_seen_active ") {
		hint = "this is the MySQL-table recipe's table: `sqlelect migrate adopt` converts it in place, keeping its holder"
	}
	return fmt.Errorf("%w (columns found: %s; %s)", err, strings.Join(cols, ", "), hint)
}
