package election

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/internal/getlock"
)

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
// (electionprom: sqlelect_fast_handover_skipped_total).
//
// hold, letGo and close are called from the Run goroutine; await from a
// goroutine Run owns, never at the same time as the others.
type wakeup struct {
	db    *sql.DB
	cfg   settings
	log   *slog.Logger
	count func(error) // counts a failure (the heartbeat error metric)
	skip  func()      // counts a hint skipped for want of a spare connection

	warned atomic.Bool // a skip was logged

	// held is the holder's connection while it holds the lock, on the
	// lock getlock.WakeName(database, cfg.Table, cfg.Name) set by preflight.
	held     getlock.Conn
	checkDue int // renewals until the holder checks its lock is still there
	every    int // renewals between such checks
}

// minAwait is the shortest wait worth a GET_LOCK round trip.
const minAwait = 5 * time.Millisecond

func newWakeup(db *sql.DB, cfg settings, count func(error), skip func()) *wakeup {
	return &wakeup{
		db: db, cfg: cfg, log: cfg.Logger.With("election", cfg.Name, "id", cfg.ID),
		count: count, skip: skip,
		every: max(1, int(cfg.LeaseDuration/cfg.RenewInterval)),
	}
}

// preflight names the lock after the election's database and learns
// whether the server takes fractional lock timeouts.
func (w *wakeup) preflight(ctx context.Context) error {
	site, err := getlock.ReadSite(ctx, w.db, w.cfg.Table)
	if err != nil {
		return err
	}
	w.held.Lock = getlock.NewLock(getlock.WakeName(site.Database, site.Table, w.cfg.Name), site.Flavor)
	return nil
}

// hold makes sure the holder keeps the lock; called after each heartbeat
// that found this candidate holding. It never waits for the lock: a follower
// may have it for an instant while passing a wakeup along; the next renewal
// tries again.
func (w *wakeup) hold(ctx context.Context) {
	if w.held.Conn != nil {
		if w.checkDue--; w.checkDue > 0 {
			return
		}
		w.checkDue = w.every
		mine, err := w.held.Mine(ctx)
		if err != nil {
			w.count(err) // the connection is gone: start again next time
			return
		}
		if mine {
			return
		}
		w.held.Discard() // its lock is gone: start again
	}
	if ok, err := w.take(ctx, &w.held); !ok {
		if err != nil {
			w.count(err)
		}
		return
	}
	got, err := w.held.Get(ctx, w.held.Lock.TryLock)
	if err != nil {
		w.count(err)
		return
	}
	if !got {
		w.held.GiveBack()
		return
	}
	w.checkDue = w.every
}

// take opens c on a connection from the pool for the hint, unless the pool
// would have none left for the elections' statements (getlock.OpenSpare):
// then it counts the skip and returns false and no error.
func (w *wakeup) take(ctx context.Context, c *getlock.Conn) (bool, error) {
	ok, err := c.OpenSpare(ctx, w.db)
	if !ok && err == nil {
		w.skipped()
	}
	return ok, err
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
	if w.held.Conn == nil {
		return
	}
	if _, err := w.held.Release(ctx); err != nil {
		w.count(err) // the connection was discarded, which frees the lock too
		return
	}
	w.held.GiveBack()
}

func (w *wakeup) close() { w.held.Discard() }

// await waits up to about d for the holder to let go, and reports whether
// it did. It returns false at once when nobody keeps the lock (no holder, or
// one that does not keep it): the caller's timer decides then. The server's
// timeout ends a little before d, so that waiting out d never needs to
// cancel the statement (which would cost the connection). It is called
// from a goroutine Run owns and joins (Candidate.startAwait), never at the
// same time as a backend method.
func (w *wakeup) await(ctx context.Context, d time.Duration) bool {
	timeout := d - 2*time.Millisecond
	if timeout < minAwait {
		return false
	}
	c := getlock.Conn{Lock: w.held.Lock}
	ok, err := w.take(ctx, &c)
	if ok {
		defer c.GiveBack()
		ok, err = c.Pass(ctx, c.Lock.Pass(timeout))
	}
	if err != nil && ctx.Err() == nil {
		w.count(err) // and the caller's timer decides
		w.log.Debug("handover wait failed", "err", err)
	}
	return ok
}
