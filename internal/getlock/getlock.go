// Package getlock owns MySQL user-level locks (GET_LOCK), which two parts of
// package election hold: the lock backend (lock.go), whose election is such a lock,
// and the table backend's fast handover (wakeup.go), whose holder keeps one
// so that followers (and operator.Observe) wake the moment it lets go. Here:
// how the locks are named, the statements that take, check and release one,
// the connection one is held on, and the handover hint's wait (Hint).
package getlock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Lock names.
const (
	// MaxNameLen is the longest user-level lock name MySQL accepts.
	MaxNameLen  = 64
	plainPrefix = "sqlelect:"
	hashPrefix  = "sqlelect#" // '#' never occurs in an election name
	// wakePrefix starts the name of the table backend's handover lock.
	wakePrefix = "sqlelect.wake#"
	identChars = "abcdefghijklmnopqrstuvwxyz0123456789_$"
	nameChars  = "abcdefghijklmnopqrstuvwxyz0123456789._:/@-"
)

// Name returns the GET_LOCK name of the lock backend's election name in
// table (not empty; qualified, its qualifier is the database) of database.
// User-level locks are server-wide, so the name includes the database and
// the table: the same election name in two databases or two tables of one
// server is two elections, and must be two locks. Pass the names as the
// server compares them (lower case where lower_case_table_names is 1 or 2:
// Run folds them so).
//
// The name is "sqlelect:" database "." table ":" name when that fits
// MySQL's 64 characters, database and table have only lower-case letters,
// digits, _ and $, and name has no upper-case letters; otherwise
// "sqlelect#" followed by the first 55 hex digits of the SHA-256 of the
// three. Hashing keeps distinct elections distinct: they are never
// truncated into one, and MySQL, which folds lock names to lower case
// (MariaDB does not), never sees two names that differ only by case. The
// two forms cannot collide ('#' is not allowed in names), nor can two
// readable ones ('.' and ':' are not allowed in the database and table
// parts). docs/operations.md ("Lock names and rolling upgrades") gives
// operators the naming, and why all candidates of an election must run
// versions that name the lock alike.
func Name(database, table, name string) string {
	database, table = scope(database, table)
	plain := plainPrefix + database + "." + table + ":" + name
	if len(plain) <= MaxNameLen && isPlain(database, identChars) && isPlain(table, identChars) && isPlain(name, nameChars) {
		return plain
	}
	return hashedName(hashPrefix, database, table, name)
}

// WakeName returns the name of the user-level lock the table backend's
// holder keeps for its followers' fast handover (see
// election.Config.Tuning.DisableFastHandover): "sqlelect.wake#" and the
// first 50 hex digits of the SHA-256 of database, table and name, as for
// Name. It differs from Name, so the two backends never share a lock.
// Candidates that name it differently (versions before the database was
// part of it) only lose the fast handover between them: the lock is a
// hint, the row decides.
func WakeName(database, table, name string) string {
	database, table = scope(database, table)
	return hashedName(wakePrefix, database, table, name)
}

// hashedName is prefix and the hex SHA-256 of database, table and name,
// cut to MaxNameLen.
func hashedName(prefix, database, table, name string) string {
	sum := sha256.Sum256([]byte(database + "\x00" + table + "\x00" + name))
	return (prefix + hex.EncodeToString(sum[:]))[:MaxNameLen]
}

// scope splits a qualified table into its database and table.
func scope(database, table string) (string, string) {
	if db, t, ok := strings.Cut(table, "."); ok {
		database, table = db, t
	}
	return database, table
}

// isPlain reports whether s may be used as it is in a lock name: not
// empty, and only the characters chars allows. A database or table name may
// have lower-case letters, digits, _ and $ (identChars); an election name
// lower-case letters, digits and . _ : / @ - (nameChars), so that it is the
// same for every server and safe inside a SQL string literal.
func isPlain(s, chars string) bool { return s != "" && strings.Trim(s, chars) == "" }

// Literal quotes s, which holds only characters safe in a SQL string
// literal (lock names, validated election names: no quotes, no
// backslashes), as a SQL string.
func Literal(s string) string { return "'" + s + "'" }

// Site is what an election's lock names and GET_LOCK calls depend on,
// read from the server by ReadSite (or made by NewSite).
type Site struct {
	Database, Table string      // as Name and WakeName take them
	Version         string      // the server's VERSION()
	Flavor          stmt.Flavor // of Version
}

// ReadSite reads the database and the table an election's lock names
// are made of (see Name): table, as it is, and the connection's default
// database (DATABASE(); empty when there is none, and then the election's
// statements fail anyway), which Name and WakeName take unless table is
// qualified, and the server's flavour. Where the
// server compares database and table names without case
// (lower_case_table_names 1 or 2), both are folded to lower case, so that
// candidates that spell them differently still share the lock.
func ReadSite(ctx context.Context, db *sql.DB, table string) (Site, error) {
	var cur sql.NullString
	var fold int
	var version string
	if err := db.QueryRowContext(ctx, `SELECT `+SiteColumns).Scan(&cur, &fold, &version); err != nil {
		return Site{}, fmt.Errorf("getlock: reading the default database and the server version: %w", err)
	}
	return NewSite(table, cur.String, fold, version), nil
}

// SiteColumns select what a Site is made of, for NewSite: DATABASE(),
// @@lower_case_table_names and VERSION(). Run's preflight reads them with
// the session's settings, in one statement (internal/probe).
const SiteColumns = `DATABASE(), @@lower_case_table_names, VERSION()`

// NewSite is the Site of table on a server that read database, fold and
// version (SiteColumns).
func NewSite(table, database string, fold int, version string) Site {
	if fold != 0 {
		database, table = strings.ToLower(database), strings.ToLower(table)
	}
	return Site{Database: database, Table: table, Version: version, Flavor: stmt.FlavorOf(version)}
}

// Call returns a GET_LOCK call that waits about d for lock (a SQL
// expression), and the optimizer hint that must follow the SELECT keyword of
// its statement. MariaDB honours a fractional timeout. MySQL does not: it
// rounds the timeout to whole seconds (0.4 returns at once, 0.5 waits a
// second), so there the call waits whole seconds, rounded up, and
// MAX_EXECUTION_TIME ends the statement after d with error 3024 (see
// mysqlerr.QueryTimeout), leaving the connection usable. Either way a waiter queued
// in GET_LOCK gets the lock the moment it is released.
func Call(lock string, d time.Duration, mariadb bool) (hint, call string) {
	if mariadb {
		return "", fmt.Sprintf("GET_LOCK(%s, %.6f)", lock, d.Seconds())
	}
	secs := max(int64((d+time.Second-1)/time.Second), 1)
	return fmt.Sprintf("/*+ MAX_EXECUTION_TIME(%d) */ ", max(d.Milliseconds(), 1)),
		fmt.Sprintf("GET_LOCK(%s, %d)", lock, secs)
}

// Lock is one user-level lock and its statements, compiled once. Its
// name is a safe SQL literal (Name and WakeName make only such
// names), written into the statements' text: they bind no parameter, so
// they go over the text protocol in one round trip. A Lock is a small
// value, safe to copy and to share.
type Lock struct {
	Name    string
	MariaDB bool // the server honours fractional GET_LOCK timeouts

	TryLock stmt.Stmt // takes it if it is free, at once
	IsMine  stmt.Stmt // 1 when the connection holds it
	Release stmt.Stmt // RELEASE_LOCK: 1 when the connection held it
}

func NewLock(name string, f stmt.Flavor) Lock {
	lit := Literal(name)
	return Lock{
		Name:    name,
		MariaDB: f == stmt.FlavorMariaDB,
		TryLock: stmt.Must(`SELECT GET_LOCK(` + lit + `, 0)`),
		IsMine:  stmt.Must(`SELECT IS_USED_LOCK(` + lit + `) = CONNECTION_ID()`),
		Release: stmt.Must(`SELECT RELEASE_LOCK(` + lit + `)`),
	}
}

// Wait returns a statement that waits about d for the lock and keeps it: 1
// when taken, 0 when the wait ended first. Candidates never queue for a
// lock this way (a frozen waiter would capture it, see Pass); the doctor uses it
// to see how the server times GET_LOCK waits.
func (l Lock) Wait(d time.Duration) stmt.Stmt {
	hint, call := Call(Literal(l.Name), d, l.MariaDB)
	return stmt.Must(`SELECT ` + hint + call)
}

// Pass returns a statement that waits about d for the lock and lets it go
// at once: -1 when nobody holds it, 1 when it was let go meanwhile (and was
// passed on), 0 when the wait ended first; Conn.PassOn runs it.
func (l Lock) Pass(d time.Duration) stmt.Stmt {
	lit := Literal(l.Name)
	hint, call := Call(lit, d, l.MariaDB)
	return stmt.Must(`SELECT ` + hint + `CASE WHEN IS_USED_LOCK(` + lit + `) IS NULL THEN -1
  WHEN ` + call + ` = 1 THEN RELEASE_LOCK(` + lit + `) ELSE 0 END`)
}

// Conn is a connection that holds, or waits for, a user-level lock: one
// taken from the caller's pool for that purpose alone. After an error on it
// the connection is discarded, never given back to the pool (closing it
// frees a lock it held): its state on the server is then unknown. Not safe
// for concurrent use.
type Conn struct {
	Lock Lock
	Log  *slog.Logger // nil: no logging

	Conn   *sql.Conn // nil when none is open
	ID     uint64    // its CONNECTION_ID(), once its user read it
	Locked bool      // it holds the lock (once: GET_LOCK is re-entrant)
}

// Keepalive asks the server to probe the connection's client with TCP
// keepalives after idle of silence (then each second, three times), so
// that it notices a vanished client while a statement runs: MariaDB has
// the three session variables (global only in current versions), MySQL
// none; a server that refuses one refuses all three. It reports whether to
// ask again on a later connection: false once the server refused them; a
// transient failure is logged, and asked again.
func (c *Conn) Keepalive(ctx context.Context, idle time.Duration) (again bool) {
	_, err := c.Conn.ExecContext(ctx, fmt.Sprintf("SET SESSION tcp_keepalive_time = %d, tcp_keepalive_interval = 1, tcp_keepalive_probes = 3", int64(idle/time.Second)))
	switch mysqlerr.Errno(err) {
	case mysqlerr.UnknownSystemVariable, mysqlerr.SpecificAccessDenied,
		1229, 1238: // ER_GLOBAL_VARIABLE, ER_INCORRECT_GLOBAL_LOCAL_VAR (read only)
		return false
	}
	if err != nil && c.Log != nil {
		c.Log.Debug("setting the session TCP keepalive failed", "err", err)
	}
	return true
}

// Scan runs s, a statement of the lock's returning one number (no
// parameters), on the connection.
func (c *Conn) Scan(ctx context.Context, s stmt.Stmt) (sql.NullInt64, error) {
	var r sql.NullInt64
	err := s.QueryRow(ctx, c.Conn, stmt.Params{}).Scan(&r)
	return r, err
}

// Get runs s, a GET_LOCK statement of the lock (tryLock, wait), and reports
// whether the connection got the lock. GET_LOCK returns NULL on an error (a
// killed thread, for one): that is an error too.
func (c *Conn) Get(ctx context.Context, s stmt.Stmt) (bool, error) {
	r, err := c.Scan(ctx, s)
	switch {
	case mysqlerr.Errno(err) == mysqlerr.QueryTimeout:
		// MySQL ended the wait (MAX_EXECUTION_TIME, see Call).
		// Should that have raced with getting the lock, this connection
		// holds it: ask, so that the state here matches the server's.
		return c.Mine(ctx)
	case err != nil:
		return false, c.Fail(err)
	case !r.Valid:
		return false, c.Fail(fmt.Errorf("getlock: GET_LOCK returned NULL: GET_LOCK(%q)", c.Lock.Name))
	}
	c.Locked = r.Int64 == 1
	return c.Locked, nil
}

// Mine reports whether the connection holds the lock.
func (c *Conn) Mine(ctx context.Context) (bool, error) {
	r, err := c.Scan(ctx, c.Lock.IsMine)
	if err != nil {
		return false, c.Fail(err)
	}
	c.Locked = r.Valid && r.Int64 == 1
	return c.Locked, nil
}

// Release releases the lock and reports whether the connection held it.
func (c *Conn) Release(ctx context.Context) (bool, error) {
	r, err := c.Scan(ctx, c.Lock.Release)
	if err != nil {
		return false, c.Fail(err)
	}
	c.Locked = false
	return r.Valid && r.Int64 == 1, nil
}

// What PassOn saw.
const (
	PassTimeout = 0 // the holder kept it for the whole wait
	PassLetGo   = 1 // the holder let go, and the lock was passed on
)

// PassOn runs s, a wait of the lock's Pass statement, which waits for the
// lock and lets it go at once, and reports what it saw: whether a holder
// let the lock go meanwhile (PassLetGo), nobody held it (-1), or the
// wait ended (PassTimeout). The connection never keeps the lock: a waiter
// that the server hands the lock to lets it go in the same statement, on
// the server, even if its client no longer reads (a frozen process).
func (c *Conn) PassOn(ctx context.Context, s stmt.Stmt) (int64, error) {
	r, err := c.Scan(ctx, s)
	switch {
	case mysqlerr.Errno(err) == mysqlerr.QueryTimeout:
		// MySQL ended the wait (see Call): the holder kept the
		// lock. Should the end have come between GET_LOCK and
		// RELEASE_LOCK, this connection holds it: let it go.
		had, err := c.Release(ctx) // it had the lock: the holder had let go
		if had {
			return PassLetGo, err
		}
		return PassTimeout, err
	case err != nil:
		return PassTimeout, c.Fail(err)
	}
	return r.Int64, nil // NULL (GET_LOCK failed) reads as 0, PassTimeout
}

// Fail discards the connection after err on it, and returns err.
func (c *Conn) Fail(err error) error {
	c.Discard()
	return err
}

// Discard closes the connection without returning it to the pool
// (database/sql discards a connection whose Raw returns driver.ErrBadConn);
// the server frees a lock it held.
func (c *Conn) Discard() {
	if c.Conn != nil {
		_ = c.Conn.Raw(func(any) error { return driver.ErrBadConn })
		if c.Log != nil {
			c.Log.Debug("lock connection closed", "connection_id", c.ID, "held_lock", c.Locked)
		}
	}
	c.GiveBack() // Raw's error closed it already: this clears the state
}

// GiveBack returns the connection, which holds no lock, to the pool.
func (c *Conn) GiveBack() {
	if c.Conn != nil {
		_ = c.Conn.Close()
	}
	c.Conn, c.ID, c.Locked = nil, 0, false
}

// MinAwait is the shortest wait on the handover hint worth a GET_LOCK
// round trip.
const MinAwait = 5 * time.Millisecond

// Metrics counts the handover hint's failures and skips; election.Metrics
// is one.
type Metrics interface {
	Heartbeat(election string, d time.Duration, err error)
	HandoverSkipped(election string)
}

// Hint is the table backend's handover hint (the lock WakeName names) as
// election's candidates (wakeup.go) and operator.Observe share it: the
// holder keeps the lock on a connection of its own; a follower waits for
// it in GET_LOCK (Await) and lets it go at once in the same statement.
// Every failure only costs speed: the follower falls back to its timer.
//
// Both connections come from the caller's pool, which the elections' own
// statements need too, so the hint takes one only when the pool has one
// to spare (Take). Set Lock before Take or Await; do not copy a Hint once
// used.
type Hint struct {
	DB       *sql.DB
	Lock     Lock         // on WakeName
	Log      *slog.Logger // with the election's attributes
	Election string       // the name failures and skips are counted under
	Metrics  Metrics
	Timeout  time.Duration // a query timeout: Await(d) is bounded by d+Timeout

	warned atomic.Bool // a skip was logged
}

// Take opens c on a connection from the pool for the hint when the pool
// has one to spare for it, and reports whether it did: the pool must have
// two to spare before (it is unlimited, or MaxOpenConnections - InUse >=
// 2), and one still once c has its own (others may take theirs at the same
// moment: then all give them back), so that the statements of the
// elections on the pool are never starved of a connection. Otherwise it
// counts the skip (sqlelect_fast_handover_skipped_total), logs the first,
// and returns false and no error.
func (h *Hint) Take(ctx context.Context, c *Conn) (bool, error) {
	spare := func(n int) bool {
		s := h.DB.Stats()
		return s.MaxOpenConnections <= 0 || s.MaxOpenConnections-s.InUse >= n
	}
	if spare(2) {
		// c.Conn is nil, and so ID 0 and Locked false (Discard and
		// GiveBack clear them).
		var err error
		if c.Conn, err = h.DB.Conn(ctx); err != nil {
			return false, err
		}
		if spare(1) {
			return true, nil
		}
		c.GiveBack() // others took theirs meanwhile
	}
	h.Metrics.HandoverSkipped(h.Election)
	if h.warned.CompareAndSwap(false, true) {
		s := h.DB.Stats()
		h.Log.Warn("fast handover skipped: the connection pool has no connection to spare; followers poll, and a leader sees transfer requests at its renewals, instead (raise SetMaxOpenConns, or set a candidate's Config.Tuning.DisableFastHandover)",
			"max_open_connections", s.MaxOpenConnections, "in_use", s.InUse)
	}
	return false, nil
}

// Fail counts err, a failure of the hint, as a heartbeat error.
func (h *Hint) Fail(err error) { h.Metrics.Heartbeat(h.Election, 0, err) }

// Await waits up to about d for the holder to let go, and reports whether
// it did. It returns false at once when nobody keeps the lock (no holder,
// or one that does not keep it): the caller's timer decides then. The
// server's timeout ends a little before d, so that waiting out d never
// needs to cancel the statement (which would cost the connection); ctx is
// bounded all the same, by d and h.Timeout.
func (h *Hint) Await(ctx context.Context, d time.Duration) bool {
	timeout := d - 2*time.Millisecond
	if timeout < MinAwait {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, d+h.Timeout)
	defer cancel()
	c := Conn{Lock: h.Lock}
	r := int64(PassTimeout)
	ok, err := h.Take(ctx, &c)
	if ok {
		defer c.GiveBack()
		r, err = c.PassOn(ctx, c.Lock.Pass(timeout))
	}
	if err != nil && ctx.Err() == nil {
		h.Fail(err) // and the caller's timer decides
		h.Log.Debug("handover wait failed", "err", err)
	}
	return r == PassLetGo
}

// Jitter returns d times a random factor in [1, 1+factor): the retry
// interval a follower (of either backend, or Observe) waits between looks,
// spread so that followers do not look in step. A factor that is not
// positive (none) gives d.
func Jitter(d time.Duration, factor float64) time.Duration {
	return d + time.Duration(rand.Float64()*max(factor, 0)*float64(d))
}
