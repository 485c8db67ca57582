package doctor

import (
	"context"
	"database/sql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/probe"
)

// CheckPrivileges checks that the user of db may campaign in table (empty
// for election.DefaultTable): SELECT, INSERT and UPDATE, each with a
// statement that matches no row, so that nothing is written or locked.
// ctx bounds its statements. The error wraps election.ErrAccessDenied and
// names every missing privilege. Run checks the same at preflight and stops
// with the error; the CLI's status warns with it.
func CheckPrivileges(ctx context.Context, db *sql.DB, table string) error {
	// WithDefaults defaults the table and validates it (ident.Table) as Run
	// does; the name is ignored.
	cfg, err := election.Config{Name: probe.ScratchPrefix + "x", Table: table}.WithDefaults()
	if err != nil {
		return err
	}
	return probe.CheckPrivileges(ctx, db, ident.Quote(cfg.Table))
}
