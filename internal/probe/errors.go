package probe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sqlelect/sqlelect/internal/adoption"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
)

// The errors Run's preflight fails with. Package election exports each
// (election.ErrTableMissing is ErrTableMissing, and so on) and documents
// it; the texts are election's.
var (
	ErrTableMissing           = errors.New("election: table missing (run `sqlelect migrate up`)")
	ErrAccessDenied           = errors.New("election: access denied")
	ErrSchemaMismatch         = errors.New("election: table schema out of date (run `sqlelect migrate up`)")
	ErrUnsafeTimeZone         = errors.New("election: session time zone observes daylight saving time; set time_zone='+00:00' (DSN parameter time_zone=%27%2B00%3A00%27)")
	ErrUnsupportedTopology    = errors.New("election: unsupported topology")
	ErrUnknownDatabase        = errors.New("election: unknown database")
	ErrSimultaneousAssignment = errors.New("election: the session's sql_mode has SIMULTANEOUS_ASSIGNMENT; the heartbeat needs its SET list assigned left to right")
	ErrSysdateIsNow           = errors.New("election: the server runs with --sysdate-is-now: SYSDATE() cannot tell the server's clock from a session's SET @@timestamp")
	ErrNoAutocommit           = errors.New("election: the session does not commit each statement (autocommit=0 or completion_type=CHAIN)")
	ErrUnknownTimeZone        = errors.New("election: unknown session time zone (the DSN's time_zone)")
	ErrUnsafeServer           = errors.New("election: the server breaks a promise the election relies on (run `sqlelect doctor`)")
)

// Classify turns a driver error into a package error: permanent problems
// (missing table, missing privilege, outdated schema) wrap a sentinel so that
// Run can stop and say what to do; everything else is returned as it is and
// treated as transient ("not leader this tick"). Errors that already wrap
// the sentinel, and nil, are returned as they are. table names the
// statement's table, and a missing database is a missing table then; ""
// (election.Classify: a connection attempt, a migration) names none and
// leaves it ErrUnknownDatabase.
func Classify(err error, table string) error {
	var sentinel error
	switch mysqlerr.Errno(err) {
	case mysqlerr.NoSuchTable:
		sentinel = ErrTableMissing
	case 1049: // ER_BAD_DB_ERROR
		sentinel = ErrUnknownDatabase
		if table != "" {
			sentinel = ErrTableMissing
		}
	case mysqlerr.AccessDenied, mysqlerr.AccessDeniedNoPass, mysqlerr.SpecificAccessDenied,
		1044, 1142, 1143: // ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR
		sentinel = ErrAccessDenied
	case mysqlerr.BadField:
		sentinel = ErrSchemaMismatch
	case 1298: // ER_UNKNOWN_TIME_ZONE
		sentinel = ErrUnknownTimeZone
	default:
		return err
	}
	switch {
	case errors.Is(err, sentinel):
		return err
	case table == "":
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return fmt.Errorf("%w: %s: %w", sentinel, table, err)
}

// Permanent reports whether err cannot go away by retrying: Run stops on it.
func Permanent(err error) bool {
	return errors.Is(err, ErrTableMissing) || errors.Is(err, ErrAccessDenied) ||
		errors.Is(err, ErrSchemaMismatch) || errors.Is(err, ErrUnsafeTimeZone) ||
		errors.Is(err, ErrUnsupportedTopology) || errors.Is(err, ErrSysdateIsNow) ||
		errors.Is(err, ErrUnsafeServer) || errors.Is(err, ident.ErrInvalid) ||
		errors.Is(err, ErrSimultaneousAssignment) || errors.Is(err, ErrNoAutocommit) ||
		errors.Is(err, ErrUnknownTimeZone)
}

// Layout explains an error of a statement on election table table, as
// Run's preflight does: it classifies err (Classify) and adds to an
// ErrSchemaMismatch what the table holds, so that a table of another
// layout (the MySQL-table recipe's, say) is named as such instead of only
// "out of date": the columns found and what to do. The recipe's table is
// told apart as `sqlelect migrate` does (adoption.Classify). Other errors,
// and a failure to read the columns, return the classified err.
func Layout(ctx context.Context, db *sql.DB, table string, err error) error {
	err = Classify(err, table)
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
