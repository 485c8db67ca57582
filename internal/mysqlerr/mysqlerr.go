// Package mysqlerr names the MySQL and MariaDB error numbers the library
// acts on, and reads the number of a server error.
package mysqlerr

import (
	"context"
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// MySQL and MariaDB error numbers (used in more than one place: a number
// acted on in one place is written there, with its name in a comment).
const (
	AccessDenied          = 1045 // ER_ACCESS_DENIED_ERROR
	AccessDeniedNoPass    = 1698 // ER_ACCESS_DENIED_NO_PASSWORD_ERROR (unix_socket / auth_socket users over TCP)
	SpecificAccessDenied  = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	NoSuchTable           = 1146 // ER_NO_SUCH_TABLE
	BadField              = 1054 // ER_BAD_FIELD_ERROR
	LockWaitTimeout       = 1205 // ER_LOCK_WAIT_TIMEOUT
	BadNull               = 1048 // ER_BAD_NULL_ERROR
	UnknownSystemVariable = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	QueryTimeout          = 3024 // ER_QUERY_TIMEOUT (MySQL): MAX_EXECUTION_TIME exceeded
	NoSuchThread          = 1094 // ER_NO_SUCH_THREAD: KILL of a connection id that is gone
	QueryInterrupted      = 1317 // ER_QUERY_INTERRUPTED: a KILL QUERY ended the statement
)

// Errno is the number of the server error in err's chain, 0 when there is
// none.
func Errno(err error) uint16 {
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		return me.Number
	}
	return 0
}

// WriteConflict reports whether err is a deadlock or a write conflict
// detected at commit, after which the transaction was rolled back and may be
// tried again: a deadlock (1213, also Galera's certification conflict), and
// Group Replication's certification conflicts (3101, the transaction lost
// certification; 1180 with engine error 149, a remote transaction aborted
// it). Other 1180s (a commit that failed for another engine error) are not.
// And 1020, MariaDB's snapshot isolation (11.6.2 and later,
// innodb_snapshot_isolation ON): a locking read or a write of a row that
// another transaction changed after this one's snapshot, which the
// library's transactions roll back on any error.
//
// 1213 is ER_LOCK_DEADLOCK; 1020 ER_CHECKREAD; 3101 ER_TRANSACTION_ROLLBACK_DURING_COMMIT; 1180 ER_ERROR_DURING_COMMIT,
// whose message names the storage engine's error: HA_ERR_LOCK_DEADLOCK is
// "Got error 149 - 'Lock deadlock; Retry transaction' during COMMIT", what
// MySQL Group Replication returns at COMMIT for a local transaction that a
// remote one's certified write set aborted.
func WriteConflict(err error) bool {
	me, ok := errors.AsType[*mysql.MySQLError](err)
	return ok && (me.Number == 1213 || me.Number == 1020 || me.Number == 3101 ||
		me.Number == 1180 && strings.HasPrefix(me.Message, "Got error 149 "))
}

// Retry runs f, a single-statement write or a transaction, again (up to
// tries in all) while it fails with a deadlock or write conflict
// (WriteConflict) and ctx lives: on Galera or a multi-primary Group
// Replication group, losing certification to a concurrent write of the
// same row. f must read what it needs afresh.
func Retry(ctx context.Context, tries int, f func() error) error {
	for try := 1; ; try++ {
		err := f()
		if try >= tries || !WriteConflict(err) || ctx.Err() != nil {
			return err
		}
	}
}
