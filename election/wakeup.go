package election

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// wakeLockPrefix starts the name of the table backend's handover lock.
const wakeLockPrefix = "sqlelect.wake#"

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
	sum := sha256.Sum256([]byte(database + "\x00" + table + "\x00" + name))
	return (wakeLockPrefix + hex.EncodeToString(sum[:]))[:MaxLockNameLen]
}

// wakeup is the table backend's handover hint. The holder keeps the lock on
// a connection of its own; a follower waits for it in GET_LOCK on a pooled
// connection and lets it go at once in the same statement. Getting it means
// the holder let go (it resigned, was deposed, or its connection died): the
// follower then reads the row, which alone decides who leads. Every failure
// only costs speed: the follower falls back to its retry interval.
//
// Both connections come from the caller's pool, which the elections' own
// statements need too: a pool of SetMaxOpenConns(n) with n or more hints
// held would starve every renewal of its elections. So the hint takes a
// connection only when the pool has two to spare (db.Stats: an unlimited
// pool, or MaxOpenConnections - InUse >= 2), and keeps it only if one is
// still free once it has it (several elections on one pool may take theirs
// at the same moment: then all give them back). Otherwise it is skipped:
// the holder keeps no lock, the follower polls, and the skip is counted
// (Metrics: sqlelect_fast_handover_skipped_total).
//
// hold, letGo and close are called from the Run goroutine; await from a
// goroutine Run owns, never at the same time as the others.
type wakeup struct {
	db    *sql.DB
	cfg   Config
	lock  string // WakeLockName(database, cfg.Table, cfg.Name), set by preflight
	log   *slog.Logger
	count func(error) // counts a failure (the heartbeat error metric)
	skip  func()      // counts a hint skipped for want of a spare connection

	warned atomic.Bool // a skip was logged

	fractional atomic.Bool // the server honours fractional GET_LOCK timeouts (MariaDB)

	conn     *sql.Conn // the holder's connection, while it holds the lock
	checkDue int       // renewals until the holder checks its lock is still there
	every    int       // renewals between such checks
}

// minAwait is the shortest wait worth a GET_LOCK round trip.
const minAwait = 5 * time.Millisecond

func newWakeup(db *sql.DB, cfg Config, count func(error), skip func()) *wakeup {
	return &wakeup{
		db: db, cfg: cfg, log: cfg.Logger.With("election", cfg.Name, "id", cfg.ID),
		count: count, skip: skip,
		every: max(1, int(cfg.LeaseDuration/cfg.RenewInterval)),
	}
}

// preflight names the lock after the election's database and learns
// whether the server takes fractional lock timeouts.
func (w *wakeup) preflight(ctx context.Context) error {
	database, table, err := lockDatabase(ctx, w.db, w.cfg.Table)
	if err != nil {
		return err
	}
	w.lock = WakeLockName(database, table, w.cfg.Name)
	var version string
	if err := w.db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return fmt.Errorf("election: reading the server version: %w", err)
	}
	w.fractional.Store(isMariaDB(version))
	return nil
}

// hold makes sure the holder keeps the lock; called after each heartbeat
// that found this candidate holding. It never waits for the lock: a follower
// may have it for an instant while passing a wakeup along; the next renewal
// tries again.
func (w *wakeup) hold(ctx context.Context) {
	if w.conn != nil {
		if w.checkDue--; w.checkDue > 0 {
			return
		}
		w.checkDue = w.every
		var mine sql.NullInt64
		err := w.conn.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?) = CONNECTION_ID()`, w.lock).Scan(&mine)
		if err == nil && mine.Valid && mine.Int64 == 1 {
			return
		}
		w.discard() // the connection or its lock is gone: start again
		if err != nil {
			w.count(err)
			return
		}
	}
	conn, err := w.take(ctx)
	if conn == nil {
		if err != nil {
			w.count(err)
		}
		return
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 0)`, w.lock).Scan(&got); err != nil {
		w.count(err)
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
		return
	}
	if !got.Valid || got.Int64 != 1 {
		_ = conn.Close()
		return
	}
	w.conn, w.checkDue = conn, w.every
}

// take takes a connection from the pool for the hint, unless the pool
// would have none left for the elections' statements: then it counts the
// skip and returns nil and no error.
func (w *wakeup) take(ctx context.Context) (*sql.Conn, error) {
	if !w.spare(2) {
		w.skipped()
		return nil, nil
	}
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if !w.spare(1) { // others took theirs meanwhile
		_ = conn.Close()
		w.skipped()
		return nil, nil
	}
	return conn, nil
}

// spare reports whether the pool has n connections to spare: it is
// unlimited, or at most MaxOpenConnections - n are in use.
func (w *wakeup) spare(n int) bool {
	s := w.db.Stats()
	return s.MaxOpenConnections <= 0 || s.MaxOpenConnections-s.InUse >= n
}

// skipped counts a skipped hint, and logs the first.
func (w *wakeup) skipped() {
	w.skip()
	if w.warned.CompareAndSwap(false, true) {
		s := w.db.Stats()
		w.log.Warn("fast handover skipped: the connection pool has no connection to spare; followers poll instead (raise SetMaxOpenConns or set DisableFastHandover)",
			"max_open_connections", s.MaxOpenConnections, "in_use", s.InUse)
	}
}

// letGo gives the lock up, waking the followers; called after the row was
// released, or when the hold ended otherwise.
func (w *wakeup) letGo(ctx context.Context) {
	if w.conn == nil {
		return
	}
	var r sql.NullInt64
	if err := w.conn.QueryRowContext(ctx, `SELECT RELEASE_LOCK(?)`, w.lock).Scan(&r); err != nil {
		w.count(err)
		w.discard() // closing the connection frees the lock too
		return
	}
	_ = w.conn.Close()
	w.conn = nil
}

// discard closes the holder's connection without returning it to the pool.
func (w *wakeup) discard() {
	if w.conn == nil {
		return
	}
	_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = w.conn.Close()
	w.conn = nil
}

func (w *wakeup) close() { w.discard() }

// await waits up to about d for the holder to let go, and reports whether
// it did. It returns false at once when nobody keeps the lock (no holder, or
// one that does not keep it): the caller's timer decides then. The server's
// timeout ends a little before d, so that waiting out d never needs to
// cancel the statement (which would cost the connection).
func (w *wakeup) await(ctx context.Context, d time.Duration) bool {
	timeout := d - 2*time.Millisecond
	if timeout < minAwait {
		return false
	}
	conn, err := w.take(ctx)
	if conn == nil {
		if err != nil && ctx.Err() == nil {
			w.count(err) // and the caller's timer decides
		}
		return false
	}
	defer conn.Close()
	hint, call := getLockCall("?", timeout, w.fractional.Load())
	q := `SELECT ` + hint + `CASE WHEN IS_USED_LOCK(?) IS NULL THEN -1
  WHEN ` + call + ` = 1 THEN RELEASE_LOCK(?) ELSE 0 END`
	var r sql.NullInt64
	err = conn.QueryRowContext(ctx, q, w.lock, w.lock, w.lock).Scan(&r)
	if mysqlErrno(err) == erQueryTimeout {
		// MySQL ended the wait (see getLockCall): the holder kept the
		// lock. Should the end have come between GET_LOCK and
		// RELEASE_LOCK, this pooled connection holds it: let it go.
		var r sql.NullInt64
		if err := conn.QueryRowContext(ctx, `SELECT RELEASE_LOCK(?)`, w.lock).Scan(&r); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closing it frees the lock
			return false
		}
		return r.Valid && r.Int64 == 1 // it had the lock: the holder had let go
	}
	if err != nil {
		if ctx.Err() == nil {
			w.count(err) // and the caller's timer decides
			w.log.Debug("handover wait failed", "err", err)
		}
		return false
	}
	return r.Valid && r.Int64 == 1
}
