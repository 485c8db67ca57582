package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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
	// preflight checks once, before campaigning, what retrying cannot fix.
	preflight(ctx context.Context) error
	// follow looks at the election as a non-holder, tries to acquire it
	// when it may, and says how long to wait before the next look.
	follow(ctx context.Context) (seen Record, b beat, wait time.Duration, err error)
	// renew renews the hold of term hold.
	renew(ctx context.Context, hold uint64) (beat, error)
	// release gives term hold up so that others may take over. With
	// unserved zero the row is marked released (the next candidate takes it
	// at once); otherwise the row is left to expire unserved from now by the
	// database clock, so that the lock delay this hold had not yet served
	// is served by whoever takes it next.
	release(ctx context.Context, hold uint64, unserved time.Duration) error
	// handOver gives term hold up for a planned change of leader: the row
	// is marked released and reserved for candidate to (for anyone when to
	// is empty) until window has passed by the database clock, and the
	// followers are woken. Called only after the holder stood down.
	handOver(ctx context.Context, hold uint64, to string, window time.Duration) error
	// setValue sets the value the candidate publishes from now on (in
	// takes and renewals).
	setValue(v string)
	// proclaim writes the value into the row held with term hold: false
	// when the row no longer says so.
	proclaim(ctx context.Context, hold uint64) (bool, error)
	// prefer asks the leader of seen to hand over to this candidate, by
	// its priority (see preferSQL): false when the row no longer allows.
	prefer(ctx context.Context, seen Record) (bool, error)
	// leader reads the election's record.
	leader(ctx context.Context) (Record, error)
	// close frees what the backend holds (the lock connection); called when
	// Run returns.
	close()
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
	switch p {
	case following:
		return "following"
	case sittingOut:
		return "sitting out"
	case holding:
		return "holding"
	case leading:
		return "leading"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// transitions is the candidate's state machine: the phases each phase may
// move to. enter refuses any other move. Every move is made by one of the
// functions below enter, named as the model's inlines that make it
// (model/sqlelect.pml, "the candidate"), for the reasons doc.go gives
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
	askedTerm   uint64 // the term prefer last asked to hand over (never asked twice)
	value       string // the value published: cfg.Value, or what Proclaim set
}

// holds reports whether the campaign holds the row (holding or leading).
func (s *campaign) holds() bool { return s.phase == holding || s.phase == leading }

// leadership is the data of the leading phase.
type leadership struct {
	end    time.Time          // its deadline as last set (OnDemoted's Until)
	cancel context.CancelFunc // cancels the context OnElected and the watchdog run with
	done   chan struct{}      // closed when OnElected and the watchdog returned
}

// Candidate is a candidate in one election, of either backend: NewTable
// and NewLock return one. Its methods are those of Election, documented
// there; depend on Election (or on a narrower interface of your own) where
// a fake must stand in for it. Methods may be added to Candidate; fakes of
// Election are not broken by that.
//
// Inside, it is the campaign logic shared by the backends: the state
// machine (st), the timing, and the callbacks.
//
// Who owns what, and for how long:
//   - The Run goroutine owns st, and the backend's campaign (every backend
//     method but leader, which Leader calls from any goroutine), from the
//     start of Run to its end; between Runs nobody touches them. Transfer
//     and Proclaim run on it (opCh, see do), and Resign (resignCh), between
//     two steps. OnLeaderChanged and OnDemoted are called on it: the loop
//     waits for them.
//   - Any goroutine reads leadUntil and term (IsLeader, Term), lastRenew,
//     lastStep and nextDue (Metrics' progress, HealthzHandler), atomically;
//     only the Run goroutine writes them, except that the watchdog clears
//     leadUntil.
//   - A leadership's two goroutines, started by maybeLead and joined by
//     demote (st.lead.done), live from the start of leading to its end:
//     OnElected, with the leadership's context; the watchdog, which clears
//     leadUntil (compare-and-swap, so that extendLead never revives a
//     leadership it ended) and cancels that context when the deadline
//     passes, even while the Run goroutine is blocked.
//   - The health goroutine (startHealth, joined when Run returns) runs
//     Config.Health.Check and writes checked, unhealthy and lastFailure, and
//     pokes healthCh; the Run goroutine acts on them between steps.
//   - The await goroutine (startAwait, joined before the next step) calls
//     the backend's await while the Run goroutine only waits.
type Candidate struct {
	cfg     settings
	b       backend
	db      *sql.DB // the caller's, for Fenced
	fence   fenceMode
	log     *slog.Logger
	running atomic.Bool

	// Read by IsLeader and Term from any goroutine.
	epoch     time.Time                 // the clock's reading at construction
	leadUntil atomic.Int64              // while leading: lead until epoch + leadUntil ns; 0 when not leading
	term      atomic.Uint64             // term while leading, else 0
	lastRenew atomic.Pointer[time.Time] // send time of the last successful renewal
	// The campaign loop's progress, for Metrics and HealthzHandler: when
	// its last step began and when its current wait ends, as elapsed ns
	// (see elapsed); and whether the last HealthCheck failed.
	lastStep  atomic.Int64
	nextDue   atomic.Int64
	unhealthy atomic.Bool
	// downSince is when the database stopped answering the campaign's
	// statements, as elapsed ns plus one; 0 while it answers (see reached).
	downSince atomic.Int64

	// The latest result of Config.Health.Check, written by the health
	// goroutine (see watchHealth) and read by the campaign loop: unhealthy
	// above says it failed; checked that there is one; lastFailure when
	// the latest failure was recorded, or Run began, as elapsed ns plus one
	// (0: no HealthCheck).
	// healthCh is poked (capacity 1) when the result changes.
	checked     atomic.Bool
	lastFailure atomic.Int64
	healthCh    chan struct{}

	resignCh chan chan error
	opCh     chan op // Transfer and Proclaim, run on the Run goroutine
	// runDone is closed when the current Run returns, so that a request
	// sent as Run ends does not wait for a Run goroutine that is gone.
	runDone atomic.Pointer[chan struct{}]

	st campaign // owned by the Run goroutine
}

func newCandidate(cfg settings, b backend) *Candidate {
	return &Candidate{
		cfg:      cfg,
		b:        b,
		log:      cfg.Logger.With("election", cfg.Name, "id", cfg.ID),
		resignCh: make(chan chan error),
		opCh:     make(chan op),
		healthCh: make(chan struct{}, 1),
		epoch:    cfg.Clock.Now(),
		st:       campaign{value: cfg.Value},
	}
}

func (c *Candidate) Name() string { return c.cfg.Name }
func (c *Candidate) ID() string   { return c.cfg.ID }

// IsLeader implements Election.
func (c *Candidate) IsLeader() bool {
	d := c.leadUntil.Load()
	return d != 0 && c.elapsed() < d
}

// elapsed is the time since epoch on the candidate's clock, in ns. With the
// real clock it reads only the monotonic clock (RealClock.Since), the cheapest
// read there is: IsLeader is called on hot paths.
func (c *Candidate) elapsed() int64 {
	if rc, ok := c.cfg.Clock.(RealClock); ok {
		return int64(rc.Since(c.epoch))
	}
	return int64(c.cfg.Clock.Now().Sub(c.epoch))
}

// deadline returns the instant leadership ends, and whether leading.
func (c *Candidate) deadline() (time.Time, bool) {
	d := c.leadUntil.Load()
	return c.epoch.Add(time.Duration(d)), d != 0
}

// setDeadline sets when leadership ends; the zero time means not leading.
func (c *Candidate) setDeadline(t time.Time) {
	if t.IsZero() {
		c.leadUntil.Store(0)
		return
	}
	c.leadUntil.Store(max(int64(t.Sub(c.epoch)), 1))
}

// Term implements Election.
func (c *Candidate) Term() uint64 {
	if !c.IsLeader() {
		return 0
	}
	return c.term.Load()
}

// Leader implements Election.
func (c *Candidate) Leader(ctx context.Context) (Record, error) {
	ctx, cancel := c.queryContext(ctx, c.cfg.QueryTimeout)
	defer cancel()
	return c.b.leader(ctx)
}

// Resign implements Election.
func (c *Candidate) Resign(ctx context.Context) error {
	if !c.running.Load() {
		return ErrNotRunning
	}
	reply := make(chan error, 1)
	stopped := c.stopped()
	select {
	case c.resignCh <- reply:
	case <-stopped:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopped returns a channel closed when the current Run returns; nil (never
// ready) while the first Run is still starting.
func (c *Candidate) stopped() <-chan struct{} {
	if p := c.runDone.Load(); p != nil {
		return *p
	}
	return nil
}

// queryContext bounds one SQL call by d, on the local clock's terms: the
// deadline itself is real time (database/sql needs one).
func (c *Candidate) queryContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// Run implements Election.
func (c *Candidate) Run(ctx context.Context) error {
	c.step()
	if !c.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.running.Store(false)
	done := make(chan struct{})
	c.runDone.Store(&done)
	defer close(done)
	defer c.b.close()
	stopMetrics := c.metrics().Start(c.cfg.config(), c.progress)
	defer stopMetrics()

	if err := c.preflight(ctx); err != nil || ctx.Err() != nil {
		return migrateHint(err, c.cfg.Table)
	}
	c.log.Debug("campaign started")
	stopHealth := c.startHealth(ctx)
	defer stopHealth()
	// The campaign: follow until holding, then renew until standing down
	// (one step of the phase per tick), and between two steps wait,
	// serving Resign, Transfer, Proclaim and the health check's results.
	for {
		wait, err := c.tick(ctx)
		if err != nil && permanent(err) {
			err = migrateHint(err, c.cfg.Table)
			c.log.Error("campaign stopped", "err", err)
			c.standDown(ctx, ReasonError, false)
			return err
		}
		if ctx.Err() != nil || !c.waitNext(ctx, wait) {
			c.standDown(ctx, ReasonResigned, true)
			return nil
		}
	}
}

// preflight checks once what retrying cannot fix (returned: Run ends) and
// retries what it can (the database may simply not be up yet) every
// RetryInterval until it passes or ctx ends (nil).
func (c *Candidate) preflight(ctx context.Context) error {
	for {
		c.step()
		pctx, cancel := c.queryContext(ctx, c.cfg.QueryTimeout)
		err := Classify(c.b.preflight(pctx)) // the lock backend's first query does not classify
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			c.reached(nil)
			return nil
		}
		if permanent(err) {
			return err
		}
		if c.reached(err) {
			c.log.Warn("preflight failed; retrying", "err", err)
		}
		c.metrics().Heartbeat(c.cfg.Name, 0, err)
		wait := c.jitter(c.cfg.RetryInterval)
		c.due(wait)
		t := c.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
	}
}

// waitNext waits up to wait for the next tick, serving Resign, Transfer
// and Proclaim requests and the backend's early wake-up meanwhile. It
// returns false when ctx ended (Run then stands down).
func (c *Candidate) waitNext(ctx context.Context, wait time.Duration) bool {
	c.due(wait)
	t := c.cfg.Clock.NewTimer(max(wait, 0))
	defer t.Stop()
	woke, stopAwait := c.startAwait(ctx, wait)
	defer stopAwait()
	for {
		select {
		case <-ctx.Done():
			return false
		case reply := <-c.resignCh:
			stopAwait()
			c.step()
			c.standDown(ctx, ReasonResigned, true)
			c.sitOut(0)
			reply <- nil
		case o := <-c.opCh:
			stopAwait()
			o.reply <- o.run(ctx)
		case <-c.healthCh:
			if !c.healthMatters() {
				continue // the next step would do what it does anyway
			}
		case <-woke:
		case <-t.C(): // the server's timeout ends the wait about now
		}
		return true
	}
}

// healthMatters reports whether the latest health result calls for a step
// before the wait ends: a holder's check failed (it stands down now rather
// than at its next renewal), or a follower that sits nothing out may
// campaign again.
func (c *Candidate) healthMatters() bool {
	if c.st.holds() {
		return c.unhealthy.Load()
	}
	return c.healthy() && !c.cfg.Clock.Now().Before(c.st.sitOutUntil)
}

// waker is implemented by backends whose followers can learn early that
// the holder let go (the table backend's handover lock).
type waker interface {
	// await blocks for at most about d and reports whether the holder let
	// go meanwhile. It is called from a goroutine Run owns and joins, never
	// at the same time as another backend method.
	await(ctx context.Context, d time.Duration) bool
	// awaits reports whether await can wake at all (it is configured).
	awaits() bool
}

// startAwait lets a following candidate's wait of d end early when the
// holder lets go: the returned channel is closed then. stop cancels the wait
// and returns once its goroutine has exited; it must always be called.
func (c *Candidate) startAwait(ctx context.Context, d time.Duration) (woke <-chan struct{}, stop func()) {
	w, ok := c.b.(waker)
	if !ok || !w.awaits() || c.st.holds() || d < minAwait || c.cfg.Clock.Now().Before(c.st.sitOutUntil) {
		return nil, func() {}
	}
	actx, cancel := context.WithTimeout(ctx, d+c.cfg.QueryTimeout)
	wch, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		if w.await(actx, d) {
			close(wch)
		}
	}()
	return wch, func() {
		select {
		case <-done:
			cancel()
			return
		default:
		}
		// Cancelling costs the connection (the driver closes it), so
		// give a wait that is about to end by itself a moment first.
		g := c.cfg.Clock.NewTimer(awaitGrace)
		select {
		case <-done:
		case <-ctx.Done():
		case <-g.C():
		}
		g.Stop()
		cancel()
		<-done
	}
}

// awaitGrace is how long a wait that should end by itself is given to end.
const awaitGrace = 20 * time.Millisecond

// tick runs one step of the campaign in its phase and returns how long to
// wait before the next. Run's loop is thus client-go's "acquire, then
// renew", one step at a time so that Resign, Transfer and a failed health
// check are served between any two: a follower looks at the election and
// takes it when it may (followTick), a holder renews (holdTick) until it
// stands down; a candidate that sits out waits.
func (c *Candidate) tick(ctx context.Context) (time.Duration, error) {
	c.step()
	now := c.cfg.Clock.Now()
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
			return c.jitter(c.cfg.RetryInterval), nil
		}
		return c.followTick(ctx)
	default: // holding, leading
		return c.holdTick(ctx, now)
	}
}

// followTick is a follower's step (model: followTick): it looks at the
// election and sends the heartbeat when the row may be taken (see
// backend.follow); a hold that began with it is acquired.
func (c *Candidate) followTick(ctx context.Context) (time.Duration, error) {
	qctx, cancel := c.queryContext(ctx, c.cfg.QueryTimeout)
	send := c.cfg.Clock.Now()
	seen, b, wait, err := c.b.follow(qctx)
	cancel()
	c.metrics().Heartbeat(c.cfg.Name, c.cfg.Clock.Now().Sub(send), err)
	if ctx.Err() == nil {
		c.reached(err)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Debug("follow failed", "err", err)
		}
		return c.jitter(c.cfg.RetryInterval), err
	}
	if b.held {
		c.acquired(send, b)
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
		c.standDown(ctx, ReasonUnhealthy, true)
		c.sitOut(0)
		return c.st.sitOutUntil.Sub(c.cfg.Clock.Now()), nil
	}
	if !now.Before(c.st.holdDeadline) {
		c.log.Warn("lease lost: no renewal succeeded in time", "term", c.st.hold, "renew_deadline", c.cfg.RenewDeadline)
		c.metrics().LeaseLost(c.cfg.Name)
		c.standDown(ctx, ReasonLeaseLost, false)
		return 0, nil
	}
	// A renewal in flight is let finish (within its timeout) when Run's
	// context ends: cancelling it midway can cost the lock backend its
	// connection, and with it the lock, before the release that follows
	// has marked the row released; a follower would then find a live row
	// and wait out its lease instead of taking over at once.
	qctx, cancel := c.queryContext(context.WithoutCancel(ctx), min(c.cfg.QueryTimeout, c.st.holdDeadline.Sub(now)))
	b, err := c.b.renew(qctx, c.st.hold)
	cancel()
	c.metrics().Heartbeat(c.cfg.Name, c.cfg.Clock.Now().Sub(now), err)
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
		c.renewedAt(send)
		if c.st.phase == leading && !c.extendLead(c.st.holdDeadline) {
			// The leadership ran out by the clock while this renewal
			// was in flight: it is over, and its context cancelled.
			// The hold goes on (nobody else held the row meanwhile),
			// so a new leadership of the same term begins at once.
			c.log.Warn("lease ran out while a renewal was in flight; leading anew", "term", c.st.hold)
			c.metrics().LeaseLost(c.cfg.Name)
			c.demote(ReasonLeaseLost)
		}
		c.maybeLead()
		return c.holdWait()
	case b.held && b.inserted:
		// The row was deleted (an operator's force re-election): let go
		// of the row this renewal recreated, and let another candidate win.
		c.log.Info("row deleted: standing down for a re-election", "term", c.st.hold)
		deadline := c.st.holdDeadline
		c.standDown(ctx, ReasonDeposed, false)
		c.releaseHold(ctx, b.term, deadline)
		c.sitOut(0)
		return c.st.sitOutUntil.Sub(c.cfg.Clock.Now())
	case b.held:
		// The term changed under us (the row was replaced naming us, or
		// released): a new hold, with its lock delay.
		c.log.Info("term changed while holding", "old_term", c.st.hold, "term", b.term)
		c.standDown(ctx, ReasonDeposed, false)
		c.acquired(send, b)
		return c.holdWait()
	default:
		c.log.Info("deposed", "term", c.st.hold)
		c.standDown(ctx, ReasonDeposed, false)
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

// The transitions. enter is the only writer of st.phase; the functions
// after it are the only callers of enter, one per move of the transitions
// table (tick ends a sit-out).

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
// (following → holding, model: acquired), and leads at once when there is
// no lock delay to wait out (see maybeLead).
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
	c.renewedAt(send)
	c.observe(Record{Election: c.cfg.Name, ID: c.cfg.ID, Term: b.term, Value: c.st.value,
		Lease: c.cfg.LeaseDuration, LeaseLeft: c.cfg.LeaseDuration, Priority: c.cfg.Priority})
	c.maybeLead()
}

// maybeLead starts leading when holding, past the lock delay, before the
// deadline (holding → leading, model: maybeLead): IsLeader turns true
// until the deadline, and OnElected and the watchdog start.
func (c *Candidate) maybeLead() {
	now := c.cfg.Clock.Now()
	if c.st.phase != holding || now.Before(c.st.leadAt) || !now.Before(c.st.holdDeadline) {
		return
	}
	c.enter(leading)
	term := c.st.hold
	c.term.Store(term)
	c.setDeadline(c.st.holdDeadline)
	c.log.Info("elected", "term", term)
	c.metrics().Elected(c.cfg.Name, term)

	lctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.st.lead = leadership{end: c.st.holdDeadline, cancel: cancel, done: done}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // watchdog: cancel lctx when the lease runs out by the clock
		defer wg.Done()
		c.watchdog(lctx, cancel)
	}()
	go func() {
		defer wg.Done()
		if f := c.cfg.Callbacks.OnElected; f != nil {
			f(lctx, NewLeadership(term, func(ctx context.Context, fn func(*sql.Tx) error) error {
				return c.fencedFor(ctx, lctx.Done(), term, fn)
			}))
		}
	}()
	go func() { wg.Wait(); close(done) }()
}

// watchdog ends the leadership when its deadline passes without being
// extended: IsLeader turns false for good (the deadline is cleared, so a
// renewal that comes back later cannot revive it, see extendLead) and the
// leadership context is cancelled, so leader-only work stops on time even
// while the Run goroutine is blocked in a database call.
func (c *Candidate) watchdog(lctx context.Context, cancel context.CancelFunc) {
	for {
		d := c.leadUntil.Load()
		if d == 0 {
			cancel()
			return
		}
		left := time.Duration(d - c.elapsed())
		if left <= 0 {
			if c.leadUntil.CompareAndSwap(d, 0) {
				cancel()
				return
			}
			continue // extended meanwhile
		}
		t := c.cfg.Clock.NewTimer(left)
		select {
		case <-lctx.Done():
			t.Stop()
			return
		case <-t.C():
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
	c.setDeadline(time.Time{})
	c.term.Store(0)
	l.cancel()
	<-l.done
	c.log.Info("demoted", "term", c.st.hold, "reason", string(reason))
	c.metrics().Demoted(c.cfg.Name, reason)
	if f := c.cfg.Callbacks.OnDemoted; f != nil {
		f(Demotion{Term: c.st.hold, Reason: reason, Until: until.Round(0)})
	}
}

// standDown ends the hold, if any (holding → following, model: standDown,
// and standDownRelease with release): if leading, the leadership ends
// first (see demote); with release, the row is then given up (see
// releaseHold), else the backend is told the hold was lost (holdLoser).
func (c *Candidate) standDown(ctx context.Context, reason Reason, release bool) {
	if !c.st.holds() {
		return
	}
	c.demote(reason)
	if release {
		c.releaseHold(ctx, c.st.hold, c.st.holdDeadline)
	} else if l, ok := c.b.(holdLoser); ok {
		c.step()
		lctx, cancel := c.queryContext(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
		l.lost(lctx, c.st.hold)
		cancel()
	}
	c.st.hold = 0
	c.enter(following)
}

// sitOut keeps a candidate that just gave its hold up (or resigned) from
// campaigning for two retry intervals plus extra, counted from the end of
// any lock delay it handed on (see releaseHold), so that another candidate
// wins rather than this one claiming its own row back (following or
// sittingOut → sittingOut, model: sitOut).
func (c *Candidate) sitOut(extra time.Duration) {
	c.enter(sittingOut)
	c.st.sitOutUntil = later(c.cfg.Clock.Now(), c.st.leadAt).Add(2*c.cfg.RetryInterval + extra)
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
// An error of the hand-over statement is logged, counted and returned: the
// row then expires after its lease.
func (c *Candidate) handOver(ctx context.Context, to string) error {
	now := c.cfg.Clock.Now()
	if !c.st.holds() {
		return nil
	}
	if to == c.cfg.ID || now.Before(c.st.leadAt) {
		// Not a change of leader: a transfer to itself (cleared by the
		// next renewal, which the caller runs at once) or a holder still
		// waiting out its lock delay (which it hands on).
		if to != c.cfg.ID {
			c.standDown(ctx, ReasonTransferred, true)
			c.sitOut(0)
		}
		return nil
	}
	c.demote(ReasonTransferred)
	var err error
	if now = c.cfg.Clock.Now(); now.Before(c.st.holdDeadline) {
		c.step()
		rctx, cancel := c.queryContext(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
		err = c.b.handOver(rctx, c.st.hold, to, transferWindow(c.cfg.RetryInterval))
		cancel()
		if err != nil {
			c.log.Warn("hand-over failed; the lease will expire instead", "term", c.st.hold, "to", to, "err", err)
			c.metrics().Heartbeat(c.cfg.Name, 0, err)
			err = fmt.Errorf("election: handing over to %q: %w", to, err)
		}
	} else {
		c.dropHold(ctx, c.st.hold)
	}
	c.st.hold = 0
	c.enter(following)
	var extra time.Duration
	if to != "" {
		// Not back before the others had their turn after a target that
		// never came.
		extra = transferWindow(c.cfg.RetryInterval)
	}
	c.sitOut(extra)
	return err
}

// The backend's side of a stand-down.

// releaseHold gives up the row held with term until deadline, on a
// context that survives the caller's cancellation (Run's context has
// usually ended here); it changes no phase (model: releaseHold). A hold
// that never led (it was still waiting out its lock delay, st.leadAt)
// hands the rest of that delay on: the row then expires when the delay
// would have ended instead of being marked released, so that the
// predecessor the delay waits for has stood down before anyone leads. A
// release never hands over a delay that the releaser had not served.
func (c *Candidate) releaseHold(ctx context.Context, term uint64, deadline time.Time) {
	now := c.cfg.Clock.Now()
	if !now.Before(deadline) {
		// The lease is no longer ours to give; let go of the lock, if
		// any, since the caller will not campaign for a while.
		c.step()
		c.dropHold(ctx, term)
		return
	}
	unserved := max(c.st.leadAt.Sub(now), 0)
	c.step()
	rctx, cancel := c.queryContext(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
	defer cancel()
	if err := c.b.release(rctx, term, unserved); err != nil {
		c.log.Warn("release failed; the lease will expire instead", "term", term, "err", err)
		c.metrics().Heartbeat(c.cfg.Name, 0, err)
	}
}

// lockDropper is implemented by backends that may keep a lock after a hold
// ended without a release (the lock backend): dropLock lets it go, on a
// context of its own, when the candidate will not campaign for a while.
type lockDropper interface {
	dropLock(ctx context.Context)
}

// dropHold ends the hold of term that cannot be released (its deadline
// passed): the backend lets go of what it keeps (see holdLoser and
// lockDropper).
func (c *Candidate) dropHold(ctx context.Context, term uint64) {
	lctx, cancel := c.queryContext(context.WithoutCancel(ctx), c.cfg.QueryTimeout)
	defer cancel()
	if l, ok := c.b.(holdLoser); ok {
		l.lost(lctx, term)
	}
	if d, ok := c.b.(lockDropper); ok {
		d.dropLock(lctx)
	}
}

// holdLoser is implemented by backends that keep something while holding
// (the lock backend's lock): lost is called when a hold ends without a
// release (lease lost, deposed, error), on a context of its own.
type holdLoser interface {
	lost(ctx context.Context, hold uint64)
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

func (c *Candidate) jitter(d time.Duration) time.Duration { return jitter(d, c.cfg.JitterFactor) }

// jitter returns d times a random factor in [1, 1+factor).
func jitter(d time.Duration, factor float64) time.Duration {
	if factor <= 0 {
		return d
	}
	return d + time.Duration(rand.Float64()*factor*float64(d))
}

func (c *Candidate) metrics() Metrics { return c.cfg.Metrics }

func (c *Candidate) renewedAt(t time.Time) { c.lastRenew.Store(&t) }

// step records that the campaign loop begins a step now (a statement, a
// health check, a stand-down).
func (c *Candidate) step() { c.lastStep.Store(c.elapsed()) }

// reached records whether the database answered a statement of the
// campaign (err is nil or the server's error) or not (a connection error
// or a timeout: ErrorKind), and logs when that changes, once, rather than at
// every retry (each failure is counted by Metrics.Heartbeat). It returns
// whether the database answered.
func (c *Candidate) reached(err error) bool {
	kind := ErrorKind(err)
	answered := kind != "connection" && kind != "timeout"
	switch down := c.unreachableFor(); {
	case !answered && down == 0:
		c.downSince.Store(c.elapsed() + 1)
		c.log.Warn("database unreachable; retrying", "err", err, "retry_interval", c.cfg.RetryInterval)
	case answered && down > 0:
		c.downSince.Store(0)
		c.log.Info("database reachable again", "after", down)
	}
	return answered
}

// unreachableFor returns for how long the database has not answered the
// campaign's statements (see reached), 0 while it answers.
func (c *Candidate) unreachableFor() time.Duration {
	if since := c.downSince.Load(); since != 0 {
		return time.Duration(max(c.elapsed()-(since-1), 1))
	}
	return 0
}

// due records that the loop waits for d before its next step.
func (c *Candidate) due(d time.Duration) { c.nextDue.Store(c.elapsed() + int64(max(d, 0))) }

// overdue returns how long the campaign loop is past its last sign of
// progress: the start of its last step, or the end of the wait it is in,
// whichever is later. Negative while it waits.
func (c *Candidate) overdue() time.Duration {
	return time.Duration(c.elapsed() - max(c.lastStep.Load(), c.nextDue.Load()))
}

// wedged reports whether Run runs but its loop has made no progress for
// more than RenewDeadline past when it was due: a step (a statement is
// bounded by QueryTimeout; the health check runs beside the loop) or a
// callback (OnLeaderChanged, OnDemoted, or OnElected not returning after
// its context was cancelled) holds it up.
func (c *Candidate) wedged() bool {
	return c.running.Load() && c.overdue() > c.cfg.RenewDeadline
}

// healthy reports whether the latest result of Config.Health.Check lets
// the candidate campaign: true without a HealthCheck, false before its
// first result and while that result is a failure.
func (c *Candidate) healthy() bool {
	return c.cfg.Health.Check == nil || (c.checked.Load() && !c.unhealthy.Load())
}

// heldDown reports whether the check failed within Health.HoldDown, or
// Run began within it (a candidate with no record of passing is held down
// as after a failure): the candidate then does not ask for leadership by
// priority.
func (c *Candidate) heldDown() bool {
	f := c.lastFailure.Load()
	return f != 0 && c.elapsed()-(f-1) < int64(c.cfg.Health.HoldDown)
}

// startHealth starts the goroutine that runs Config.Health.Check beside the
// campaign loop (see watchHealth), if there is a check; the returned stop
// cancels it and returns once it has exited (once a run under way has
// returned).
func (c *Candidate) startHealth(ctx context.Context) (stop func()) {
	if c.cfg.Health.Check == nil {
		return func() {}
	}
	// No record yet: held down as after a failure (see heldDown), and no
	// campaign before this Run's first check passed.
	c.checked.Store(false)
	c.unhealthy.Store(false)
	c.lastFailure.Store(c.elapsed() + 1)
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.watchHealth(hctx)
	}()
	return func() { cancel(); <-done }
}

// watchHealth runs the check every Health.Interval, start to start
// (or as soon as the previous run returned, when that is later), until ctx
// ends, and records each result. The campaign loop never waits for it: it
// acts on the latest result.
func (c *Candidate) watchHealth(ctx context.Context) {
	for {
		start := c.cfg.Clock.Now()
		c.checkHealth(ctx, c.cfg.Health.Timeout)
		if ctx.Err() != nil {
			return
		}
		t := c.cfg.Clock.NewTimer(max(c.cfg.Health.Interval-c.cfg.Clock.Now().Sub(start), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// checkHealth runs the check once with a context cancelled after d by the
// candidate's clock (and by real time: a deadline for the check's own
// calls), and records the result. A run that has not returned after d
// failed: that is recorded at once, and the run is then waited for, so that
// runs never overlap. When ctx ends during the run, nothing is recorded.
func (c *Candidate) checkHealth(ctx context.Context, d time.Duration) {
	hctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	res := make(chan error, 1)
	go func() { res <- c.cfg.Health.Check(hctx) }()
	select {
	case err := <-res:
		switch {
		case ctx.Err() != nil:
		case hctx.Err() != nil:
			c.recordHealth(fmt.Errorf("election: health check did not answer within %v: %w", d, errors.Join(hctx.Err(), err)), true)
		case err != nil:
			c.recordHealth(fmt.Errorf("election: health check: %w", err), false)
		default:
			c.recordHealth(nil, false)
		}
	case <-t.C():
		cancel()
		c.recordHealth(fmt.Errorf("election: health check did not answer within %v: %w", d, context.DeadlineExceeded), true)
		<-res
	case <-ctx.Done():
		<-res
	}
}

// recordHealth makes err (nil: passed) the latest result of the check,
// counts a failure, and pokes the campaign loop when the result changed.
func (c *Candidate) recordHealth(err error, timedOut bool) {
	c.metrics().HealthCheck(c.cfg.Name, err, timedOut)
	if err != nil {
		c.lastFailure.Store(c.elapsed() + 1)
	}
	was, first := c.unhealthy.Swap(err != nil), !c.checked.Swap(true)
	switch {
	case err != nil && (!was || first):
		c.log.Warn("health check failing: not campaigning", "err", err)
	case err == nil && was:
		c.log.Info("health check passes again: campaigning")
	}
	if first || was != (err != nil) {
		select {
		case c.healthCh <- struct{}{}:
		default:
		}
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
