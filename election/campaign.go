package election

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// beat is the outcome of one acquisition attempt or renewal.
type beat struct {
	held     bool   // this candidate holds the election after the statement
	term     uint64 // the term held
	inserted bool   // the term began on a new row: the previous one was deleted
	// delay is how long a new hold must wait before leading, so that a
	// predecessor that may not know it lost has stood down: 0 after taking
	// an expired or released row, Config.Tuning.LockDelay after a new or replaced
	// row, what was left of the predecessor's lease when that is known.
	// Ignored with Config.Tuning.DisableLockDelay.
	delay time.Duration
	// requested is set (with held false) when a holder's renewal changed
	// nothing because an operator asked it to hand over: to the candidate
	// to, or to anyone when to is empty. The row still names the holder with
	// its term, with the lease of its previous renewal.
	requested bool
	to        string
}

// backend is what a storage scheme provides to the shared campaign logic.
// Every method is called from the Run goroutine only, with a context that
// has a deadline.
type backend interface {
	// preflight checks once, before campaigning, what retrying cannot fix,
	// and returns the server's stmt.Bound, which limits the lock waits of
	// the statements on pooled connections (Fenced's).
	preflight(ctx context.Context) (stmt.Bound, error)
	// follow looks at the election as a non-holder, tries to acquire it
	// when it may, and says how long to wait before the next look; woken,
	// the holder let go of the handover hint (the table backend's wakeup)
	// since the last look.
	follow(ctx context.Context, woken bool) (seen Record, b beat, wait time.Duration, err error)
	// renew renews the hold of term hold.
	renew(ctx context.Context, hold uint64) (beat, error)
	// writeRow runs w with p on the election's row (a holder's release,
	// hand-off, hand-over or proclaim, a follower's prefer) and reports
	// whether it changed the row: false when the row no longer allows it.
	// The table backend runs it on a pooled connection (backendBase's), the
	// lock backend on its lock connection when it has one.
	writeRow(ctx context.Context, w rowWrite, p stmt.Params) (bool, error)
	// lost lets go of what the backend keeps while holding, the hold having
	// ended (model: giveUp, and after a release): the table backend's
	// handover lock; with drop (the candidate will not campaign for a
	// while: see Candidate.lose, and after a release), the lock backend's
	// lock too, which it otherwise keeps for its next follow to decide.
	lost(ctx context.Context, drop bool) error
	// base is what both backends keep alike: the statements' parameters.
	base() *backendBase
	// close frees what the backend holds (the lock connection); called when
	// Run returns.
	close()
}

// backendBase is what both backends (tableBackend and lockBackend) keep
// and do alike.
type backendBase struct {
	db  *sql.DB
	cfg settings
	// value is the value the candidate publishes: cfg.Value until
	// Proclaim changes it; the campaign reads this one copy too.
	value string
	// adopt is the adopted lease in milliseconds during an adoption
	// period (see adoptedMillis), 0 outside one; set by preflight.
	adopt int64
	// held are the statements writeRow runs, compiled by preflight.
	held heldStmts
}

func (b *backendBase) base() *backendBase { return b }

// writeRow is the table backend's backend.writeRow (the lock backend's
// without a lock connection): on a pooled connection, and again in a
// transaction of the library's when the session would not commit it (see
// floor.ExecCommitted); a give-up in a transaction with the term's end
// (giveUpTx).
func (b *backendBase) writeRow(ctx context.Context, w rowWrite, p stmt.Params) (bool, error) {
	if w <= writeHandOver {
		ok, err := b.giveUpTx(ctx, b.db, w, p)
		return ok, probe.Classify(err, b.cfg.Table)
	}
	n, err := floor.ExecCommitted(ctx, b.db, b.held[w].pool, b.held[w].conn, p)
	return n == 1, probe.Classify(err, b.cfg.Table)
}

// giveUpTx runs w, a release, hand-off or hand-over, with p on db (the pool
// or the lock connection) in one transaction with the end of term :hold in
// the history when w gave the row up (writeEnd: resigned, or transferred
// to :to): the end is recorded exactly when the row was given up, and
// before anyone can take it.
func (b *backendBase) giveUpTx(ctx context.Context, db stmt.Execer, w rowWrite, p stmt.Params) (bool, error) {
	var n int64
	err := floor.InConnTx(ctx, db, func(c *sql.Conn) (err error) {
		if n, err = b.held[w].conn.Affected(ctx, c, p); err != nil || n != 1 {
			return err
		}
		_, err = b.held[writeEnd].conn.Exec(ctx, c, p)
		return err
	})
	return n == 1, err
}

// params are the values of the statements' parameters for this candidate
// holding term hold (0 for none).
func (b *backendBase) params(hold uint64) stmt.Params {
	return stmt.Params{Name: b.cfg.Name, Me: b.cfg.ID, Hold: hold, Lease: max(ceilMillis(b.cfg.LeaseDuration), b.adopt), // see adoptedMillis
		Value: b.value, Priority: b.cfg.Preference.Priority}
}

// retryWait is how long a candidate that may not take rec now waits before
// it looks again: the retry interval, or just after rec's lease (or
// transfer window) runs out by the database clock.
func (b *backendBase) retryWait(rec Record) time.Duration {
	return min(getlock.Jitter(b.cfg.RetryInterval, b.cfg.JitterFactor), rec.LeaseLeft+time.Millisecond)
}

// surrender is how a holder gives its row up (Candidate.releaseHold), one of:
//   - a release (over false): with unserved zero the row is marked
//     released (the next candidate takes it at once); otherwise it is left
//     to expire unserved from now by the database clock, so that the lock
//     delay this hold had not yet served is served by whoever takes it next;
//   - a hand-over (over true), for a planned change of leader once the
//     holder stood down: the row is marked released and reserved for
//     candidate to (for anyone when to is empty) until window has passed
//     by the database clock, and the followers are woken.
type surrender struct {
	over     bool
	to       string
	unserved time.Duration
	window   time.Duration
}

// stmt returns the statement that gives the row up as g says, and its
// parameters from p (the holder's); adopt is the adopted lease in
// milliseconds during an adoption period (see adoptedMillis), which a
// hand-off never undercuts: a recipe node that takes the row over keeps its
// lease_ms.
func (g surrender) stmt(p stmt.Params, adopt int64) (rowWrite, stmt.Params) {
	switch {
	case g.over:
		p.To, p.Lease = g.to, ceilMillis(g.window)
		return writeHandOver, p
	case g.unserved > 0:
		p.Lease = max(ceilMillis(g.unserved), adopt)
		return writeHandOff, p
	}
	return writeRelease, p
}

// phase is where a candidate is in its campaign. The model
// (model/sqlelect.pml) spells it with hold[i], leading[i] and so[i].
type phase uint8

const (
	// following: holds nothing; looks at the election every retry
	// interval and takes it when it may (model: hold[i] = 0, followTick).
	following phase = iota
	// sittingOut: holds nothing and does not campaign before
	// st.sitOutUntil, after it gave a hold up, so that another candidate
	// wins (model: hold[i] = 0, CLK(i) < so[i]).
	sittingOut
	// holding: holds term st.hold, until st.holdDeadline without a
	// renewal, and waits out its lock delay until st.leadAt before it
	// leads (model: hold[i] != 0, !leading[i]).
	holding
	// leading: holds the row and leads: IsLeader is true until leadUntil,
	// OnElected runs with st.lead's context (model: leading[i]).
	leading
)

func (p phase) String() string {
	if p <= leading {
		return [...]string{"following", "sitting out", "holding", "leading"}[p]
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// transitions is the candidate's state machine: the phases each phase may
// move to. enter refuses any other move. Every move is made by one function
// (acquired, below enter; the others in lead.go), named as the model's
// inlines that make it (model/sqlelect.pml, "the candidate"), for the
// reasons doc.go gives
// ("Safety", "Health", "Planned changes of leader"):
//
//	following  → holding     acquired: the heartbeat took, inserted or claimed
//	                         the row (followTick), or the term changed under a
//	                         holder (holdTick, after standDown)
//	holding    → leading     maybeLead: the lock delay is over (at once when
//	                         there is none) and the hold is live
//	leading    → holding     demote: the leadership ends, first step of every
//	                         stand-down; or it ran out by the clock while a
//	                         renewal was in flight (maybeLead leads anew)
//	holding    → following   standDown: the lease is lost, deposed, an error,
//	                         Run's end (releasing the row or not); handOver
//	following  → sittingOut  sitOut: after a Resign, a failed health check, a
//	                         hand-over, a deleted row
//	sittingOut → sittingOut  sitOut: Resign again
//	sittingOut → following   tick: the sit-out is over
var transitions = [...][]phase{
	following:  {holding, sittingOut},
	sittingOut: {following, sittingOut},
	holding:    {leading, following},
	leading:    {holding},
}

// campaign is the state of a candidate's campaign: its phase, the data of
// the phases that have any, and what outlives a phase. The Run goroutine
// owns it (see candidate).
type campaign struct {
	phase phase
	// holding and leading (model: hold[i], hd[i]): the term held (0 in
	// the other phases), and when to stand down without a renewal, by the
	// local clock.
	hold         uint64
	holdDeadline time.Time
	// leading: the leadership under way (model: lterm[i], cancelled[i];
	// lu[i] is candidate.leadUntil).
	lead leadership

	// Every phase. leadAt (model: la[i]) is when the current hold may
	// lead (the end of its lock delay). It outlives the hold: a later hold
	// of this candidate never leads before it, and a hold given up before
	// it hands the rest on (see releaseHold). sitOutUntil (model: so[i])
	// ends sittingOut.
	leadAt      time.Time
	sitOutUntil time.Time
	seen        Record // last observed holder (ID empty when none)
	woken       bool   // the wait before this step ended at the handover hint
	askedTerm   uint64 // the term prefer last asked to hand over (never asked twice)
}

// holds reports whether the campaign holds the row (holding or leading).
func (s *campaign) holds() bool { return s.phase == holding || s.phase == leading }

// tick runs one step of the campaign in its phase and returns how long to
// wait before the next. Run's loop is thus client-go's "acquire, then
// renew", one step at a time so that Resign, Transfer and a failed health
// check are served between any two: a follower looks at the election and
// takes it when it may (followTick), a holder renews (holdTick) until it
// stands down; a candidate that sits out waits.
func (c *Candidate) tick(ctx context.Context) (time.Duration, error) {
	c.step()
	now, woken := c.cfg.Clock.Now(), c.st.woken
	c.st.woken = false
	switch c.st.phase {
	case sittingOut:
		if now.Before(c.st.sitOutUntil) {
			return c.st.sitOutUntil.Sub(now), nil
		}
		c.enter(following)
		fallthrough
	case following:
		if !c.healthy() {
			// Not campaigning; woken when the check passes again.
			return getlock.Jitter(c.cfg.RetryInterval, c.cfg.JitterFactor), nil
		}
		return c.followTick(ctx, woken)
	default: // holding, leading
		return c.holdTick(ctx, now)
	}
}

// followTick is a follower's step (model: followTick): it looks at the
// election and sends the heartbeat when the row may be taken, or sends it
// first when woken (see backend.follow); a hold that began with it is
// acquired.
func (c *Candidate) followTick(ctx context.Context, woken bool) (time.Duration, error) {
	qctx, cancel := context.WithTimeout(ctx, c.cfg.QueryTimeout)
	send := c.cfg.Clock.Now()
	seen, b, wait, err := c.b.follow(qctx, woken)
	cancel()
	c.cfg.Metrics.Heartbeat(c.cfg.Name, c.cfg.Clock.Now().Sub(send), err)
	if ctx.Err() == nil {
		c.reached(err)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Debug("follow failed", "err", err)
		}
		return getlock.Jitter(c.cfg.RetryInterval, c.cfg.JitterFactor), err
	}
	if b.held {
		c.acquired(send, b)
		c.maybeLead(ctx)
		return c.holdWait(), nil
	}
	c.observe(seen)
	return c.prefer(ctx, seen, wait), nil
}

// holdTick is a holder's step (model: holdTick): it stands down when its
// health check failed, or when its deadline passed without a renewal (the
// lease is lost); otherwise it renews and acts on the outcome (see
// renewed).
func (c *Candidate) holdTick(ctx context.Context, now time.Time) (time.Duration, error) {
	if c.unhealthy.Load() && now.Before(c.st.holdDeadline) {
		c.log.Warn("health check failed: standing down", "term", c.st.hold)
		c.standDown(ctx, ReasonUnhealthy, &surrender{})
		return c.sitOut(0), nil
	}
	if !now.Before(c.st.holdDeadline) {
		c.log.Warn("lease lost: no renewal succeeded in time", "term", c.st.hold, "renew_deadline", c.cfg.RenewDeadline)
		c.cfg.Metrics.LeaseLost(c.cfg.Name)
		c.standDown(ctx, ReasonLeaseLost, nil)
		return 0, nil
	}
	// A renewal in flight is let finish (within its timeout) when Run's
	// context ends: cancelling it midway can cost the lock backend its
	// connection, and with it the lock, before the release that follows
	// has marked the row released; a follower would then find a live row
	// and wait out its lease instead of taking over at once.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(c.cfg.QueryTimeout, c.st.holdDeadline.Sub(now)))
	b, err := c.b.renew(qctx, c.st.hold)
	cancel()
	c.cfg.Metrics.Heartbeat(c.cfg.Name, c.cfg.Clock.Now().Sub(now), err)
	if ctx.Err() == nil {
		c.reached(err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		c.log.Debug("renewal failed", "term", c.st.hold, "err", err)
		// Retry soon, but wake at the deadline at the latest.
		return min(c.cfg.RenewInterval/2, c.st.holdDeadline.Sub(c.cfg.Clock.Now())), err
	}
	return c.renewed(ctx, now, b), nil
}

// renewed acts on the outcome of the renewal sent at send (model:
// processHB's holdTick branch; model/README.md's decision table gives the
// outcomes) and returns the wait before the next step.
func (c *Candidate) renewed(ctx context.Context, send time.Time, b beat) time.Duration {
	switch {
	case b.requested:
		c.log.Info("transfer requested", "term", c.st.hold, "to", b.to)
		_ = c.handOver(ctx, b.to)
		return max(c.st.sitOutUntil.Sub(c.cfg.Clock.Now()), 0)
	case b.held && b.term == c.st.hold:
		c.st.holdDeadline = send.Add(c.cfg.RenewDeadline)
		c.lastRenew.Store(&send)
		if c.st.phase == leading && !c.extendLead(c.st.holdDeadline) {
			// The leadership ran out by the clock while this renewal
			// was in flight: it is over, and its context cancelled.
			// The hold goes on (nobody else held the row meanwhile),
			// so a new leadership of the same term begins at once.
			c.log.Warn("lease ran out while a renewal was in flight; leading anew", "term", c.st.hold)
			c.cfg.Metrics.LeaseLost(c.cfg.Name)
			c.demote(ReasonLeaseLost)
		}
		c.maybeLead(ctx)
		return c.holdWait()
	case b.held && b.inserted:
		// The row was deleted (an operator's force re-election): let go
		// of the row this renewal recreated, and let another candidate win.
		c.log.Info("row deleted: standing down for a re-election", "term", c.st.hold)
		deadline := c.st.holdDeadline
		c.standDown(ctx, ReasonDeposed, nil)
		_ = c.releaseHold(ctx, b.term, deadline, surrender{})
		return c.sitOut(0)
	case b.held:
		// The term changed under us (the row was replaced naming us, or
		// released): a new hold, with its lock delay.
		c.log.Info("term changed while holding", "old_term", c.st.hold, "term", b.term)
		c.standDown(ctx, ReasonDeposed, nil)
		c.acquired(send, b)
		c.maybeLead(ctx)
		return c.holdWait()
	default:
		c.log.Info("deposed", "term", c.st.hold)
		c.standDown(ctx, ReasonDeposed, nil)
		return 0
	}
}

// holdWait is the wait before the next renewal: the renew interval, or less
// when the lock delay ends sooner.
func (c *Candidate) holdWait() time.Duration {
	now := c.cfg.Clock.Now()
	w := c.cfg.RenewInterval
	if c.st.phase != leading && c.st.leadAt.After(now) {
		w = min(w, c.st.leadAt.Sub(now))
	}
	return min(w, c.st.holdDeadline.Sub(now))
}

// The transitions. enter is the only writer of st.phase; its only callers
// are acquired below, tick (which ends a sit-out), and lead.go's maybeLead,
// demote, standDown, sitOut and handOver: one per move of the transitions
// table.

// enter moves the campaign to phase p. A move the transitions table does
// not list is a bug of this file: enter panics rather than go on from a
// state nobody checked.
func (c *Candidate) enter(p phase) {
	if !slices.Contains(transitions[c.st.phase], p) {
		panic(fmt.Sprintf("election: candidate %q: no transition from %v to %v", c.cfg.ID, c.st.phase, p))
	}
	c.st.phase = p
}

// acquired records a hold that began with the statement sent at send
// (following → holding, model: acquired); the caller then leads at once
// when there is no lock delay to wait out (maybeLead).
func (c *Candidate) acquired(send time.Time, b beat) {
	now := c.cfg.Clock.Now()
	c.enter(holding)
	c.st.hold = b.term
	c.st.holdDeadline = send.Add(c.cfg.RenewDeadline)
	// A delay an earlier hold of this candidate had not served still
	// applies: whoever it waited for may still lead.
	c.st.leadAt = later(c.st.leadAt, now)
	if b.delay > 0 && !c.cfg.DisableLockDelay {
		// A predecessor may not know it was deposed: let it stand down.
		c.st.leadAt = later(c.st.leadAt, now.Add(b.delay))
	}
	if c.st.leadAt.After(now) {
		c.log.Info("holding; waiting out the lock delay", "term", b.term, "lock_delay", c.st.leadAt.Sub(now))
	}
	c.lastRenew.Store(&send)
	c.observe(Record{Election: c.cfg.Name, ID: c.cfg.ID, Term: b.term, Value: c.b.base().value,
		Lease: c.cfg.LeaseDuration, LeaseLeft: c.cfg.LeaseDuration, Priority: c.cfg.Preference.Priority})
}

// observe calls OnLeaderChanged when the live holder, term or value
// changed.
func (c *Candidate) observe(r Record) {
	if !r.Live() {
		r = Record{Election: c.cfg.Name}
	}
	if r.ID == c.st.seen.ID && r.Term == c.st.seen.Term && r.Value == c.st.seen.Value {
		return
	}
	c.st.seen = r
	if f := c.cfg.Callbacks.OnLeaderChanged; f != nil {
		f(r)
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
