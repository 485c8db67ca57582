package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// The term floor's statements and transaction are internal/floor's; here,
// what they need from the package: the tables' names, the clock, and the
// errors preflight reports.

// newFloorStmts returns the floor statements of election table table (a
// Config's, whose defaults settings filled in: never empty), bounded by b,
// for a candidate whose lock delay is lockDelay.
func newFloorStmts(table string, b stmt.Bound, lockDelay time.Duration) floor.Stmts {
	return floor.NewStmts(quoteTable(table), quoteTable(floor.Table(table)), b, lockDelay, termNowSQL)
}

// checkFloorTable fails, wrapping ErrSchemaMismatch, when election table
// table has no term floor table (the migrations are behind: run them before
// upgrading candidates), and wrapping ErrAccessDenied when the user may not
// write it (as checkPrivileges: statements that match no row; other errors
// are left to the campaign).
func checkFloorTable(ctx context.Context, db *sql.DB, table string, f floor.Stmts) error {
	if _, err := db.ExecContext(ctx, f.Peek); err != nil {
		what := "is missing (schema version 6)"
		switch mysqlerr.Errno(err) {
		case mysqlerr.NoSuchTable:
		case mysqlerr.BadField:
			what = "has no column marked_at (schema version 8)"
		default:
			return classify(err, floor.Table(table))
		}
		return fmt.Errorf("%w: the term floor table %s %s: "+
			"run `sqlelect migrate up` (or add it to your migrations: schema.DDL) before starting candidates of this version: %w",
			ErrSchemaMismatch, floor.Table(table), what, err)
	}
	ftbl := quoteTable(floor.Table(table))
	for _, probe := range []string{
		`INSERT INTO ` + ftbl + ` (anchor, term_floor) SELECT '', 0 FROM DUAL WHERE 1 = 0`,
		`UPDATE ` + ftbl + ` SET term_floor = term_floor WHERE 1 = 0`,
	} {
		if _, err := db.ExecContext(ctx, probe); errors.Is(serverCause(err), ErrAccessDenied) {
			return fmt.Errorf("%w: the user may not write the term floor table %s, in which every term is assigned "+
				"(GRANT SELECT, INSERT, UPDATE ON %s TO the user): %w", ErrAccessDenied, ftbl, ftbl, err)
		} else if err != nil && ctx.Err() != nil {
			return err
		}
	}
	return nil
}
