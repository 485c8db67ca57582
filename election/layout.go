package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sqlelect/sqlelect/internal/adoption"
)

// explainLayout adds to an ErrSchemaMismatch what the table holds, so that
// a table of another layout (the MySQL-table recipe's, say) is named as
// such instead of only "out of date": the columns found and what to do.
// The recipe's table is told apart as `sqlelect migrate` does
// (adoption.Classify). Other errors, and a failure to read the columns,
// return err as it is.
func explainLayout(ctx context.Context, db *sql.DB, table string, err error) error {
	if !errors.Is(err, ErrSchemaMismatch) {
		return err
	}
	cols, qerr := adoption.Columns(ctx, db, table)
	if qerr != nil || len(cols) == 0 {
		return err
	}
	found := make([]string, len(cols))
	for i, c := range cols {
		found[i] = c.Name + " " + c.Type
	}
	hint := "`sqlelect migrate up` brings sqlelect's table up to date, or says what to do with another table"
	if adoption.Classify(cols) == adoption.KindRecipe {
		hint = "this is the MySQL-table recipe's table: `sqlelect migrate adopt` converts it in place, keeping its holder"
	}
	return fmt.Errorf("%w (columns found: %s; %s)", err, strings.Join(found, ", "), hint)
}
