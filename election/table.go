package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/takeset"
)

// NewTable returns a candidate of the table backend: the election is the row
// of cfg.Table whose anchor is cfg.Name, kept by an INSERT … ON DUPLICATE
// KEY UPDATE heartbeat whose affected rows tell the candidate it holds it.
// See the package documentation for the algorithm.
//
// db is the caller's: the library never opens or closes it, and uses one of
// its connections per statement. cfg is copied, defaults filled in and
// validated; errors wrap ErrInvalidConfig. NewTable does no I/O: Run checks
// the table first.
func NewTable(db *sql.DB, config Config) (*Candidate, error) {
	if db == nil {
		return nil, ErrNilDB
	}
	cfg, err := config.settings()
	if err != nil {
		return nil, err
	}
	t := &tableBackend{backendBase: backendBase{db: db, cfg: cfg, value: cfg.Value}}
	t.compile(stmt.Bound{}) // unbounded until preflight knows the server
	c := newCandidate(cfg, t)
	if !cfg.DisableFastHandover {
		t.wake = &wakeup{
			Hint:  getlock.Hint{DB: db, Log: c.log, Election: cfg.Name, Metrics: cfg.Metrics, Timeout: cfg.QueryTimeout},
			every: max(1, int(cfg.LeaseDuration/cfg.RenewInterval)), // renewals between checks of the lock
		}
		c.wake = t.wake
	}
	return c, nil
}

type tableBackend struct {
	backendBase
	wake *wakeup // nil with Config.Tuning.DisableFastHandover
	// stmts are prepared again by preflight, bounded once the server is
	// known.
	stmts tableStmts
}

func (t *tableBackend) preflight(ctx context.Context) (stmt.Bound, error) {
	v, err := t.verdict(ctx)
	if err != nil {
		return stmt.Bound{}, err
	}
	if t.adopt, err = adoptedMillis(v.lease, t.cfg); err != nil {
		return stmt.Bound{}, err
	}
	bound := stmt.NewBound(v.site.Flavor, t.cfg.QueryTimeout)
	// Again, now that the server is known: the statements that can wait
	// for a lock are bounded.
	t.compile(bound)
	if t.wake != nil {
		t.wake.preflight(v.site)
	}
	return bound, nil
}

// compile compiles the candidate's statements, bounded by bound: once for
// all candidates of a Batcher with the same lock delay (Batcher.compiled).
func (t *tableBackend) compile(bound stmt.Bound) {
	if b := t.cfg.Batcher; b != nil {
		c := b.compiled(bound, t.cfg.LockDelay)
		t.stmts, t.held = c.table, c.held
		return
	}
	t.stmts, t.held = tableStatements(t.cfg.Table, bound, t.cfg.LockDelay), heldStatements(t.cfg.Table, bound, bound)
}

// verdict runs the preflight's statements (readVerdict). Candidates that
// share a Batcher and its database run them one at a time and reuse a
// verdict less than a lease old: thousands of elections that start at once
// send one preflight, not one each.
func (t *tableBackend) verdict(ctx context.Context) (verdict, error) {
	b := t.cfg.Batcher
	if b == nil {
		return readVerdict(ctx, t.db, t.cfg.Table, probe.Table, t.stmts.peek)
	}
	select {
	case b.preflight <- struct{}{}:
		defer func() { <-b.preflight }()
	case <-ctx.Done():
		return verdict{}, ctx.Err()
	}
	now := b.opts.Clock.Now()
	if p := b.verdict; p != nil && p.db == t.db && now.Sub(p.at) < t.cfg.LeaseDuration {
		return *p, nil
	}
	v, err := readVerdict(ctx, t.db, t.cfg.Table, probe.Table, t.stmts.peek)
	if err == nil {
		v.at, b.verdict = now, &v
	}
	return v, err
}

// read reads the election's row, with a Batcher's in one statement with
// others' (a Record of the election alone when it has none): a follower's
// look, and confirm's.
func (t *tableBackend) read(ctx context.Context) (Record, error) {
	if t.cfg.Batcher != nil {
		return t.cfg.Batcher.reads.Do(ctx, t.cfg.Name)
	}
	return ReadRecord(ctx, t.db, t.cfg.Table, t.cfg.Name)
}

func (t *tableBackend) follow(ctx context.Context, woken bool) (Record, beat, time.Duration, error) {
	if woken {
		// The holder let go: take at once, without the look first (a
		// round trip off a handover), and look only when that took
		// nothing. The heartbeat alone decides what it may take; the model
		// lets a follower send it whatever the row says (-DBLIND runs).
		if b, err := t.heartbeat(ctx, 0); err != nil || b.held {
			return Record{}, b, 0, err
		}
	}
	rec, err := t.read(ctx)
	if err != nil && !errors.Is(err, ErrNoLeader) {
		return Record{}, beat{}, 0, err
	}
	if rec.Live() && (rec.ID != t.cfg.ID || rec.Transfer) || rec.reservedFor(t.cfg.ID) {
		// Someone else holds a live lease, or the row was handed to
		// another candidate, or a live row names this candidate (which
		// holds nothing) with a planned change pending, which it may not
		// claim: look again at the retry interval, or just after the
		// lease (the transfer window) runs out by the database clock.
		return rec, beat{}, t.retryWait(rec), nil
	}
	// A take holds the handover lock before its leader signal, so that
	// whoever learns of the new leader (a follower's look, an observer
	// started by OnElected) finds the lock held and waits on it: taken
	// after the signal, a wait that came first returned at once (nobody
	// held it) and fell back to its timer, a retry interval or Observe's
	// minute, and missed the next handover's wake-up (operator's
	// TestObserve caught it).
	b, err := t.heartbeat(ctx, 0)
	return rec, b, 0, err
}

func (t *tableBackend) renew(ctx context.Context, hold uint64) (beat, error) {
	if t.cfg.Batcher != nil {
		renewed, err := t.cfg.Batcher.renews.Do(ctx, renewReq{Ctx: ctx, Name: t.cfg.Name, ID: t.cfg.ID, Term: hold})
		if err != nil {
			return beat{}, err
		}
		if renewed {
			return beat{held: true, term: hold}, nil
		}
		// Locked by someone else, or no longer ours as we knew it: decide
		// with the election's own heartbeat.
	}
	return t.heartbeat(ctx, hold)
}

// writeRow is backendBase's, but a Batcher's election gives its row up
// (a release, hand-off or hand-over) with others' in one transaction
// (Batcher.execGive) when it can, within half its time; alone when that
// did not give it up, or failed (its statements change only a row that
// still names the term; a hand-off given up twice expires a little later).
func (t *tableBackend) writeRow(ctx context.Context, w rowWrite, p stmt.Params) (bool, error) {
	var berr error
	if b := t.cfg.Batcher; b != nil && w <= writeHandOver {
		r := giveReq{renewReq: renewReq{Name: p.Name, ID: p.Me, Term: p.Hold}, w: w, to: p.To, lease: p.Lease}
		if w == writeRelease {
			r.lease = 0 // not read: releases batch together
		}
		var cancel context.CancelFunc
		r.Ctx, cancel = context.WithTimeout(ctx, t.cfg.QueryTimeout/2)
		given, err := b.gives.Do(r.Ctx, r)
		cancel()
		if berr = err; given && err == nil {
			return true, nil
		}
	}
	ok, err := t.backendBase.writeRow(ctx, w, p)
	if err != nil && berr != nil {
		err = fmt.Errorf("%w (in a batch: %v)", err, berr)
	}
	return ok, err
}

// heartbeat runs the heartbeat (heartbeatOnce) and, when it found this
// candidate holding, makes sure it keeps the handover lock (wakeup.hold).
func (t *tableBackend) heartbeat(ctx context.Context, hold uint64) (beat, error) {
	b, err := t.heartbeatOnce(ctx, hold)
	if err == nil && b.held && t.wake != nil {
		t.wake.hold(ctx)
	}
	return b, err
}

func (t *tableBackend) lost(ctx context.Context, _ bool) error {
	if t.wake != nil {
		t.wake.letGo(ctx) // after a release: woken followers take
	}
	return nil
}

// beat runs the heartbeat statement for term hold in one transaction with
// the election's term floor (floor.InTx), and returns its affected rows and
// LAST_INSERT_ID: the row's term (an insert's new one).
//
// A Batcher's elections send it with others' in one transaction
// (Batcher.execTake); when that fails, alone.
func (t *tableBackend) beat(ctx context.Context, hold uint64) (int64, int64, error) {
	var did takeset.Did // what it did (a batch writes it before Do returns)
	// NoFirst: during an adoption period a recipe node may have created
	// and led the election without a floor row, so no insert is a first.
	r := takeReq{Ctx: ctx, F: t.stmts.floor, Heartbeat: t.stmts.heartbeat, P: t.params(hold), NoFirst: t.adopt != 0, Did: &did}
	if b := t.cfg.Batcher; b != nil {
		// Dropped unsent once ctx ends (execTake); waited for once its
		// batch began (combine.Combiner.Do).
		alone, berr := b.takes.Do(ctx, r)
		switch {
		case berr == nil && alone == nil:
			return did.N, did.Term, nil
		case berr == nil:
			return 0, 0, alone // sent alone (floor.InTx), and failed
		case ctx.Err() != nil:
			return 0, 0, berr // not sent: execTake leaves it out
		}
	}
	send := func() error {
		return floor.InTx(ctx, t.db, t.stmts.floor, t.cfg.Name, func(tx floor.Tx, fl uint64, first bool) (uint64, error) {
			return r.One(ctx, tx, fl, first)
		})
	}
	if b := t.cfg.Batcher; b != nil {
		err := b.solo.Run(ctx, send) // the batch failed: alone, a few at a time
		return did.N, did.Term, err
	}
	err := send()
	return did.N, did.Term, err
}

func (t *tableBackend) heartbeatOnce(ctx context.Context, hold uint64) (beat, error) {
	if hold != 0 {
		// A holder's renewal first, in one statement; the heartbeat,
		// in its transaction, only when that renews nothing.
		n, err := t.stmts.renew.Affected(ctx, t.db, t.params(hold))
		if err != nil {
			return beat{}, probe.Classify(err, t.cfg.Table)
		}
		if n == 1 {
			return beat{held: true, term: hold}, nil // renewed
		}
	}
	n, term, err := t.beat(ctx, hold)
	if err != nil {
		if mysqlerr.Errno(err) == mysqlerr.BadNull {
			// Refused (dbclock.Trusted, the heartbeat's NULL anchor: see
			// internal/probe's unsafeSessionSQL): a time zone with daylight
			// saving time left on this connection, or a server that now
			// runs with --sysdate-is-now (a failover to one), which stops
			// Run.
			err = fmt.Errorf("%w: %w", ErrUnsafeSession, err)
			if serr := probe.CheckSysdate(ctx, t.db); errors.Is(serr, ErrSysdateIsNow) {
				err = serr
			}
		}
		return beat{}, probe.Classify(err, t.cfg.Table)
	}
	if n > 2 || n == 0 && hold == 0 {
		return beat{}, nil
	}
	// What a take sent did is read without ctx's cancellation, and with a
	// statement's time of its own: a take in flight when Run's context
	// ends is let finish (see beat), and the stand-down that follows gives
	// up a term it won; a take that committed late in its step, after a
	// wait in a batch's queue or on a row lock, still learns that it won.
	// Cut off either way, the next take (this candidate's, or the next
	// with its ID) would find the row naming it and wait out the lock
	// delay (a shard group came up in 20 s, not 3, so). The model reads
	// the row when the reply is processed, at any time after it came; the
	// hold's deadline counts from the heartbeat's send.
	kept, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.QueryTimeout)
	defer cancel()
	return t.confirm(kept, hold, n, term)
}

// confirm tells what the heartbeat for term hold did from its n affected
// rows and the term LAST_INSERT_ID returned: after a new term, an ambiguous
// 1 (an insert, or no change under CLIENT_FOUND_ROWS), a holder's renewal
// that changed nothing (deposed, or asked to hand over), or one the
// heartbeat made after the renewal (tableStmts.renew) renewed nothing (2 affected rows and the
// same term: rare, and what a value left in the decision column by another
// statement would also report), it reads what the row says now (read: a
// batch's takes then send one read for all, not one each, which at 500
// at once overflowed the server's backlog of new connections and cost
// some a second).
func (t *tableBackend) confirm(ctx context.Context, hold uint64, n, term int64) (beat, error) {
	rec, err := t.read(ctx)
	switch {
	case err != nil && !errors.Is(err, ErrNoLeader):
		return beat{}, err
	case rec.ID != t.cfg.ID || rec.Released || rec.Term == 0:
		return beat{}, nil // not this candidate's, or released
	case term > 0 && rec.Term != uint64(term):
		return beat{}, nil // changed again since: not ours this tick
	case n < 2 && hold != 0 && rec.Term == hold && rec.Transfer:
		// Still ours, not renewed: an operator asked for a transfer or a
		// step-down (see probe.RenewCond).
		return beat{requested: true, to: rec.TransferTo}, nil
	case n == 0:
		return beat{}, nil // deposed
	case n == 2 && hold != 0 && rec.Term == hold:
		return beat{held: true, term: hold}, nil
	case n == 1 && rec.Acquired == "first":
		// The election's first term: nobody held it before, so nobody
		// may still believe it leads.
		return beat{held: true, term: rec.Term, inserted: true}, nil
	case n == 1 && rec.Acquired == "insert":
		return beat{held: true, term: rec.Term, inserted: true, delay: t.cfg.LockDelay}, nil
	case n == 2 && (rec.Acquired == "expired" || rec.Acquired == "released" || rec.Acquired == "transferred"):
		return beat{held: true, term: rec.Term}, nil // won: no delay needed
	case n == 2:
		return beat{held: true, term: rec.Term, delay: t.cfg.LockDelay}, nil // claimed
	}
	return beat{}, nil // CLIENT_FOUND_ROWS: 1 meant "no change"
}

func (t *tableBackend) close() {
	if t.wake != nil {
		t.wake.close()
	}
}
