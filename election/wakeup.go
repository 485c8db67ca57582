package election

import (
	"context"

	"github.com/sqlelect/sqlelect/internal/getlock"
)

// wakeup is the table backend's handover hint (getlock.Hint). The holder
// keeps the lock on a connection of its own; a follower waits for it in
// GET_LOCK on a pooled connection and lets it go at once in the same
// statement. Getting it means the holder let go (it resigned, was deposed,
// or its connection died): the follower then reads the row, which alone
// decides who leads. Every failure only costs speed: the follower falls
// back to its retry interval.
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
// hold, letGo and close are called from the Run goroutine; Await from a
// goroutine Run owns and joins (Candidate.startAwait), never at the same
// time as the others.
type wakeup struct {
	getlock.Hint

	// held is the holder's connection while it holds the lock, on the
	// lock getlock.WakeName(database, table, name) set by preflight.
	held     getlock.Conn
	checkDue int // renewals until the holder checks its lock is still there
	every    int // renewals between such checks
}

// preflight names the lock after the election's database and table, and
// learns whether the server takes fractional lock timeouts, from site.
func (w *wakeup) preflight(site getlock.Site) {
	w.Lock = getlock.NewLock(getlock.WakeName(site.Database, site.Table, w.Election), site.Flavor)
	w.held.Lock = w.Lock
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
			w.Fail(err) // the connection is gone: start again next time
			return
		}
		if mine {
			return
		}
		w.held.Discard() // its lock is gone: start again
	}
	// A connection when the pool has one to spare (see Hint.Take), and the
	// lock on it. An error discarded the connection.
	got, err := w.Take(ctx, &w.held)
	if got {
		got, err = w.held.Get(ctx, w.Lock.TryLock)
	}
	switch {
	case err != nil:
		w.Fail(err)
	case got:
		w.checkDue = w.every
	case w.held.Conn != nil:
		w.held.GiveBack() // another connection has the lock
	}
}

// letGo gives the lock up, waking the followers; called after the row was
// released, or when the hold ended otherwise.
func (w *wakeup) letGo(ctx context.Context) {
	if w.held.Conn == nil {
		return
	}
	if _, err := w.held.Release(ctx); err != nil {
		w.Fail(err) // the connection was discarded, which frees the lock too
		return
	}
	w.held.GiveBack()
}

func (w *wakeup) close() { w.held.Discard() }
