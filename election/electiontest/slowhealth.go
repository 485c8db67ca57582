package electiontest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/operator"
)

// The health checks of these tests are slow, not broken: each run takes
// slowCheck, well within slowCheckTimeout (the candidates' configured
// Health.Timeout), and longer than the transfer window of
// slowRetryInterval. A check of the application must not change who leads
// unless it fails.
const (
	slowCheck        = 300 * time.Millisecond
	slowCheckTimeout = time.Second
	// slowRetryInterval's transfer window, 200 ms, is shorter than
	// slowCheck. At 50 ms (a 100 ms window) a target on a loaded CI machine
	// looked 123 ms after the hand-over (MySQL 9.7, 2026-12-02).
	slowRetryInterval = 100 * time.Millisecond
	// slowRenewDeadline leaves a check of slowCheck within the bounds a
	// check had when it ran in the campaign loop (RenewDeadline/2 for a
	// follower, half the time left for a leader): it is not cut off there
	// either, only slow.
	slowRenewDeadline = 900 * time.Millisecond
)

// slowHealth is a HealthCheck that passes after d (or fails when its
// context ends first).
func slowHealth(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
}

// withSlowHealth gives a candidate a check that passes after d, a
// Health.Timeout of slowCheckTimeout, and a RetryInterval of
// slowRetryInterval, whose transfer window is shorter than d, and a
// RenewDeadline of slowRenewDeadline.
func withSlowHealth(d time.Duration, more ...func(*election.Config)) func(*election.Config) {
	return func(cfg *election.Config) {
		cfg.Health.Check = slowHealth(d)
		cfg.Health.Timeout = slowCheckTimeout
		cfg.Tuning.RetryInterval = slowRetryInterval
		cfg.Tuning.RenewDeadline = slowRenewDeadline
		for _, f := range more {
			f(cfg)
		}
	}
}

// leaderless returns how long nobody led between from and to, by the
// leaderships the callbacks recorded (one still under way counts as
// leading until to).
func (c *cluster) leaderless(from, to time.Time) time.Duration {
	covered := from
	var gap time.Duration
	for _, iv := range c.rec.elections() {
		end := iv.end
		if end.IsZero() || end.After(to) {
			end = to
		}
		if !end.After(covered) {
			continue
		}
		start := later(iv.start, from)
		if start.After(to) {
			break
		}
		if start.After(covered) {
			gap += start.Sub(covered)
		}
		covered = end
	}
	if to.After(covered) {
		gap += to.Sub(covered)
	}
	return gap
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// noUnhealthyFor fails the test when a leadership ends as unhealthy within d; it
// waits for d, or until the first such end.
func (c *cluster) noUnhealthyFor(d time.Duration) {
	c.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, iv := range c.rec.elections() {
			if iv.reason == election.ReasonUnhealthy {
				c.t.Fatalf("%s's leadership (term %d) ended %s with a check that passes in %v (timeout %v)",
					iv.id, iv.term, iv.reason, slowCheck, slowCheckTimeout)
			}
		}
		c.waitChange(end)
	}
}

// waitChange waits until a leadership begins or ends, or until the time is
// past until.
func (c *cluster) waitChange(until time.Time) {
	n, ended := c.counts()
	tick := time.NewTicker(time.Millisecond) // polling the recorder, as waitFor does
	defer tick.Stop()
	for time.Now().Before(until) {
		if m, e := c.counts(); m != n || e != ended {
			return
		}
		<-tick.C
	}
}

func indexOf(ms []*member, m *member) int {
	for i, o := range ms {
		if o == m {
			return i
		}
	}
	return -1
}

// counts returns how many leaderships began and how many ended.
func (c *cluster) counts() (began, ended int) {
	ivs := c.rec.elections()
	for _, iv := range ivs {
		if !iv.end.IsZero() {
			ended++
		}
	}
	return len(ivs), ended
}

// testSlowHealthCheckTransfers: every candidate's check is slower than the
// transfer window (but passes well within its timeout); twelve transfers in
// a row each reach their target: a follower's look is never delayed by its
// check, so it looks within the window of a hand-over to it.
func testSlowHealthCheckTransfers(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms := make([]*member, 3)
	for i := range ms {
		ms[i] = c.start(idN(i), withSlowHealth(slowCheck), nil)
	}
	const transfers = 12
	reached := 0
	var missed []string
	for i := 0; i < transfers; i++ {
		old := c.leaderRecorded()
		target := ms[(indexOf(ms, old)+1+i%2)%len(ms)] // the two others in turn
		c.awaitFollowing(ms, old)
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		start := time.Now()
		err := old.e.Transfer(ctx, target.id)
		cancel()
		if err != nil {
			t.Fatalf("transfer %d: %v", i+1, err)
		}
		next, ok := c.firstAfter(start)
		for !ok && time.Since(start) < takeoverBound {
			next, ok = c.firstAfter(start)
		}
		switch {
		case !ok:
			t.Fatalf("transfer %d: nobody led within %v", i+1, takeoverBound)
		case next.id == target.id:
			reached++
		default:
			missed = append(missed, fmt.Sprintf("#%d to %s: %s led", i+1, target.id, next.id))
		}
	}
	t.Logf("%d of %d transfers reached their target with a %v check and a %v transfer window; missed: %v",
		reached, transfers, slowCheck, operator.TransferWindow(slowRetryInterval), missed)
	if reached != transfers {
		t.Errorf("%d of %d transfers reached their target, want all", reached, transfers)
	}
}

// testSlowHealthCheckPreference: every candidate's check is slower than the
// transfer window (and passes). A preferred candidate gets leadership back,
// by its request and a planned transfer straight to it, each time an
// operator's transfer moved leadership away from it: six rounds, and in
// each the leadership that follows the other candidate's is the preferred
// one's.
func testSlowHealthCheckPreference(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms := make([]*member, 2)
	for i := range ms {
		ms[i] = c.start(idN(i), withSlowHealth(slowCheck), nil)
	}
	c.leaderRecorded()
	pref := c.start("node-p", withSlowHealth(slowCheck, withPriority(10)), nil)
	within := takeoverBound + tenure + RenewInterval + handoverBound
	const rounds = 6
	var missed []string
	var took []time.Duration
	for i := 0; i < rounds; i++ {
		l := c.leaderRecorded()
		if l != pref {
			// It sees the leader, waits the tenure, asks; the leader hands
			// over at its next renewal; the preferred candidate takes the
			// row within the window.
			start := time.Now()
			deadline := start.Add(within)
			for time.Now().Before(deadline) && !pref.e.IsLeader() {
				c.waitChange(deadline)
			}
			if !pref.e.IsLeader() {
				t.Fatalf("round %d: the preferred candidate did not lead within %v (%s led; missed before: %v)", i+1, within, l.id, missed)
			}
			next, _ := c.firstAfter(start)
			if next.id != pref.id {
				missed = append(missed, fmt.Sprintf("#%d: %s led after %s", i+1, next.id, l.id))
			}
			took = append(took, time.Since(start).Round(time.Millisecond))
		}
		l = c.leaderRecorded()
		away := ms[i%2]
		c.awaitFollowing(append(ms, pref), l)
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		err := l.e.Transfer(ctx, away.id)
		cancel()
		if err != nil {
			t.Fatalf("round %d: transfer from %s to %s: %v", i+1, l.id, away.id, err)
		}
		c.waitFor(takeoverBound, func(m *member) bool { return m != l }, "after the transfer")
	}
	t.Logf("the preferred candidate got leadership back in %v with a %v check and a %v window; missed: %v",
		took, slowCheck, operator.TransferWindow(slowRetryInterval), missed)
	if len(missed) != 0 {
		t.Errorf("%d of %d moves by preference did not reach the preferred candidate: %v", len(missed), len(took), missed)
	}
}

// testSlowHealthCheckSameForLeader: a check that passes for followers
// passes for leaders: a steady check that takes longer than half the time
// between a renewal and the renew deadline (once the leader's bound) keeps
// one leader, with no stand-down as unhealthy.
func testSlowHealthCheckSameForLeader(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	// (RenewDeadline - RenewInterval)/2 = 200 ms was a leader's bound,
	// RenewDeadline/2 = 300 ms a follower's; the check takes 250 ms.
	const check, renew = 250 * time.Millisecond, 200 * time.Millisecond
	for i := 0; i < 3; i++ {
		c.start(idN(i), func(cfg *election.Config) {
			cfg.Health.Check, cfg.Health.Timeout, cfg.Tuning.RenewInterval = slowHealth(check), slowCheckTimeout, renew
		}, nil)
	}
	l := c.leaderRecorded()
	c.noUnhealthyFor(3 * time.Second)
	ivs := c.rec.elections()
	if len(ivs) != 1 || !l.e.IsLeader() {
		t.Errorf("%d leaderships in 3 s with a steady %v check, want one", len(ivs), check)
	}
}

// testFlappingPreferredHoldDown: the preferred candidate's check alternates
// pass and fail; the hold-down keeps it from asking for leadership, so the
// election is not left leaderless by leadership moving to it and away
// again: under 2% leaderless over the measured window.
func testFlappingPreferredHoldDown(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	for i := 0; i < 2; i++ {
		c.start(idN(i), nil, nil)
	}
	c.leaderRecorded()
	var n atomic.Int64
	c.start("node-p", func(cfg *election.Config) {
		withPriority(10)(cfg)
		cfg.Health.Check = func(context.Context) error {
			if n.Add(1)%2 == 0 {
				return errUnhealthy
			}
			return nil
		}
	}, nil)
	const window = 5 * time.Second
	from := time.Now()
	end := from.Add(window)
	for time.Now().Before(end) {
		c.waitChange(end)
	}
	gap := c.leaderless(from, end)
	ivs, stalled := 0, false
	for _, iv := range c.rec.elections() {
		if iv.end.IsZero() || iv.end.After(from) {
			ivs++
			stalled = stalled || c.lostInStall(iv)
		}
	}
	t.Logf("leaderless %v of %v (%.2f%%), %d leaderships, %d checks of the flapping candidate",
		gap.Round(time.Millisecond), window, 100*gap.Seconds()/window.Seconds(), ivs, n.Load())
	switch {
	case gap > window/50 && stalled:
		t.Logf("a lease was lost while the machine or the database stalled: the gap after it is not the hold-down's")
	case gap > window/50:
		t.Errorf("leaderless %v of %v with a flapping check on the preferred candidate, want under 2%%", gap, window)
	}
}
