package election

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
)

// Sentinel errors. Check them with errors.Is: the package wraps them with
// details (the election, the table, the server's message).
var (
	// ErrNotLeader is returned by operations that need leadership (Fenced,
	// for instance) when this candidate does not lead.
	ErrNotLeader = errors.New("election: not leader")
	// ErrNoLeader is returned by Leader, and the operator's Status and Reelect, when nobody
	// holds a live lease. The errors returned wrap one of its two causes,
	// ErrNoSuchElection or ErrNoLiveLease, which both match ErrNoLeader.
	ErrNoLeader = errors.New("election: no leader")
	// ErrNoSuchElection means the election has no row in the table: no
	// candidate ever ran, or an operator deleted the row. It matches
	// ErrNoLeader.
	ErrNoSuchElection error = &subError{"election: no such election", ErrNoLeader}
	// ErrNoLiveLease means the election's row exists but its lease expired
	// or was released. It matches ErrNoLeader.
	ErrNoLiveLease error = &subError{"election: no live lease", ErrNoLeader}
	// ErrNotRunning is returned by Resign when Run is not running.
	ErrNotRunning = errors.New("election: not running")
	// ErrInvalidConfig wraps every Config validation failure.
	ErrInvalidConfig = ident.ErrInvalid
	// ErrAlreadyRunning is returned by a second concurrent call to Run.
	ErrAlreadyRunning = errors.New("election: already running")
	// ErrTableMissing means the election table does not exist: run the
	// migrations (`sqlelect migrate up` or package schema).
	ErrTableMissing = probe.ErrTableMissing
	// ErrAccessDenied means the database user lacks a privilege the election
	// needs (SELECT, INSERT, UPDATE on the table).
	ErrAccessDenied = probe.ErrAccessDenied
	// ErrSchemaMismatch means the table exists but lacks columns the library
	// needs: the migrations are behind.
	ErrSchemaMismatch = probe.ErrSchemaMismatch
	// ErrUnsafeTimeZone means the session time zone observes daylight saving
	// time, under which NOW() comparisons jump by an hour and two leaders
	// could overlap. Set time_zone='+00:00' in the DSN.
	ErrUnsafeTimeZone = probe.ErrUnsafeTimeZone
	// ErrUnsupportedTopology means the server cannot give this backend's
	// guarantees, for example GET_LOCK on a Galera cluster.
	ErrUnsupportedTopology = probe.ErrUnsupportedTopology
	// ErrNilDB is returned by constructors given a nil *sql.DB; it wraps
	// ErrInvalidConfig.
	ErrNilDB error = &subError{"election: nil *sql.DB", ErrInvalidConfig}
	// ErrUnknownDatabase means the database named by the DSN (or by a
	// qualified table) does not exist.
	ErrUnknownDatabase = probe.ErrUnknownDatabase
	// ErrUnsafeSession means a statement ran on a pooled connection whose
	// session time zone sqlelect cannot trust, and changed nothing: the
	// application left a time_zone with daylight saving time on a
	// connection of its pool. The candidate treats it as any failed
	// statement ("not leader this tick") and tries again, on whichever
	// connection the pool gives next. Reset such state before returning a
	// connection to the pool (SET time_zone = DEFAULT), or give the election
	// a pool of its own. (A session's SET @@timestamp is no longer refused:
	// no statement reads NOW(6).)
	ErrUnsafeSession = errors.New("election: session time zone not trusted (a time_zone with daylight saving time left on a pooled connection): statement refused")
	// ErrSimultaneousAssignment means the session's sql_mode has MariaDB's
	// SIMULTANEOUS_ASSIGNMENT, under which the heartbeat, which decides in
	// its first assignment and reads the decision in the others, would
	// never change an existing row (never two leaders, but no takeover
	// either). Run's preflight fails with it; remove the mode from the
	// DSN's sql_mode (or the server's default).
	ErrSimultaneousAssignment = probe.ErrSimultaneousAssignment
	// ErrSysdateIsNow means the server runs with --sysdate-is-now, under
	// which SYSDATE() is NOW() and a session's SET @@timestamp moves the
	// clock every statement writes and judges leases by. Run fails with
	// it; restart the server without the option.
	ErrSysdateIsNow = probe.ErrSysdateIsNow
	// ErrNoAutocommit means the session does not commit each statement:
	// autocommit=0, or completion_type=CHAIN (every COMMIT opens the next
	// transaction), from the DSN or left on a pooled connection. A renewal
	// left uncommitted would let the leader believe while everyone else sees
	// its lease run out. Run fails with it; remove autocommit and
	// completion_type from the DSN, and reset them before a connection goes
	// back to the pool.
	ErrNoAutocommit = probe.ErrNoAutocommit
	// ErrUnknownTimeZone means the server does not know the session time
	// zone the DSN sets (time_zone=...), so that every connection fails: Run
	// fails with it. Load the server's time zone tables, or use an offset
	// such as time_zone=%27%2B00%3A00%27.
	ErrUnknownTimeZone = probe.ErrUnknownTimeZone
	// ErrSelectLimit means the session's sql_select_limit is below 2^31 - 1
	// (its default is 2^64 - 1), from the DSN or the server's
	// init_connect: a read of many rows (a Batcher's, a shard group's)
	// would miss some and act on the rest. Run fails with it; remove it
	// from the DSN, or set sql_select_limit=DEFAULT there.
	ErrSelectLimit = probe.ErrSelectLimit
	// ErrUnsafeServer means the server answered a statement the way no
	// MySQL or MariaDB does, in a way the election's safety rests on (the
	// heartbeat's affected rows): a lease protocol on it could elect two
	// leaders. Run's preflight checks this; `sqlelect doctor`
	// (doctor.Check) checks more.
	ErrUnsafeServer = probe.ErrUnsafeServer
)

// subError is a sentinel that also matches a more general one.
type subError struct {
	msg    string
	parent error
}

func (e *subError) Error() string { return e.msg }
func (e *subError) Unwrap() error { return e.parent }

// Classify wraps a server error from any statement or connection attempt on
// an election's database (a Ping, a migration) in the sentinel that names
// its cause: ErrAccessDenied, ErrTableMissing, ErrSchemaMismatch,
// ErrUnknownDatabase or ErrUnknownTimeZone, so that callers can tell them
// apart with errors.Is instead of server error numbers. Other errors, and
// errors that already wrap one of the package's sentinels, are returned as
// they are; nil gives nil. The package's own functions return classified
// errors already.
func Classify(err error) error { return probe.Classify(err, "") }

// migrateHint adds to an error about table's layout (ErrTableMissing,
// ErrSchemaMismatch: "run `sqlelect migrate up`") that migrate manages
// DefaultTable only, when table is another.
func migrateHint(err error, table string) error {
	t := table[strings.LastIndex(table, ".")+1:]
	if t == DefaultTable || !errors.Is(err, ErrTableMissing) && !errors.Is(err, ErrSchemaMismatch) {
		return err
	}
	return fmt.Errorf("%w (`sqlelect migrate` manages %s only: for %s, apply schema.DDL(%q) with your own migrations)", err, DefaultTable, table, t)
}

// ErrorKind is a low-cardinality label for a heartbeat error, for
// metrics (see Metrics.Heartbeat) and logs: timeout, connection, deadlock (deadlocks and the write
// conflicts of certification-based clusters: see mysqlerr.WriteConflict), lock_wait,
// access, schema, server (any other server error).
func ErrorKind(err error) string {
	n := mysqlerr.Errno(err) // 0: not a server error
	ne, _ := errors.AsType[net.Error](err)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrTableMissing), errors.Is(err, ErrSchemaMismatch):
		return "schema"
	case errors.Is(err, ErrAccessDenied):
		return "access"
	case errors.Is(err, context.DeadlineExceeded), ne != nil && ne.Timeout():
		return "timeout"
	case mysqlerr.WriteConflict(err):
		return "deadlock"
	case n == mysqlerr.LockWaitTimeout:
		return "lock_wait"
	case n != 0:
		return "server"
	}
	return "connection"
}
