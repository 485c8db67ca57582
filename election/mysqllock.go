package election

import (
	"cmp"

	"github.com/sqlelect/sqlelect/internal/getlock"
)

// Names of the MySQL user-level locks (GET_LOCK) the backends hold; the
// locks themselves are internal/getlock's.

// LockName returns the GET_LOCK name of the lock backend's election name in
// table of database. User-level locks are server-wide, so the name includes
// the database and the table: the same election name in two databases or
// two tables of one server is two elections, and must be two locks. table
// may be qualified (`db.table`): its qualifier is then the database, and
// database is ignored; an empty table means DefaultTable. Pass the names as
// the server compares them (lower case where lower_case_table_names is 1 or
// 2: Run folds them so).
//
// The name is "sqlelect:" database "." table ":" name when that fits MySQL's
// 64 characters, database and table have only lower-case letters, digits, _
// and $, and name has no upper-case letters; otherwise "sqlelect#" followed
// by the first 55 hex digits of the SHA-256 of the three. Hashing keeps
// distinct elections distinct: they are never truncated into one, and
// MySQL, which folds lock names to lower case (MariaDB does not), never sees
// two names that differ only by case. The two forms cannot collide ('#' is
// not allowed in names), nor can two readable ones ('.' and ':' are not
// allowed in the database and table parts).
//
// An operator can see who holds it with, for example,
// SELECT IS_USED_LOCK('sqlelect:app.service_election:jobs') (a connection
// id, or NULL).
//
// Lock names changed in this version (they used to be "sqlelect:" name):
// all candidates of one election must run versions that name the lock
// alike. During a rolling upgrade that mixes both, an old and a new
// candidate can each hold its own lock, and they take the row from each
// other at every renewal: the terms and the lock delay still keep them from
// leading at once, but leadership flaps until every candidate runs one
// naming. Upgrade all candidates of an election together (stop the old ones
// first).
func LockName(database, table, name string) string {
	return getlock.Name(database, cmp.Or(table, DefaultTable), name)
}

// WakeLockName returns the name of the user-level lock (GET_LOCK) the table
// backend's holder of election name in table of database keeps so that its
// followers wake as soon as it lets go (see Config.Tuning.DisableFastHandover):
// "sqlelect.wake#" and the first 50 hex digits of the SHA-256 of the
// database, the table and the name. Database and table are as for LockName
// (a qualified table names its database; Run uses the connection's default
// database otherwise), so the same election name in two databases or tables
// of one server is two locks. It differs from LockName, so the two backends
// never share a lock. An operator can see whether a table election's holder
// keeps it with SELECT IS_USED_LOCK(name).
//
// Candidates that name it differently (versions before the database was
// part of it) only lose the fast handover between them: the lock is a hint,
// the row decides.
func WakeLockName(database, table, name string) string {
	return getlock.WakeName(database, cmp.Or(table, DefaultTable), name)
}
