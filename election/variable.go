package election

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// serverVariable reads the server variable name, with its scope
// (global.wsrep_on, session.wait_timeout), through q: its value (NULL reads
// as ""), and ok false when the server has no such variable (it is not that
// kind of server). It is the library's one reader of server variables.
func serverVariable(ctx context.Context, q rowQuerier, name string) (val string, ok bool, err error) {
	var v sql.NullString
	err = q.QueryRowContext(ctx, `SELECT @@`+name).Scan(&v)
	if mysqlErrno(err) == erUnknownSystemVariable {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading @@%s: %w", name, err)
	}
	return v.String, true, nil
}

// isOn reports whether a boolean variable's value is on.
func isOn(v string) bool { return v == "1" || strings.EqualFold(v, "ON") }
