package election

// This file owns MySQL user-level locks (GET_LOCK), which two parts of the
// package hold: the lock backend (lock.go), whose election is such a lock,
// and the table backend's fast handover (wakeup.go), whose holder keeps one
// so that followers wake the moment it lets go. Here: how the locks are
// named, the statements that take, check and release one, and the
// connection one is held on.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Lock names.
const (
	// MaxLockNameLen is the longest user-level lock name MySQL accepts.
	MaxLockNameLen = 64
	lockPrefix     = "sqlelect:"
	lockHashPrefix = "sqlelect#" // '#' never occurs in an election name
	// wakeLockPrefix starts the name of the table backend's handover lock.
	wakeLockPrefix = "sqlelect.wake#"
)

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
	database, table = lockScope(database, table)
	plain := lockPrefix + database + "." + table + ":" + name
	if len(plain) <= MaxLockNameLen && plainIdent(database) && plainIdent(table) && plainLockName(name) {
		return plain
	}
	return hashedLockName(lockHashPrefix, database, table, name)
}

// WakeLockName returns the name of the user-level lock (GET_LOCK) the table
// backend's holder of election name in table of database keeps so that its
// followers wake as soon as it lets go (see Config.DisableFastHandover):
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
	database, table = lockScope(database, table)
	return hashedLockName(wakeLockPrefix, database, table, name)
}

// hashedLockName is prefix and the hex SHA-256 of database, table and name,
// cut to MaxLockNameLen.
func hashedLockName(prefix, database, table, name string) string {
	sum := sha256.Sum256([]byte(database + "\x00" + table + "\x00" + name))
	return (prefix + hex.EncodeToString(sum[:]))[:MaxLockNameLen]
}

// lockScope splits a qualified table into its database and table, and
// fills in DefaultTable.
func lockScope(database, table string) (string, string) {
	if table == "" {
		table = DefaultTable
	}
	if db, t, ok := strings.Cut(table, "."); ok {
		database, table = db, t
	}
	return database, table
}

// plainIdent reports whether a database or table name may be used as it is
// in a lock name: not empty, and only lower-case letters, digits, _ and $.
func plainIdent(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_$") == ""
}

// plainLockName reports whether name may be used as it is in a lock name:
// not empty, and only lower-case letters, digits and . _ : / @ -, so that it
// is the same for every server and safe inside a SQL string literal.
func plainLockName(name string) bool {
	return name != "" && strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789._:/@-") == ""
}

// sqlString quotes s, which holds only characters safe in a SQL string
// literal (lock names, validated election names: no quotes, no
// backslashes), as a SQL string.
func sqlString(s string) string { return "'" + s + "'" }

// lockSite is what an election's lock names and GET_LOCK calls depend on,
// read from the server by readLockSite.
type lockSite struct {
	database, table string      // as LockName and WakeLockName take them
	flavor          stmt.Flavor // of VERSION()
}

// readLockSite reads the database and the table an election's lock names
// are made of (see LockName): table's qualifier, else the connection's
// default database (DATABASE(); empty when there is none, and then the
// election's statements fail anyway), and the server's flavour. Where the
// server compares database and table names without case
// (lower_case_table_names 1 or 2), both are folded to lower case, so that
// candidates that spell them differently still share the lock.
func readLockSite(ctx context.Context, db *sql.DB, table string) (lockSite, error) {
	var cur sql.NullString
	var fold int
	var version string
	if err := db.QueryRowContext(ctx, `SELECT DATABASE(), @@lower_case_table_names, VERSION()`).Scan(&cur, &fold, &version); err != nil {
		return lockSite{}, fmt.Errorf("election: reading the default database and the server version: %w", err)
	}
	s := lockSite{flavor: stmt.FlavorOf(version)}
	s.database, s.table = lockScope(cur.String, table)
	if fold != 0 {
		s.database, s.table = strings.ToLower(s.database), strings.ToLower(s.table)
	}
	return s, nil
}

// getLockCall returns a GET_LOCK call that waits about d for lock (a SQL
// expression), and the optimizer hint that must follow the SELECT keyword of
// its statement. MariaDB honours a fractional timeout. MySQL does not: it
// rounds the timeout to whole seconds (0.4 returns at once, 0.5 waits a
// second), so there the call waits whole seconds, rounded up, and
// MAX_EXECUTION_TIME ends the statement after d with error 3024 (see
// mysqlerr.QueryTimeout), leaving the connection usable. Either way a waiter queued
// in GET_LOCK gets the lock the moment it is released.
func getLockCall(lock string, d time.Duration, mariadb bool) (hint, call string) {
	if mariadb {
		return "", fmt.Sprintf("GET_LOCK(%s, %.6f)", lock, d.Seconds())
	}
	secs := max(int64((d+time.Second-1)/time.Second), 1)
	return fmt.Sprintf("/*+ MAX_EXECUTION_TIME(%d) */ ", max(d.Milliseconds(), 1)),
		fmt.Sprintf("GET_LOCK(%s, %d)", lock, secs)
}

// userLock is one user-level lock and its statements, compiled once. Its
// name is a safe SQL literal (LockName and WakeLockName make only such
// names), written into the statements' text: they bind no parameter, so
// they go over the text protocol in one round trip. A userLock is a small
// value, safe to copy and to share.
type userLock struct {
	name    string
	mariadb bool // the server honours fractional GET_LOCK timeouts

	tryLock stmt.Stmt // takes it if it is free, at once
	isMine  stmt.Stmt // 1 when the connection holds it
	holder  stmt.Stmt // IS_USED_LOCK: the holder's connection id, NULL when free
	release stmt.Stmt // RELEASE_LOCK: 1 when the connection held it
}

func newUserLock(name string, f stmt.Flavor) userLock {
	lit := sqlString(name)
	return userLock{
		name:    name,
		mariadb: f == stmt.FlavorMariaDB,
		tryLock: stmt.Must(`SELECT GET_LOCK(` + lit + `, 0)`),
		isMine:  stmt.Must(`SELECT IS_USED_LOCK(` + lit + `) = CONNECTION_ID()`),
		holder:  stmt.Must(`SELECT IS_USED_LOCK(` + lit + `)`),
		release: stmt.Must(`SELECT RELEASE_LOCK(` + lit + `)`),
	}
}

// wait returns a statement that waits about d for the lock and keeps it: 1
// when taken, 0 when the wait ended first. Candidates never queue for a
// lock this way (a frozen waiter would capture it, see pass); Check uses it
// to see how the server times GET_LOCK waits.
func (l userLock) wait(d time.Duration) stmt.Stmt {
	hint, call := getLockCall(sqlString(l.name), d, l.mariadb)
	return stmt.Must(`SELECT ` + hint + call)
}

// pass returns a statement that waits about d for the lock and lets it go
// at once: -1 when nobody holds it, 1 when it was let go meanwhile (and was
// passed on), 0 when the wait ended first; lockConn.pass runs it.
func (l userLock) pass(d time.Duration) stmt.Stmt {
	lit := sqlString(l.name)
	hint, call := getLockCall(lit, d, l.mariadb)
	return stmt.Must(`SELECT ` + hint + `CASE WHEN IS_USED_LOCK(` + lit + `) IS NULL THEN -1
  WHEN ` + call + ` = 1 THEN RELEASE_LOCK(` + lit + `) ELSE 0 END`)
}

// lockConn is a connection that holds, or waits for, a user-level lock: one
// taken from the caller's pool for that purpose alone. After an error on it
// the connection is discarded, never given back to the pool (closing it
// frees a lock it held): its state on the server is then unknown. Not safe
// for concurrent use.
type lockConn struct {
	lock userLock
	log  *slog.Logger // nil: no logging

	conn   *sqlx.Conn // nil when none is open
	id     uint64     // its CONNECTION_ID(), once setup read it
	locked bool       // it holds the lock (once: GET_LOCK is re-entrant)

	noKeepalive bool // the server refused the session keepalive variables
}

// open takes a connection from db for the lock; c.conn must be nil.
func (c *lockConn) open(ctx context.Context, db *sqlx.DB) error {
	conn, err := db.Connx(ctx)
	if err != nil {
		return err
	}
	c.conn, c.id, c.locked = conn, 0, false
	return nil
}

// setup ends any transaction the connection came from the pool with, runs
// session (SET SESSION statements) on it, asks for TCP keepalive probes
// after keepalive of silence (see trySessionKeepalive) and reads the
// connection's id. A transaction left open (by COMMIT AND CHAIN, or a BEGIN
// sent as a statement) would hold every later statement's change
// uncommitted, a renewal's too (issue 31): it is rolled back, as the
// server would at the end of the session; the connection never goes back
// to the pool.
func (c *lockConn) setup(ctx context.Context, session stmt.Stmt, keepalive time.Duration) error {
	if _, err := c.conn.ExecContext(ctx, "ROLLBACK AND NO CHAIN NO RELEASE"); err != nil {
		return c.fail(err)
	}
	if _, err := c.exec(ctx, session); err != nil {
		return c.fail(err)
	}
	if !c.noKeepalive {
		c.trySessionKeepalive(ctx, keepalive)
	}
	if err := c.conn.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&c.id); err != nil {
		return c.fail(err)
	}
	return nil
}

// trySessionKeepalive asks for TCP keepalive probes on the connection so
// that the server notices a vanished client while a statement runs, where a
// session may set them (MariaDB has them, global only in current versions;
// MySQL has none). Refusals are remembered and not retried.
func (c *lockConn) trySessionKeepalive(ctx context.Context, idle time.Duration) {
	for _, s := range []string{
		"SET SESSION tcp_keepalive_time = " + strconv.FormatInt(int64(idle/time.Second), 10),
		"SET SESSION tcp_keepalive_interval = 1",
		"SET SESSION tcp_keepalive_probes = 3",
	} {
		_, err := c.conn.ExecContext(ctx, s)
		switch n := mysqlerr.Errno(err); {
		case err == nil:
			continue
		case n == mysqlerr.UnknownSystemVariable || n == mysqlerr.GlobalVariable || n == mysqlerr.IncorrectGlobalLocal || n == mysqlerr.SpecificAccessDenied:
		default:
			c.debug("setting the session TCP keepalive failed", "err", err)
		}
		c.noKeepalive = true
		return
	}
}

// exec runs s, a statement of the lock's (no parameters), on the
// connection.
func (c *lockConn) exec(ctx context.Context, s stmt.Stmt) (sql.Result, error) {
	query, args := s.Bind(stmt.Params{})
	return c.conn.ExecContext(ctx, query, args...)
}

// scan runs s, a statement of the lock's returning one number (no
// parameters), on the connection.
func (c *lockConn) scan(ctx context.Context, s stmt.Stmt) (sql.NullInt64, error) {
	var r sql.NullInt64
	query, args := s.Bind(stmt.Params{})
	err := c.conn.QueryRowContext(ctx, query, args...).Scan(&r)
	return r, err
}

// get runs s, a GET_LOCK statement of the lock (tryLock, wait), and reports
// whether the connection got the lock. GET_LOCK returns NULL on an error (a
// killed thread, for one): that is an error too.
func (c *lockConn) get(ctx context.Context, s stmt.Stmt) (bool, error) {
	r, err := c.scan(ctx, s)
	if mysqlerr.Errno(err) == mysqlerr.QueryTimeout {
		// MySQL ended the wait (MAX_EXECUTION_TIME, see getLockCall).
		// Should that have raced with getting the lock, this connection
		// holds it: ask, so that the state here matches the server's.
		return c.mine(ctx)
	}
	if err != nil {
		return false, c.fail(err)
	}
	if !r.Valid {
		return false, c.fail(fmt.Errorf("election: GET_LOCK(%q) returned NULL", c.lock.name))
	}
	c.locked = r.Int64 == 1
	return c.locked, nil
}

// mine reports whether the connection holds the lock.
func (c *lockConn) mine(ctx context.Context) (bool, error) {
	r, err := c.scan(ctx, c.lock.isMine)
	if err != nil {
		return false, c.fail(err)
	}
	c.locked = r.Valid && r.Int64 == 1
	return c.locked, nil
}

// release releases the lock and reports whether the connection held it.
func (c *lockConn) release(ctx context.Context) (bool, error) {
	r, err := c.scan(ctx, c.lock.release)
	if err != nil {
		return false, c.fail(err)
	}
	c.locked = false
	return r.Valid && r.Int64 == 1, nil
}

// pass runs s, a wait of the lock's pass statement (userLock.pass), which
// waits for the lock and lets it go at once: it reports whether a holder
// let it go meanwhile. It returns false at once when nobody holds the lock.
func (c *lockConn) pass(ctx context.Context, s stmt.Stmt) (bool, error) {
	r, err := c.passOn(ctx, s)
	return r == passLetGo, err
}

// What passOn saw.
const (
	passFree    = -1 // nobody held the lock
	passTimeout = 0  // the holder kept it for the whole wait
	passLetGo   = 1  // the holder let go, and the lock was passed on
)

// passOn is pass, telling a lock that nobody held (passFree) from a wait
// that ended (passTimeout). The connection never keeps the lock: a waiter
// that the server hands the lock to lets it go in the same statement, on
// the server, even if its client no longer reads (a frozen process).
func (c *lockConn) passOn(ctx context.Context, s stmt.Stmt) (int64, error) {
	r, err := c.scan(ctx, s)
	if mysqlerr.Errno(err) == mysqlerr.QueryTimeout {
		// MySQL ended the wait (see getLockCall): the holder kept the
		// lock. Should the end have come between GET_LOCK and
		// RELEASE_LOCK, this connection holds it: let it go.
		had, err := c.release(ctx) // it had the lock: the holder had let go
		if had {
			return passLetGo, err
		}
		return passTimeout, err
	}
	if err != nil {
		return passTimeout, c.fail(err)
	}
	if !r.Valid {
		return passTimeout, nil
	}
	return r.Int64, nil
}

// fail discards the connection after err on it, and returns err.
func (c *lockConn) fail(err error) error {
	c.discard()
	return err
}

// discard closes the connection without returning it to the pool
// (database/sql discards a connection whose Raw returns driver.ErrBadConn);
// the server frees a lock it held.
func (c *lockConn) discard() {
	if c.conn == nil {
		return
	}
	_ = c.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.conn.Close()
	c.debug("lock connection closed", "connection_id", c.id, "held_lock", c.locked)
	c.conn, c.id, c.locked = nil, 0, false
}

// giveBack returns the connection, which holds no lock, to the pool.
func (c *lockConn) giveBack() {
	if c.conn == nil {
		return
	}
	_ = c.conn.Close()
	c.conn, c.id, c.locked = nil, 0, false
}

func (c *lockConn) debug(msg string, args ...any) {
	if c.log != nil {
		c.log.Debug(msg, args...)
	}
}
