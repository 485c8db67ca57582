package election

import "time"

// Metrics receives what a candidate's campaign reports, as client-go's
// leaderelection.MetricsProvider does: set one as Config.Metrics. Package
// electionprom implements it for Prometheus (the sqlelect_* series that
// monitoring/ alerts on); this package imports no metrics library. The
// methods are called from the candidate's goroutines, so they must be
// safe for concurrent use and must not block. Several elections may share
// one Metrics; election is the election's name (Config.Name).
type Metrics interface {
	// Start is called when a candidate's Run begins, with the candidate's
	// Config (defaults applied); the stop it returns is called when Run
	// returns. Until then progress reads the candidate's local state, for
	// gauges read on demand: it is cheap and safe from any goroutine.
	Start(cfg Config, progress func() Progress) (stop func())
	// Elected reports that the candidate began to lead with term.
	Elected(election string, term uint64)
	// Demoted reports that a leadership ended, and why.
	Demoted(election string, reason Reason)
	// Heartbeat reports one statement of the campaign (a renewal, a
	// follower's look, a request for leadership by priority) that took d,
	// or an error of another step with d zero (a failed preflight,
	// release, hand-over or handover hint); err is nil when it succeeded.
	// ErrorKind gives err a low-cardinality label.
	Heartbeat(election string, d time.Duration, err error)
	// LeaseLost reports that a leader's renewal came back too late, after
	// its renew deadline: it succeeded, but the leadership had already
	// ended by the local clock.
	LeaseLost(election string)
	// HealthCheck reports one result of Config.Health.Check: err is nil
	// when it passed; timedOut when it did not answer within
	// Health.Timeout (err is then not nil).
	HealthCheck(election string, err error, timedOut bool)
	// HandoverSkipped reports that the table backend skipped its fast
	// handover hint, or a leader its transfer bell, the pool having no
	// connection to spare (see Config.Tuning.DisableFastHandover).
	HandoverSkipped(election string)
	// PreferenceRequested reports that this follower asked a leader of
	// lower Config.Preference.Priority to hand over to it.
	PreferenceRequested(election string)
}

// Progress is a candidate's local state at one instant, as Metrics.Start's
// progress and Candidate.Progress read it, and package electionhttp serves.
type Progress struct {
	// Now is the reading of Config.Tuning.Clock the other fields refer to.
	Now time.Time
	// Leading says whether the candidate leads (IsLeader); Term is its
	// term then, and LeaseLeft the time before it must stand down without
	// a renewal, by the local monotonic clock. Both are zero otherwise.
	Leading   bool
	Term      uint64
	LeaseLeft time.Duration
	// LastRenewal is when the last successful renewal or acquisition was
	// sent; zero before the first.
	LastRenewal time.Time
	// LastStep is when the campaign loop last began a step (a heartbeat,
	// a stand-down).
	LastStep time.Time
	// Running is true while Run runs.
	Running bool
	// Overdue is how long the campaign loop is past its last sign of
	// progress (the start of its last step, or the end of the wait it is
	// in, whichever is later); negative while it waits.
	Overdue time.Duration
	// RenewDeadline is Config.Tuning.RenewDeadline, defaults applied.
	RenewDeadline time.Duration
	// Wedged is true while Run runs but its campaign loop has made no
	// progress for more than RenewDeadline past when it was due (Overdue
	// over RenewDeadline): a step or a callback holds it up.
	Wedged bool
	// Unreachable is for how long the database has not answered the
	// campaign's statements (a connection error or a timeout, since the
	// last statement it answered); 0 while it answers.
	Unreachable time.Duration
	// HealthCheck says whether Config.Health.Check is set.
	HealthCheck bool
	// Healthy is false while the latest result of Config.Health.Check is a
	// failure; true without a HealthCheck and before its first result.
	Healthy bool
}

// nopMetrics records nothing: what a nil Config.Metrics means.
type nopMetrics struct{}

func (nopMetrics) Start(Config, func() Progress) func()   { return func() {} }
func (nopMetrics) Elected(string, uint64)                 {}
func (nopMetrics) Demoted(string, Reason)                 {}
func (nopMetrics) Heartbeat(string, time.Duration, error) {}
func (nopMetrics) LeaseLost(string)                       {}
func (nopMetrics) HealthCheck(string, error, bool)        {}
func (nopMetrics) HandoverSkipped(string)                 {}
func (nopMetrics) PreferenceRequested(string)             {}

// Progress reads c's local state, cheaply, without the database: what
// Metrics.Start's progress reads, and package electionhttp serves. Safe for
// concurrent use.
//
// Overdue is past the start of the last step or the end of the wait the
// loop is in, whichever is later (see step and due). Wedged means that a
// step (a statement is bounded by QueryTimeout; the health check runs
// beside the loop) or a callback (OnLeaderChanged, OnDemoted, or OnElected
// not returning after its context was cancelled) holds the loop up.
func (c *Candidate) Progress() Progress {
	now := c.cfg.Clock.Now()
	last := c.lastStep.Load()
	p := Progress{
		Now:           now,
		LastStep:      c.epoch.Add(time.Duration(last)),
		Running:       c.runDone.Load() != nil,
		Overdue:       time.Duration(c.elapsed() - max(last, c.nextDue.Load())),
		RenewDeadline: c.cfg.RenewDeadline,
		Unreachable:   c.unreachableFor(),
		HealthCheck:   c.cfg.Health.Check != nil,
		Healthy:       !c.unhealthy.Load(),
	}
	p.Wedged = p.Running && p.Overdue > p.RenewDeadline
	if d := c.leadUntil.Load(); d != 0 && now.Before(c.epoch.Add(time.Duration(d))) {
		p.Leading, p.Term, p.LeaseLeft = true, c.term.Load(), c.epoch.Add(time.Duration(d)).Sub(now)
	}
	if r := c.lastRenew.Load(); r != nil {
		p.LastRenewal = *r
	}
	return p
}

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
