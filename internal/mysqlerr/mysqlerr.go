// Package mysqlerr names the MySQL and MariaDB error numbers the library
// acts on, and reads the number of a server error.
package mysqlerr

import (
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// MySQL and MariaDB error numbers.
const (
	AccessDenied          = 1045 // ER_ACCESS_DENIED_ERROR
	AccessDeniedNoPass    = 1698 // ER_ACCESS_DENIED_NO_PASSWORD_ERROR (unix_socket / auth_socket users over TCP)
	DBAccessDenied        = 1044 // ER_DBACCESS_DENIED_ERROR
	TableAccessDenied     = 1142 // ER_TABLEACCESS_DENIED_ERROR
	ColumnAccessDenied    = 1143 // ER_COLUMNACCESS_DENIED_ERROR
	SpecificAccessDenied  = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	NoSuchTable           = 1146 // ER_NO_SUCH_TABLE
	BadDB                 = 1049 // ER_BAD_DB_ERROR
	BadField              = 1054 // ER_BAD_FIELD_ERROR
	LockDeadlock          = 1213 // ER_LOCK_DEADLOCK
	ErrorDuringCommit     = 1180 // ER_ERROR_DURING_COMMIT
	RollbackDuringCommit  = 3101 // ER_TRANSACTION_ROLLBACK_DURING_COMMIT
	LockWaitTimeout       = 1205 // ER_LOCK_WAIT_TIMEOUT
	UnknownTimeZone       = 1298 // ER_UNKNOWN_TIME_ZONE
	BadNull               = 1048 // ER_BAD_NULL_ERROR
	DupEntry              = 1062 // ER_DUP_ENTRY
	UnknownSystemVariable = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	GlobalVariable        = 1229 // ER_GLOBAL_VARIABLE
	IncorrectGlobalLocal  = 1238 // ER_INCORRECT_GLOBAL_LOCAL_VAR (read only)
	QueryTimeout          = 3024 // ER_QUERY_TIMEOUT (MySQL): MAX_EXECUTION_TIME exceeded
)

// Errno is the number of the server error in err's chain, 0 when there is
// none.
func Errno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// haLockDeadlock is the storage engine's error (HA_ERR_LOCK_DEADLOCK) in
// the 1180 that MySQL Group Replication returns at COMMIT for a local
// transaction that a remote one's certified write set aborted: "Got error
// 149 - 'Lock deadlock; Retry transaction' during COMMIT".
const haLockDeadlock = "Got error 149 "

// WriteConflict reports whether err is a deadlock or a write conflict
// detected at commit, after which the transaction was rolled back and may be
// tried again: a deadlock (1213, also Galera's certification conflict), and
// Group Replication's certification conflicts (3101, the transaction lost
// certification; 1180 with engine error 149, a remote transaction aborted
// it). Other 1180s (a commit that failed for another engine error) are not.
func WriteConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == LockDeadlock || me.Number == RollbackDuringCommit ||
		me.Number == ErrorDuringCommit && strings.HasPrefix(me.Message, haLockDeadlock))
}
