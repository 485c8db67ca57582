package election

import (
	"context"
	"time"

	"github.com/sqlelect/sqlelect/internal/getlock"
)

// prefer asks the leader of seen, the record a look at the election just
// read, to hand over to this candidate when its Priority is higher than the
// leader's and the leader has led for Preference.Tenure; it returns the wait
// before the next look, wait or less (when the tenure ends sooner, so that
// the request is not a retry interval late). It writes nothing unless the
// request may be granted: never with Priority 0, never to a leader whose
// priority is at least this candidate's, never while a planned change is
// pending, never twice of the same term (a holder that gives the row up
// without acting on the request, one still waiting out its lock delay,
// clears the request and keeps the term: asking again would write at every
// look), and never of a row an operator assigned that its candidate has
// not claimed yet (acquired "operator"), and never while its HealthCheck
// failed within Health.HoldDown (a flapping check would otherwise draw
// leadership to a candidate about to stand down as unhealthy). So it asks at most once per look,
// and once per leadership. An error is counted and logged; the next look
// tries again.
func (c *Candidate) prefer(ctx context.Context, seen Record, wait time.Duration) time.Duration {
	if c.cfg.Preference.Priority == 0 || seen.Priority >= c.cfg.Preference.Priority || !seen.Live() || seen.ID == c.cfg.ID || seen.Transfer ||
		seen.Acquired == "operator" || seen.Term == c.st.askedTerm || c.heldDown() {
		return wait
	}
	// The leader's tenure is how long its term has lasted by the database
	// clock when seen was read: the database clock then (the last renewal
	// plus the lease, less what was left of it) minus the start of the term.
	tenure := seen.LastRenewal.Add(seen.Lease - seen.LeaseLeft).Sub(seen.Since)
	if left := c.cfg.Preference.Tenure - tenure; left > 0 {
		return min(wait, left+time.Millisecond)
	}
	// A request to hand term seen.Term over to this candidate.
	p := c.b.base().params(0)
	p.Term, p.Tenure = seen.Term, ceilMillis(c.cfg.Preference.Tenure)
	c.step()
	qctx, cancel := context.WithTimeout(ctx, c.cfg.QueryTimeout)
	send := c.cfg.Clock.Now()
	asked, err := c.b.writeRow(qctx, writePrefer, p)
	cancel()
	c.cfg.Metrics.Heartbeat(c.cfg.Name, c.cfg.Clock.Now().Sub(send), err)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			c.log.Debug("asking for leadership by priority failed", "err", err)
		}
	case asked:
		c.st.askedTerm = seen.Term
		c.log.Info("asked the leader to hand over: this candidate's priority is higher",
			"leader", seen.ID, "term", seen.Term, "leader_priority", seen.Priority, "priority", c.cfg.Preference.Priority)
		c.cfg.Metrics.PreferenceRequested(c.cfg.Name)
		c.ring(ctx)
	}
	return wait
}

// ring wakes the leader after this candidate wrote a request for it
// (getlock.Ring), unless this candidate keeps no bell itself (a Batcher,
// Config.Tuning.DisableFastHandover); a failure is logged, and the leader
// acts on the request at its next renewal.
func (c *Candidate) ring(ctx context.Context) {
	if c.bell == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.QueryTimeout)
	defer cancel()
	if err := getlock.Ring(rctx, c.b.base().db, c.cfg.Table, c.cfg.Name); err != nil && ctx.Err() == nil {
		c.log.Debug("waking the leader failed; it acts at its next renewal", "err", err)
	}
}
