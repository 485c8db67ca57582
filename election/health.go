package election

import (
	"context"
	"errors"
	"fmt"
	"time"
)

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
// campaign loop, if there is a check: every Health.Interval, start to start
// (or as soon as the previous run returned, when that is later), recording
// each result. The campaign loop never waits for it: it acts on the latest
// result. The returned stop cancels it and returns once it has exited (once
// a run under way has returned).
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
		for {
			start := c.cfg.Clock.Now()
			c.checkHealth(hctx, c.cfg.Health.Timeout)
			if !c.sleep(hctx, max(c.cfg.Health.Interval-c.cfg.Clock.Now().Sub(start), 0)) {
				return
			}
		}
	}()
	return func() { cancel(); <-done }
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
		if ctx.Err() == nil {
			c.recordHealth(err, hctx.Err(), d)
		}
	case <-t.C():
		cancel()
		c.recordHealth(nil, context.DeadlineExceeded, d)
		<-res
	case <-ctx.Done():
		<-res
	}
}

// recordHealth makes the result of a run of the check the latest: err is
// what the run returned (nil: passed), late its context's error when it did
// not answer within d (nil when it did). It counts a failure, and pokes
// the campaign loop when the result changed.
func (c *Candidate) recordHealth(err, late error, d time.Duration) {
	switch {
	case late != nil:
		err = fmt.Errorf("election: health check did not answer within %v: %w", d, errors.Join(late, err))
	case err != nil:
		err = fmt.Errorf("election: health check: %w", err)
	}
	c.cfg.Metrics.HealthCheck(c.cfg.Name, err, late != nil)
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
