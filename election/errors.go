package election

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"
)

// Sentinel errors. Check them with errors.Is: the package wraps them with
// details (the election, the table, the server's message).
var (
	// ErrNotLeader is returned by operations that need leadership (Fenced,
	// for instance) when this candidate does not lead.
	ErrNotLeader = errors.New("election: not leader")
	// ErrNoLeader is returned by Leader when nobody holds a live lease.
	ErrNoLeader = errors.New("election: no leader")
	// ErrInvalidConfig wraps every Config validation failure.
	ErrInvalidConfig = errors.New("election: invalid config")
	// ErrAlreadyRunning is returned by a second concurrent call to Run.
	ErrAlreadyRunning = errors.New("election: already running")
	// ErrTableMissing means the election table does not exist: run the
	// migrations (`sqlelect migrate up` or package schema).
	ErrTableMissing = errors.New("election: table missing (run `sqlelect migrate up`)")
	// ErrAccessDenied means the database user lacks a privilege the election
	// needs (SELECT, INSERT, UPDATE on the table).
	ErrAccessDenied = errors.New("election: access denied")
	// ErrSchemaMismatch means the table exists but lacks columns the library
	// needs: the migrations are behind.
	ErrSchemaMismatch = errors.New("election: table schema out of date (run `sqlelect migrate up`)")
	// ErrUnsafeTimeZone means the session time zone observes daylight saving
	// time, under which NOW() comparisons jump by an hour and two leaders
	// could overlap. Set time_zone='+00:00' in the DSN.
	ErrUnsafeTimeZone = errors.New("election: session time zone observes daylight saving time; set time_zone='+00:00' (DSN parameter time_zone=%27%2B00%3A00%27)")
	// ErrUnsupportedTopology means the server cannot give this backend's
	// guarantees, for example GET_LOCK on a Galera cluster.
	ErrUnsupportedTopology = errors.New("election: unsupported topology")
	// ErrNilDB is returned by constructors given a nil *sql.DB.
	ErrNilDB = errors.New("election: nil *sql.DB")
)

// MySQL and MariaDB error numbers the package classifies.
const (
	erAccessDenied         = 1045 // ER_ACCESS_DENIED_ERROR
	erDBAccessDenied       = 1044 // ER_DBACCESS_DENIED_ERROR
	erTableAccessDenied    = 1142 // ER_TABLEACCESS_DENIED_ERROR
	erColumnAccessDenied   = 1143 // ER_COLUMNACCESS_DENIED_ERROR
	erSpecificAccessDenied = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	erNoSuchTable          = 1146 // ER_NO_SUCH_TABLE
	erBadDB                = 1049 // ER_BAD_DB_ERROR
	erBadField             = 1054 // ER_BAD_FIELD_ERROR
	erLockDeadlock         = 1213 // ER_LOCK_DEADLOCK
	erLockWaitTimeout      = 1205 // ER_LOCK_WAIT_TIMEOUT
)

// classify turns a driver error into a package error: permanent problems
// (missing table, missing privilege, outdated schema) wrap a sentinel so that
// Run can stop and say what to do; everything else is returned as it is and
// treated as transient ("not leader this tick").
func classify(err error, table string) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return err
	}
	switch me.Number {
	case erNoSuchTable, erBadDB:
		return fmt.Errorf("%w: %s: %w", ErrTableMissing, table, err)
	case erAccessDenied, erDBAccessDenied, erTableAccessDenied, erColumnAccessDenied, erSpecificAccessDenied:
		return fmt.Errorf("%w: %s: %w", ErrAccessDenied, table, err)
	case erBadField:
		return fmt.Errorf("%w: %s: %w", ErrSchemaMismatch, table, err)
	}
	return err
}

// permanent reports whether err cannot go away by retrying: Run stops on it.
func permanent(err error) bool {
	return errors.Is(err, ErrTableMissing) || errors.Is(err, ErrAccessDenied) ||
		errors.Is(err, ErrSchemaMismatch) || errors.Is(err, ErrUnsafeTimeZone) ||
		errors.Is(err, ErrUnsupportedTopology)
}

// errorKind is a low-cardinality label for a heartbeat error, used by
// metrics and logs: timeout, connection, deadlock, lock_wait, access,
// schema, other.
func errorKind(err error) string {
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrTableMissing), errors.Is(err, ErrSchemaMismatch):
		return "schema"
	case errors.Is(err, ErrAccessDenied):
		return "access"
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "timeout"
	case errors.As(err, &me) && me.Number == erLockDeadlock:
		return "deadlock"
	case errors.As(err, &me) && me.Number == erLockWaitTimeout:
		return "lock_wait"
	case errors.As(err, &me):
		return "server"
	}
	return "connection"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
