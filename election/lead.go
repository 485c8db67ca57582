package election

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// leadership is the data of the leading phase.
type leadership struct {
	end    time.Time          // its deadline as last set (OnDemoted's Until)
	cancel context.CancelFunc // cancels the context OnElected and the watchdog run with
	run    *sync.WaitGroup    // OnElected and the watchdog
	bell   func()             // stops the bell (getlock.Bell.Start); nil without
}

// maybeLead starts leading when holding, past the lock delay, before the
// deadline (holding → leading, model: maybeLead): IsLeader turns true
// until the deadline, and OnElected and the watchdog start. Not once Run's
// context ctx ended: a statement let finish then (a renewal, a take) may
// leave it holding, and Run's stand-down gives the row up.
func (c *Candidate) maybeLead(ctx context.Context) {
	now := c.cfg.Clock.Now()
	if c.st.phase != holding || now.Before(c.st.leadAt) || !now.Before(c.st.holdDeadline) || ctx.Err() != nil {
		return
	}
	c.enter(leading)
	term := c.st.hold
	c.term.Store(term)
	c.setDeadline(c.st.holdDeadline)
	c.log.Info("elected", "term", term)
	c.cfg.Metrics.Elected(c.cfg.Name, term)

	lctx, cancel := context.WithCancel(context.Background())
	run := new(sync.WaitGroup)
	c.st.lead = leadership{end: c.st.holdDeadline, cancel: cancel, run: run}
	if c.bell != nil {
		c.st.lead.bell = c.bell.Start(c.rang)
	}
	run.Go(func() { c.watchdog(lctx, cancel) }) // cancels lctx when the lease runs out by the clock
	run.Go(func() {
		if f := c.cfg.Callbacks.OnElected; f != nil {
			f(lctx, Leadership{Term: term, Fenced: func(ctx context.Context, fn func(*sql.Tx) error) error {
				return c.fencedFor(ctx, lctx.Done(), term, fn)
			}})
		}
	})
}

// watchdog ends the leadership when its deadline passes without being
// extended: IsLeader turns false for good (the deadline is cleared, so a
// renewal that comes back later cannot revive it, see extendLead) and the
// leadership context is cancelled, so leader-only work stops on time even
// while the Run goroutine is blocked in a database call.
func (c *Candidate) watchdog(lctx context.Context, cancel context.CancelFunc) {
	for {
		d := c.leadUntil.Load()
		left := time.Duration(d - c.elapsed())
		if d == 0 || left <= 0 && c.leadUntil.CompareAndSwap(d, 0) {
			cancel()
			return
		}
		// With left <= 0, the deadline was extended meanwhile: look again.
		if left > 0 && !c.sleep(lctx, left) {
			return
		}
	}
}

// extendLead moves the end of the current leadership to t, unless that
// leadership is already over: its deadline passed by the clock (IsLeader
// turned false) or the watchdog ended it. A leadership that ended is never
// revived, not even by a renewal sent before its end that succeeded after
// it; the caller demotes it and starts a new one (model: extendLead).
func (c *Candidate) extendLead(t time.Time) bool {
	nd := max(int64(t.Sub(c.epoch)), 1)
	for {
		d := c.leadUntil.Load()
		if d == 0 || c.elapsed() >= d {
			return false
		}
		if c.leadUntil.CompareAndSwap(d, nd) {
			c.st.lead.end = t
			return true
		}
	}
}

// demote ends the current leadership, if any (leading → holding, model:
// demote): IsLeader turns false, the leadership context is cancelled,
// OnElected is waited for and OnDemoted called. The hold is not touched.
func (c *Candidate) demote(reason Reason) {
	if c.st.phase != leading {
		return
	}
	l := c.st.lead
	until := l.end
	if now := c.cfg.Clock.Now(); now.Before(until) {
		until = now
	}
	c.enter(holding)
	c.st.lead = leadership{}
	c.leadUntil.Store(0)
	c.term.Store(0)
	l.cancel()
	if l.bell != nil {
		l.bell() // standDown frees it
	}
	l.run.Wait()
	c.log.Info("demoted", "term", c.st.hold, "reason", string(reason))
	c.cfg.Metrics.Demoted(c.cfg.Name, reason)
	if f := c.cfg.Callbacks.OnDemoted; f != nil {
		f(Demotion{Term: c.st.hold, Reason: reason, Until: until.Round(0)})
	}
}

// standDown ends the hold, if any (holding → following, model: standDown,
// and standDownRelease with g): if leading, the leadership ends first (see
// demote); with g not nil, the row is then given up as g says (a release
// when g is zero, or a hand-over: see releaseHold), and the error of that
// statement returned; with g nil, the backend is told the hold was lost
// (backend.lost).
func (c *Candidate) standDown(ctx context.Context, reason Reason, g *surrender) error {
	if !c.st.holds() {
		return nil
	}
	c.demote(reason)
	var err error
	if g != nil {
		err = c.releaseHold(ctx, c.st.hold, c.st.holdDeadline, *g)
	} else {
		c.step()
		c.lose(ctx, false)
	}
	if c.bell != nil && reason != ReasonLeaseLost {
		// Once the row was given up (the next leader's takeover does not
		// wait for it), so that the next leader finds the bell free; not
		// when the server may not answer (the sleep ends by itself).
		c.bell.Free(context.WithoutCancel(ctx))
	}
	c.st.hold = 0
	c.enter(following)
	return err
}

// sitOut keeps a candidate that just gave its hold up (or resigned) from
// campaigning for two retry intervals plus extra, counted from the end of
// any lock delay it handed on (see releaseHold), so that another candidate
// wins rather than this one claiming its own row back (following or
// sittingOut → sittingOut, model: sitOut). It returns the time left to sit
// out.
func (c *Candidate) sitOut(extra time.Duration) time.Duration {
	c.enter(sittingOut)
	now := c.cfg.Clock.Now()
	c.st.sitOutUntil = later(now, c.st.leadAt).Add(2*c.cfg.RetryInterval + extra)
	return c.st.sitOutUntil.Sub(now)
}

// handOver stands the holder down and hands the row over for a planned
// change of leader (Transfer, or an operator's request seen by a renewal):
// to candidate to, or to anyone when to is empty (holding or leading →
// following → sittingOut, model: handOver). A leader demotes first
// (ReasonTransferred), then marks the row released and reserved for to for
// the transfer window, and wakes the followers: to takes over at once and
// without a lock delay, since the holder stood down before the row said so.
// A holder that does not lead yet (it waits out its lock delay, which it
// cannot hand on to a taker that would not wait) gives the row up as Resign
// does, with the rest of its delay: anyone may take it when that ends. A
// request to hand over to itself is cleared (the row is handed to itself:
// the holder renews at once and keeps leading). The holder then sits out
// two retry intervals, after the transfer window when it named a target.
// An error of the statement is logged, counted and returned: the
// row then expires after its lease.
func (c *Candidate) handOver(ctx context.Context, to string) error {
	if !c.st.holds() || to == c.cfg.ID {
		// Not a change of leader: a transfer to itself is cleared by the
		// next renewal, which the caller runs at once.
		return nil
	}
	g := surrender{over: true, to: to, window: transferWindow(c.cfg.RetryInterval)}
	var extra time.Duration
	switch {
	case c.cfg.Clock.Now().Before(c.st.leadAt):
		// Still waiting out its lock delay: the row is released with the
		// rest of that delay, which it hands on (see releaseHold).
		g = surrender{}
	case to != "":
		// Not back before the others had their turn after a target that
		// never came.
		extra = g.window
	}
	err := c.standDown(ctx, ReasonTransferred, &g)
	c.sitOut(extra)
	if err != nil {
		return fmt.Errorf("election: handing over to %q: %w", to, err)
	}
	return nil
}

// The backend's side of a stand-down.

// releaseHold gives up the row held with term until deadline as g says
// (a release when g is zero, or a hand-over), on a context that survives
// the caller's cancellation (Run's context has usually ended here); it
// changes no phase (model: releaseHold). A hold that never led (it was
// still waiting out its lock delay, st.leadAt) hands the rest of that delay
// on: the row then expires when the delay would have ended instead of
// being marked released, so that the predecessor the delay waits for has
// stood down before anyone leads. A release never hands over a delay that
// the releaser had not served. An error of the statement (or of the term's
// end in the history, in the same transaction) is logged, counted and
// returned: the row then expires after its lease.
func (c *Candidate) releaseHold(ctx context.Context, term uint64, deadline time.Time, g surrender) error {
	now := c.cfg.Clock.Now()
	c.step()
	if !now.Before(deadline) {
		// The lease is no longer ours to give; let go of the lock, if
		// any, since the caller will not campaign for a while.
		c.lose(ctx, true)
		return nil
	}
	g.unserved = max(c.st.leadAt.Sub(now), 0) // none for a hand-over, which leads first
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
	defer cancel()
	err := giveUp(rctx, c.b, term, g)
	if err != nil {
		if g.over {
			c.log.Warn("hand-over failed; the lease will expire instead", "term", term, "to", g.to, "err", err)
		} else {
			c.log.Warn("release failed; the lease will expire instead", "term", term, "err", err)
		}
		c.cfg.Metrics.Heartbeat(c.cfg.Name, 0, err)
	}
	return err
}

// giveUp gives term hold of b up as g says, with the term's end in the
// history in the same transaction (backendBase.giveUpTx), and then lets go
// of what b keeps while holding (model: giveUp): after the row says
// released, so that woken followers find it so.
func giveUp(ctx context.Context, b backend, hold uint64, g surrender) error {
	w, p := g.stmt(b.base().params(hold), b.base().adopt)
	_, err := b.writeRow(ctx, w, p)
	if lerr := b.lost(ctx, true); err == nil {
		err = lerr
	}
	return err
}

// lose tells the backend, on a context that survives the caller's
// cancellation, that the hold ended without a release (see backend.lost):
// with drop, a hold that cannot be released (its deadline passed) of a
// candidate that will not campaign for a while.
func (c *Candidate) lose(ctx context.Context, drop bool) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
	defer cancel()
	if err := c.b.lost(lctx, drop); err != nil {
		c.log.Warn("letting the lock go failed; its connection is closed instead", "err", err)
	}
}
