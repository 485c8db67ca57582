package electiontest

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// tenure is the suite's PreferenceTenure: short, so that several tenures
// fit in a test, and longer than a handover.
const tenure = 300 * time.Millisecond

// quietRenewals is how many renewals make four tenures.
const quietRenewals = int(4 * tenure / RenewInterval)

// withPriority sets a candidate's priority and the suite's tenure.
func withPriority(p int) func(*election.Config) {
	return func(cfg *election.Config) { cfg.Preference.Priority, cfg.Preference.Tenure = p, tenure }
}

// watchRequests polls the election's row until the test ends and counts
// the looks that found a planned change pending (transfer_to set on a live
// row): a follower's request, since the tests make no other.
func (c *cluster) watchRequests() *atomic.Int64 {
	var n atomic.Int64
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll(time.Hour, 5*time.Millisecond, func() bool {
			if rec, err := ops(c.admin).Status(ctx, c.name); err == nil && rec.Transfer {
				n.Add(1)
			}
			return ctx.Err() != nil
		})
	}()
	c.t.Cleanup(func() { cancel(); <-done })
	return &n
}

// recordedStart waits until m's current leadership has been recorded (its
// OnElected runs in a goroutine of its own, after IsLeader turned true) and
// returns when it began.
func (c *cluster) recordedStart(m *member) time.Time {
	c.t.Helper()
	var start time.Time
	if !poll(handoverBound, time.Millisecond, func() bool {
		for _, iv := range c.rec.elections() {
			if iv.id == m.id && iv.end.IsZero() {
				start = iv.start
				return true
			}
		}
		return false
	}) {
		c.t.Fatalf("%s leads but its OnElected was not called within %v", m.id, handoverBound)
	}
	return start
}

// termBegan returns when m's term began by the database clock (the row's
// term_started_at), reading the row while m leads. The tenure runs by that
// clock: comparing these is exact, where the times the OnElected calls were
// recorded also hold how late each goroutine ran.
func (c *cluster) termBegan(m *member) time.Time {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	rec, err := ops(c.admin).Status(ctx, c.name)
	if err != nil || rec.ID != m.id || rec.Since.IsZero() {
		c.t.Fatalf("the row while %s leads: %+v, %v", m.id, rec, err)
	}
	return rec.Since
}

// testPreferredRestartRegainsOnce: A (priority 2) leads, B (priority 1)
// follows; A stops and B takes over; A starts again (a restart, same ID)
// and gets leadership back once B has led for the tenure, by a planned
// transfer (B's OnDemoted says transferred, A leads without a lock delay);
// then nothing changes for several tenures, and B never asks.
func testPreferredRestartRegainsOnce(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	a := c.start("node-a", withPriority(2), nil)
	c.waitFor(takeoverBound, func(m *member) bool { return m == a }, a.id)
	b := c.start("node-b", withPriority(1), nil)
	// B follows: it saw A lead with priority 2 (a fixed sleep here let a
	// slow start of B's campaign miss A altogether).
	c.awaitSaw(b, a.id+" lead with priority 2", takeoverBound, func(r election.Record) bool { return r.ID == a.id && r.Priority == 2 })
	if err := c.stop(a); err != nil {
		t.Fatal(err)
	}
	c.waitFor(takeoverBound, func(m *member) bool { return m == b }, b.id)
	bBegan := c.termBegan(b)
	bStart := c.recordedStart(b)
	a = c.start("node-a", withPriority(2), nil)
	c.awaitSaw(a, b.id+" lead", takeoverBound, func(r election.Record) bool { return r.ID == b.id })
	c.waitFor(tenure+RenewInterval+handoverBound, func(m *member) bool { return m == a }, a.id)
	held := c.termBegan(a).Sub(bBegan)
	back := c.checkHandedTo(b, a, bStart.Add(time.Microsecond))
	t.Logf("%s led again %v after %s took over (%v by the database clock; tenure %v)", a.id, back.Round(time.Millisecond), b.id, held.Round(time.Millisecond), tenure)
	if held < tenure {
		t.Errorf("%s got leadership back %v after %s took over by the database clock, before the tenure %v", a.id, held, b.id, tenure)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	if rec, err := a.e.Leader(ctx); err != nil || rec.ID != a.id || rec.Priority != 2 || rec.Acquired != "transferred" {
		t.Errorf("record after the preferred candidate came back: %+v, %v; want %s, priority 2, acquired transferred", rec, err, a.id)
	}
	// Both see the restarted A lead its new term with priority 2: A before
	// it leads, B at its next look, which after handing over comes once
	// the transfer window and two retry intervals are over.
	aTerm := a.e.Term()
	for _, by := range []*member{a, b} {
		c.awaitSaw(by, a.id+" lead term "+strconv.FormatUint(aTerm, 10)+" with priority 2", transferWindow+2*RetryInterval+handoverBound,
			func(r election.Record) bool { return r.ID == a.id && r.Term == aTerm && r.Priority == 2 })
	}
	requests := c.watchRequests()
	n := len(c.rec.elections())
	c.awaitRenewals(quietRenewals) // four tenures
	if ivs := c.rec.elections(); len(ivs) != n || !a.e.IsLeader() {
		t.Errorf("%d leaderships after %d renewals (%v) of quiet, want %d, with %s leading", len(ivs), quietRenewals, 4*tenure, n, a.id)
	}
	if r := requests.Load(); r != 0 {
		t.Errorf("the row had a request pending at %d looks; %s (lower priority) asked", r, b.id)
	}
}

// testEqualPrioritiesNeverPingPong: candidates of equal priority never ask
// one another (the hysteresis: a request needs a strictly higher
// priority), and a follower of lower priority never asks: over several
// tenures the leader does not change and no request is written.
func testEqualPrioritiesNeverPingPong(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	for _, id := range []string{"node-1", "node-2", "node-3"} {
		c.start(id, withPriority(5), nil)
	}
	l := c.leaderRecorded()
	c.start("node-low", withPriority(3), nil)
	requests := c.watchRequests()
	c.awaitRenewals(quietRenewals * 5 / 4) // five tenures
	if ivs := c.rec.elections(); len(ivs) != 1 || !l.e.IsLeader() {
		t.Errorf("%d leaderships among equal priorities, want 1 (%s's)", len(ivs), l.id)
	}
	if r := requests.Load(); r != 0 {
		t.Errorf("the row had a request pending at %d looks; want none", r)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	if rec, err := l.e.Leader(ctx); err != nil || rec.Priority != 5 {
		t.Errorf("record: %+v, %v; want priority 5", rec, err)
	}
}

// testSchemaWithoutPriority: a table of a schema version before priority
// (migration 5) is refused with ErrSchemaMismatch.
func testSchemaWithoutPriority(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	if _, err := c.admin.ExecContext(c.ctx, "ALTER TABLE service_election DROP COLUMN priority"); err != nil {
		t.Fatal(err)
	}
	c.wantRunError(c.start("node-1", nil, nil), election.ErrSchemaMismatch, 5*time.Second)
}

// testPreferenceOutlastsOperator: an operator's transfer from the preferred
// leader A to B (lower priority) holds for B's tenure; then A asks and gets
// leadership back, by a planned transfer.
func testPreferenceOutlastsOperator(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	a := c.start("node-a", withPriority(2), nil)
	c.waitFor(takeoverBound, func(m *member) bool { return m == a }, a.id)
	b := c.start("node-b", withPriority(1), nil)
	// B follows, so that it takes the row within the transfer window.
	c.awaitSaw(b, a.id+" lead", takeoverBound, func(r election.Record) bool { return r.ID == a.id })
	if _, err := ops(c.admin).Transfer(c.ctx, c.name, b.id); err != nil {
		t.Fatal(err)
	}
	c.waitFor(RenewInterval+handoverBound, func(m *member) bool { return m == b }, b.id)
	bBegan := c.termBegan(b)
	bStart := c.recordedStart(b)
	// A, which handed over, sits out the transfer window and two retry
	// intervals (400 ms here) before it looks again: it asks after that
	// or after B's tenure, whichever ends later.
	sitOut := transferWindow + 2*RetryInterval
	c.waitFor(max(tenure, sitOut)+RenewInterval+handoverBound, func(m *member) bool { return m == a }, a.id)
	held := c.termBegan(a).Sub(bBegan)
	back := c.checkHandedTo(b, a, bStart.Add(time.Microsecond))
	t.Logf("%s led again %v after the operator's transfer to %s (%v by the database clock; tenure %v)", a.id, back.Round(time.Millisecond), b.id, held.Round(time.Millisecond), tenure)
	if held < tenure {
		t.Errorf("%s asked %v after %s took over by the database clock, before the tenure %v", a.id, held, b.id, tenure)
	}
}
