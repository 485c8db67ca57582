package doctor

import (
	"context"
	"database/sql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/ident"
)

// CheckPrivileges checks that the user of db may campaign in table (empty
// for election.DefaultTable): SELECT, INSERT and UPDATE, each with a
// statement that matches no row, so that nothing is written or locked.
// ctx bounds its statements. The error wraps election.ErrAccessDenied and
// names every missing privilege. Run checks the same at preflight and stops
// with the error; the CLI's status warns with it.
func CheckPrivileges(ctx context.Context, db *sql.DB, table string) error {
	if table == "" {
		table = election.DefaultTable
	}
	if err := ident.Table(table); err != nil {
		return err
	}
	kit, err := election.Probe(election.Config{Table: table})
	if err != nil {
		return err
	}
	return kit.Privileges(ctx, db)
}
