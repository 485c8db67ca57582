package election

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// The candidate, by job: this file holds the type, its public methods and
// Run's loop; campaign.go the phases, the single transition point (enter)
// and the steps of each phase (tick); lead.go the leadership and every way
// a hold ends; health.go the health-check goroutine; metrics.go what
// Progress reads (for Metrics and package electionhttp).

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
//     start of Run to its end; between Runs nobody touches them. Resign,
//     Transfer and Proclaim run on it (opCh, see do), between two steps. OnLeaderChanged and OnDemoted are called on it: the loop
//     waits for them.
//   - Any goroutine reads leadUntil and term (IsLeader, Term), lastRenew,
//     lastStep and nextDue (Progress, for Metrics and electionhttp), atomically;
//     only the Run goroutine writes them, except that the watchdog clears
//     leadUntil.
//   - A leadership's two goroutines, started by maybeLead and joined by
//     demote (st.lead.run), live from the start of leading to its end:
//     OnElected, with the leadership's context; the watchdog, which clears
//     leadUntil (compare-and-swap, so that extendLead never revives a
//     leadership it ended) and cancels that context when the deadline
//     passes, even while the Run goroutine is blocked.
//   - The health goroutine (startHealth, joined when Run returns) runs
//     Config.Health.Check and writes checked, unhealthy and lastFailure, and
//     pokes healthCh; the Run goroutine acts on them between steps.
//   - The await goroutine (startAwait, joined before the next step) calls
//     wake.Await while the Run goroutine only waits.
//   - The bell goroutine (bell.Start by maybeLead, joined by demote;
//     standDown frees what it left on the server) keeps the leader's
//     bell (getlock.Bell) from the start of leading to its end, and pokes
//     rang when a request rings it; waitNext then ends, and the next step
//     renews.
type Candidate struct {
	cfg settings
	b   backend // its base's db is the caller's, for Leader and Fenced
	// wake lets a follower learn early that the holder let go (the table
	// backend's handover lock); nil without (the lock backend, or
	// Config.Tuning.DisableFastHandover).
	wake *wakeup
	// bell lets a leader's wait end early when a planned change of leader
	// is requested (getlock.Bell, rung by Operator.Transfer and StepDown,
	// the CLI and prefer): rang is sent on then. nil with a Batcher or
	// Config.Tuning.DisableFastHandover.
	bell  *getlock.Bell
	rang  chan struct{}
	fence fenceMode
	// bound limits the server-side lock waits of Fenced's statements: the
	// backend's preflight sets it, once it knows the server (none before).
	bound atomic.Pointer[stmt.Bound]
	log   *slog.Logger

	// Read by IsLeader and Term from any goroutine.
	epoch     time.Time                 // the clock's reading at construction
	leadUntil atomic.Int64              // while leading: lead until epoch + leadUntil ns; 0 when not leading
	term      atomic.Uint64             // term while leading, else 0
	lastRenew atomic.Pointer[time.Time] // send time of the last successful renewal
	// The campaign loop's progress, for Progress (Metrics, electionhttp): when
	// its last step began and when its current wait ends, as elapsed ns
	// (see elapsed); and whether the last HealthCheck failed.
	lastStep  atomic.Int64
	nextDue   atomic.Int64
	unhealthy atomic.Bool
	// downSince is when the database stopped answering the campaign's
	// statements, as elapsed ns plus one; 0 while it answers (see reached).
	downSince atomic.Int64

	// The latest result of Config.Health.Check, written by the health
	// goroutine (see startHealth) and read by the campaign loop: unhealthy
	// above says it failed; checked that there is one; lastFailure when
	// the latest failure was recorded, or Run began, as elapsed ns plus one
	// (0: no HealthCheck).
	// healthCh is poked (capacity 1) when the result changes.
	checked     atomic.Bool
	lastFailure atomic.Int64
	healthCh    chan struct{}

	opCh chan func(ctx context.Context) // Resign, Transfer and Proclaim (see do), run on the Run goroutine with its context
	// runDone is the current Run's channel, closed when it returns, so
	// that a request sent as Run ends does not wait for a Run goroutine
	// that is gone; nil while Run is not running.
	runDone atomic.Pointer[chan struct{}]

	st campaign // owned by the Run goroutine
}

func newCandidate(cfg settings, b backend) *Candidate {
	c := &Candidate{
		cfg:      cfg,
		b:        b,
		log:      cfg.Logger.With("election", cfg.Name, "id", cfg.ID),
		opCh:     make(chan func(context.Context)),
		healthCh: make(chan struct{}, 1),
		rang:     make(chan struct{}, 1),
		epoch:    cfg.Clock.Now(),
	}
	c.bound.Store(&stmt.Bound{})
	if db := b.base().db; db != nil && !cfg.DisableFastHandover && cfg.Batcher == nil {
		c.bell = &getlock.Bell{Hint: getlock.Hint{DB: db, Log: c.log, Election: cfg.Name, Metrics: cfg.Metrics, Timeout: cfg.QueryTimeout},
			Table: cfg.Table, Every: cfg.RenewInterval, Sleep: c.sleep}
	}
	return c
}

func (c *Candidate) Name() string { return c.cfg.Name }
func (c *Candidate) ID() string   { return c.cfg.ID }

// IsLeader implements Election.
func (c *Candidate) IsLeader() bool {
	d := c.leadUntil.Load()
	return d != 0 && c.elapsed() < d
}

// elapsed is the time since epoch on the candidate's clock, in ns. With the
// real clock it reads only the monotonic clock (realClock.Since), the
// cheapest read there is: IsLeader is called on hot paths.
func (c *Candidate) elapsed() int64 {
	if rc, ok := c.cfg.Clock.(realClock); ok {
		return int64(rc.Since(c.epoch))
	}
	return int64(c.cfg.Clock.Now().Sub(c.epoch))
}

// setDeadline sets when leadership ends (see demote for its end).
func (c *Candidate) setDeadline(t time.Time) { c.leadUntil.Store(max(int64(t.Sub(c.epoch)), 1)) }

// Term implements Election.
func (c *Candidate) Term() uint64 {
	if !c.IsLeader() {
		return 0
	}
	return c.term.Load()
}

// Leader implements Election.
func (c *Candidate) Leader(ctx context.Context) (Record, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.QueryTimeout)
	defer cancel()
	return ReadRecord(ctx, c.b.base().db, c.cfg.Table, c.cfg.Name)
}

// Resign implements Election: on the Run goroutine, it stands the
// candidate down, releasing the row, and sits out.
func (c *Candidate) Resign(ctx context.Context) error {
	return c.do(ctx, "", func(ctx context.Context) error {
		c.step()
		c.standDown(ctx, ReasonResigned, &surrender{})
		c.sitOut(0)
		return nil
	})
}

// Run implements Election.
func (c *Candidate) Run(ctx context.Context) error {
	c.step()
	done := make(chan struct{})
	if !c.runDone.CompareAndSwap(nil, &done) {
		return ErrAlreadyRunning
	}
	defer func() { close(done); c.runDone.Store(nil) }()
	defer c.b.close()
	defer c.cfg.Metrics.Start(c.cfg.config(), c.Progress)() // stops it

	if err := c.preflight(ctx); err != nil || ctx.Err() != nil {
		return migrateHint(err, c.cfg.Table)
	}
	c.log.Debug("campaign started")
	defer c.startHealth(ctx)() // stops it
	// The campaign: follow until holding, then renew until standing down
	// (one step of the phase per tick), and between two steps wait,
	// serving Resign, Transfer, Proclaim and the health check's results.
	for {
		wait, err := c.tick(ctx)
		if err != nil && probe.Permanent(err) {
			err = migrateHint(err, c.cfg.Table)
			c.log.Error("campaign stopped", "err", err)
			c.standDown(ctx, ReasonError, nil)
			return err
		}
		if ctx.Err() != nil || !c.waitNext(ctx, wait) {
			c.standDown(ctx, ReasonResigned, &surrender{})
			return nil
		}
	}
}

// preflight checks once what retrying cannot fix (returned: Run ends) and
// retries what it can (the database may simply not be up yet) every
// RetryInterval until it passes or ctx ends (nil). An attempt is bounded
// by QueryTimeout, doubled after each one that ran out of time, up to 4
// times it: on a slow server (a loaded one, or one far away) the
// preflight's statements together may take longer than one statement
// may, and it would otherwise never pass. The cost: a statement that
// never returns (a partition) holds an attempt up to that bound.
func (c *Candidate) preflight(ctx context.Context) error {
	limit := c.cfg.QueryTimeout
	for {
		c.step()
		pctx, cancel := context.WithTimeout(ctx, limit)
		bound, err := c.b.preflight(pctx)
		err = Classify(err) // the lock backend's first query does not classify
		if errors.Is(pctx.Err(), context.DeadlineExceeded) {
			limit = min(2*limit, 4*c.cfg.QueryTimeout)
		}
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			c.bound.Store(&bound)
			c.reached(nil)
			return nil
		}
		if probe.Permanent(err) {
			return err
		}
		if c.reached(err) {
			c.log.Warn("preflight failed; retrying", "err", err)
		}
		c.cfg.Metrics.Heartbeat(c.cfg.Name, 0, err)
		wait := getlock.Jitter(c.cfg.RetryInterval, c.cfg.JitterFactor)
		c.due(wait)
		if !c.sleep(ctx, wait) {
			return nil
		}
	}
}

// sleep waits d on the candidate's clock and reports whether it did: false
// when ctx ended first (or had ended).
func (c *Candidate) sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
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
		case run := <-c.opCh:
			stopAwait()
			run(ctx)
		case <-c.healthCh:
			if !c.healthMatters() {
				continue // the next step would do what it does anyway
			}
		case <-woke:
			c.st.woken = true
		case <-c.rang: // a planned change was requested: renew now
		case <-t.C(): // the server's timeout ends the wait about now
		}
		return true
	}
}

// startAwait lets a following candidate's wait of d end early when the
// holder lets go: the returned channel is closed then. stop cancels the wait
// and returns once its goroutine has exited; it must always be called.
func (c *Candidate) startAwait(ctx context.Context, d time.Duration) (woke <-chan struct{}, stop func()) {
	w := c.wake
	if w == nil || c.st.holds() || d < getlock.MinAwait || c.cfg.Clock.Now().Before(c.st.sitOutUntil) {
		return nil, func() {}
	}
	actx, cancel := context.WithCancel(ctx) // Await bounds it by d and the query timeout
	wch, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		if w.Await(actx, d) {
			close(wch)
		}
	}()
	return wch, func() {
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
