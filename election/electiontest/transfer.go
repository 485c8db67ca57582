package electiontest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/operator"
)

// transferWindow is the suite's transfer window (election.TransferWindow).
var transferWindow = operator.TransferWindow(RetryInterval)

// other returns a member of ms that is not m.
func other(ms []*member, m *member) *member {
	for _, o := range ms {
		if o != m {
			return o
		}
	}
	return nil
}

// firstAfter returns the first leadership that began after t0, and false
// when none did. It gives an OnElected that has not run yet (it runs in a
// goroutine of its own, after IsLeader turned true) a moment to be recorded.
func (c *cluster) firstAfter(t0 time.Time) (interval, bool) {
	var first interval
	ok := poll(handoverBound, time.Millisecond, func() bool {
		for _, iv := range c.rec.elections() {
			if !iv.start.Before(t0) {
				first = iv
				return true
			}
		}
		return false
	})
	return first, ok
}

// leaderRecorded waits until exactly one member leads and its OnElected
// has been recorded (it runs in a goroutine of its own, after IsLeader
// turned true), and returns it.
func (c *cluster) leaderRecorded() *member {
	c.t.Helper()
	l, _ := c.waitLeader(takeoverBound, nil)
	c.recordedStart(l)
	return l
}

// awaitSaw waits until by's OnLeaderChanged has seen a record that ok
// accepts (a follower sees a change at its next look, not at once) and
// fails the test after within.
func (c *cluster) awaitSaw(by *member, what string, within time.Duration, ok func(election.Record) bool) {
	c.t.Helper()
	if !poll(within, time.Millisecond, func() bool { return c.rec.saw(by.id, ok) }) {
		c.t.Fatalf("%s's OnLeaderChanged did not see %s within %v", by.id, what, within)
	}
}

// awaitFollowing waits until each of ms but l (the leader) has seen l lead
// its current term, so that it is running its campaign and looking at the
// election: a transfer to it is taken within the transfer window.
func (c *cluster) awaitFollowing(ms []*member, l *member) {
	c.t.Helper()
	term := l.e.Term()
	for _, m := range ms {
		if m != l {
			c.awaitSaw(m, l.id+" lead", takeoverBound, func(r election.Record) bool { return r.ID == l.id && r.Term == term })
		}
	}
}

// checkHandedTo checks that the leadership of old ended with
// ReasonTransferred and that the next one, begun after t0, is want's (any
// member but old when want is nil), and returns its delay after t0.
func (c *cluster) checkHandedTo(old, want *member, t0 time.Time) time.Duration {
	c.t.Helper()
	var end *interval
	for _, iv := range c.rec.elections() {
		if iv.id == old.id && iv.start.Before(t0) {
			iv := iv
			end = &iv
		}
	}
	if end == nil || end.reason != election.ReasonTransferred {
		c.t.Errorf("%s's leadership ended with %v, want %q", old.id, end, election.ReasonTransferred)
	}
	next, ok := c.firstAfter(t0)
	switch {
	case !ok:
		c.t.Fatal("no leadership began after the request")
	case want != nil && next.id != want.id:
		c.t.Errorf("%s led first after the transfer to %s", next.id, want.id)
	case want == nil && next.id == old.id:
		c.t.Errorf("%s, which stepped down, led first again", old.id)
	}
	return next.start.Sub(t0)
}

// testTransferToLiveTarget: the leader's Transfer hands leadership to the
// named follower, which leads at once (no lock delay), before any other.
func testTransferToLiveTarget(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms := c.startN(3)
	old := c.leaderRecorded()
	target := other(ms, old)
	c.awaitFollowing(ms, old) // a target not looking yet may miss its window
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := old.e.Transfer(ctx, target.id); err != nil {
		t.Fatal(err)
	}
	if old.e.IsLeader() {
		t.Fatal("still leader after Transfer returned")
	}
	c.waitFor(handoverBound, func(m *member) bool { return m == target }, target.id)
	d := c.checkHandedTo(old, target, start)
	t.Logf("%s elected %v after Transfer was called", target.id, d.Round(100*time.Microsecond))
	rec, err := target.e.Leader(ctx)
	if err != nil || rec.Acquired != "transferred" || rec.Transfer {
		t.Errorf("record after the transfer: %+v, %v; want acquired transferred, no transfer_to", rec, err)
	}
}

// testTransferToDeadTarget: a transfer to a candidate that does not run
// keeps the others out for the transfer window only; then the election
// goes on as after a release (nobody waits a lease for a ghost).
func testTransferToDeadTarget(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.startN(3)
	old := c.leaderRecorded()
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := old.e.Transfer(ctx, "ghost"); err != nil {
		t.Fatal(err)
	}
	nl, _ := c.waitLeader(transferWindow+handoverBound, nil)
	iv, _ := c.firstAfter(start)
	d := iv.start.Sub(start)
	t.Logf("%s elected %v after a transfer to a candidate that does not run (window %v)", nl.id, d.Round(time.Millisecond), transferWindow)
	if d < transferWindow-20*time.Millisecond {
		t.Errorf("%s took the row %v after the transfer, within the window %v reserved for the target", iv.id, d, transferWindow)
	}
	if d > transferWindow+handoverBound {
		t.Errorf("fallback took %v, want at most the window %v + %v", d, transferWindow, handoverBound)
	}
}

// testTransferByNonLeader: only the leader may transfer; bad targets are
// refused before anything happens.
func testTransferByNonLeader(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms := c.startN(2)
	l := c.leaderRecorded()
	f := other(ms, l)
	ctx, cancel := context.WithTimeout(c.ctx, setupBound)
	defer cancel()
	// The follower's Run may not have started yet on a loaded machine
	// (ErrNotRunning): ask again until it runs.
	var err error
	poll(setupBound, 5*time.Millisecond, func() bool {
		err = f.e.Transfer(ctx, f.id)
		return !errors.Is(err, election.ErrNotRunning)
	})
	if !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("a follower's Transfer = %v, want ErrNotLeader", err)
	}
	if err := f.e.Proclaim(ctx, "mine"); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("a follower's Proclaim = %v, want ErrNotLeader", err)
	}
	for _, bad := range []string{"", "a\x00b"} {
		if err := l.e.Transfer(ctx, bad); !errors.Is(err, election.ErrInvalidConfig) {
			t.Errorf("Transfer(%q) = %v, want ErrInvalidConfig", bad, err)
		}
	}
	for _, bad := range []string{"\xff", strings.Repeat("v", 1025)} {
		if err := l.e.Proclaim(ctx, bad); !errors.Is(err, election.ErrInvalidConfig) {
			t.Errorf("Proclaim(%.8q) = %v, want ErrInvalidConfig", bad, err)
		}
	}
	if err := l.e.Transfer(ctx, l.id); err != nil {
		t.Errorf("Transfer to itself = %v, want nil", err)
	}
	c.awaitRenewals(3) // the refused requests are not acted on
	if ls := c.leaders(); len(ls) != 1 || ls[0] != l {
		t.Fatalf("leaders %v after refused transfers, want %s", ids(ls), l.id)
	}
	if ivs := c.rec.elections(); len(ivs) != 1 {
		t.Fatalf("%d leaderships after refused transfers, want 1", len(ivs))
	}
}

// testOperatorRequests: an operator's transfer or step-down, in plain SQL or
// through Operator.Transfer and StepDown, is acted on by the live leader at
// its next renewal; the next leader takes over at once, with no lock delay.
func testOperatorRequests(t *testing.T, s Suite) {
	tests := []struct {
		name     string
		transfer bool // to a named follower, else a step-down
		request  func(c *cluster, to string) error
	}{
		{"SQLTransfer", true, func(c *cluster, to string) error {
			_, err := c.admin.ExecContext(c.ctx, "UPDATE service_election SET transfer_to = ? WHERE anchor = ?", to, c.name)
			return err
		}},
		{"RequestTransfer", true, func(c *cluster, to string) error {
			_, err := ops(c.admin).Transfer(c.ctx, c.name, to)
			return err
		}},
		{"SQLStepDown", false, func(c *cluster, _ string) error {
			_, err := c.admin.ExecContext(c.ctx, "UPDATE service_election SET transfer_to = '' WHERE anchor = ?", c.name)
			return err
		}},
		{"StepDown", false, func(c *cluster, _ string) error {
			_, err := ops(c.admin).StepDown(c.ctx, c.name)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, s, true)
			ms := c.startN(3)
			old := c.leaderRecorded()
			var target *member
			if tc.transfer {
				target = other(ms, old)
				c.awaitFollowing(ms, old) // a target not looking yet may miss its window
			}
			start := time.Now()
			if err := tc.request(c, idOf(target)); err != nil {
				t.Fatal(err)
			}
			// Acted on at the next renewal; the next leader without a
			// lock delay (which is a whole lease).
			bound := RenewInterval + handoverBound
			if target != nil {
				c.waitFor(bound, func(m *member) bool { return m == target }, target.id)
			} else {
				c.waitLeader(bound, old)
			}
			d := c.checkHandedTo(old, target, start)
			t.Logf("next leader elected %v after the request (renew interval %v)", d.Round(100*time.Microsecond), RenewInterval)
		})
	}
}

// testOperatorRequestWithoutLeader: a request with nobody leading is refused.
func testOperatorRequestWithoutLeader(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	if _, err := ops(c.admin).StepDown(c.ctx, c.name); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("StepDown without a row = %v, want ErrNoLeader", err)
	}
	if _, err := ops(c.admin).Transfer(c.ctx, c.name, ""); !errors.Is(err, election.ErrInvalidConfig) {
		t.Errorf("Transfer to an empty ID = %v, want ErrInvalidConfig", err)
	}
}

// testProclaim: the leader's new value is seen by followers (Leader,
// OnLeaderChanged) without a re-election, and later renewals keep it.
func testProclaim(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms := c.startN(2)
	l := c.leaderRecorded()
	f := other(ms, l)
	term := l.e.Term()
	c.awaitFollowing(ms, l) // f looks, and so sees a change at its next look
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := l.e.Proclaim(ctx, "proclaimed"); err != nil {
		t.Fatal(err)
	}
	if rec, err := f.e.Leader(ctx); err != nil || rec.Value != "proclaimed" || rec.ID != l.id || rec.Term != term {
		t.Fatalf("Leader() after Proclaim = %+v, %v", rec, err)
	}
	if !poll(handoverBound, time.Millisecond, func() bool { return c.rec.sawValue(f.id, l.id, "proclaimed") }) {
		t.Fatalf("%s's OnLeaderChanged never saw the proclaimed value", f.id)
	}
	t.Logf("%s's OnLeaderChanged saw the value %v after Proclaim", f.id, time.Since(start).Round(time.Millisecond))
	c.awaitRenewals(5) // renewals write the candidate's value
	rec, err := ops(c.admin).Status(ctx, c.name)
	if err != nil || rec.Value != "proclaimed" || rec.Term != term || !l.e.IsLeader() {
		t.Fatalf("after renewals: %+v, %v (leader %v); want the proclaimed value, term %d", rec, err, l.e.IsLeader(), term)
	}
	if ivs := c.rec.elections(); len(ivs) != 1 {
		t.Fatalf("%d leaderships, want 1: Proclaim re-elected", len(ivs))
	}
}

// testSchemaWithoutTransfer: a table of a schema version before transfer_to
// is refused with ErrSchemaMismatch, not half used.
func testSchemaWithoutTransfer(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	if _, err := c.admin.ExecContext(c.ctx, "ALTER TABLE service_election DROP COLUMN transfer_to"); err != nil {
		t.Fatal(err)
	}
	c.wantRunError(c.start("node-1", nil, nil), election.ErrSchemaMismatch, 5*time.Second)
}

// testResignDropsPendingRequest: a leader that resigns with an operator's
// transfer to a candidate that does not run still pending (it arrived after
// the leader's last renewal) drops the request with the row: a follower
// takes over at once, not after the row's lease (which is what a row left
// reserved for the ghost would cost). Should the leader act on the request
// first, the transfer window bounds the wait instead.
func testResignDropsPendingRequest(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.startN(3)
	old := c.leaderRecorded()
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	// The request alone, without the ring of Operator.Transfer, which
	// would have the leader act on it at once: Resign finds it pending.
	if _, err := c.admin.ExecContext(ctx, "UPDATE service_election SET transfer_to = 'ghost' WHERE anchor = ? AND released = 0", c.name); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := old.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitLeader(takeoverBound, old)
	iv, ok := c.firstAfter(start)
	if !ok {
		t.Fatal("no leadership began after the resignation")
	}
	d := iv.start.Sub(start)
	t.Logf("%s elected %v after the leader resigned with a transfer to a ghost pending", iv.id, d.Round(100*time.Microsecond))
	if bound := transferWindow + handoverBound; d > bound {
		t.Errorf("next leader after %v, want within %v: the row stayed reserved for the ghost", d, bound)
	}
	rec, err := ops(c.admin).Status(ctx, c.name)
	if err != nil || rec.Transfer {
		t.Errorf("record after the takeover: %+v, %v; want no transfer_to", rec, err)
	}
}

// testRungRequests: a request rings the leader's bell (getlock.Bell), so
// the leader acts on it at once, not at its next renewal: with a renew
// interval of 5 s, the next leader is elected within a second of the
// request. A plain-SQL request rings with the KILL QUERY docs/operations.md
// gives. A ringer whose user may not end the leader's statements (another
// user, without CONNECTION_ADMIN) rings in vain: the leader acts at its
// next renewal all the same. A leader whose bell another connection holds
// when it begins (the previous leader frees its own once its row is given
// up, which may come after the next leader began) takes the bell once it
// is let go.
func testRungRequests(t *testing.T, s Suite) {
	if s.NoWakeup {
		t.Skip("no bell without fast handover (DisableFastHandover, a Batcher)")
	}
	transfer := func(ctx context.Context, db *sql.DB, name, to string) error {
		_, err := ops(db).Transfer(ctx, name, to)
		return err
	}
	for _, tc := range []rungCase{
		{"Transfer", true, false, false, transfer},
		{"StepDown", true, true, false, func(ctx context.Context, db *sql.DB, name, _ string) error {
			_, err := ops(db).StepDown(ctx, name)
			return err
		}},
		{"PlainSQL", true, false, false, func(ctx context.Context, db *sql.DB, name, to string) error {
			if _, err := db.ExecContext(ctx, "UPDATE service_election SET transfer_to = ? WHERE anchor = ? AND released = 0", to, name); err != nil {
				return err
			}
			_, err := db.ExecContext(ctx, "KILL QUERY IS_USED_LOCK("+plainBell(name)+")")
			return err
		}},
		{"RingerWithoutPrivilege", false, false, false, transfer},
		{"BusyBell", true, false, true, transfer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, s)
		})
	}
}

// rungCase is one of testRungRequests' cases.
type rungCase struct {
	name     string
	rung     bool // the ringer may end the leader's statements
	stepDown bool // a step-down, else a transfer to a follower
	// busyBell: another connection holds the bell's lock until the
	// first leader leads (as a stopped leader's thread does until its
	// Free comes): the leader takes the bell once it is let go, not
	// after a whole sleep (a renew interval).
	busyBell bool
	// request writes the request on db and wakes the leader
	request func(ctx context.Context, db *sql.DB, name, to string) error
}

// rungRenew is testRungRequests' renew interval: a request acted on at
// the next renewal would take that long.
const rungRenew = 5 * time.Second

// rungRetry is testRungRequests' retry interval.
const rungRetry = 500 * time.Millisecond

// run runs tc on a cluster of its own.
func (tc rungCase) run(t *testing.T, s Suite) {
	slow := func(cfg *election.Config) {
		cfg.LeaseDuration = 15 * time.Second
		cfg.Tuning.RenewDeadline, cfg.Tuning.RenewInterval = 10*time.Second, rungRenew
		// A transfer window (twice this) of the bound, not 200 ms: a
		// target that a loaded machine (CI, 2026-12-01) kept from the
		// lock for 200 ms saw another member take the row after the
		// window, and the test is of the leader's speed, not the target's.
		cfg.Tuning.RetryInterval = rungRetry
		cfg.Tuning.DisableLockDelay = true // the first election at once: a lock delay is a lease
	}
	c := newCluster(t, s, true)
	var busy *sql.Conn
	if tc.busyBell {
		busy = c.holdBell()
	}
	ms := []*member{c.start("node-1", slow, nil), c.start("node-2", slow, nil), c.start("node-3", slow, nil)}
	old := c.leaderRecorded()
	target := other(ms, old)
	c.awaitFollowing(ms, old)
	if busy != nil {
		if _, err := busy.ExecContext(c.ctx, "DO RELEASE_LOCK("+plainBell(c.name)+")"); err != nil {
			t.Fatal(err)
		}
	}
	c.awaitBell(old)
	ringer := c.admin
	if !tc.rung {
		db, err := sql.Open("mysql", c.userDSN("u"+randHex(5), nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		ringer = db
	}
	ctx, cancel := context.WithTimeout(c.ctx, 15*time.Second)
	defer cancel()
	bound := time.Second // a fifth of the renew interval
	if !tc.rung {
		// The leader acts at its next renewal, a renew interval after
		// its last one ended (not after the request), and the target
		// takes the row on its hint or, missing it, at its next look.
		bound = rungRenew + rungRetry + handoverBound
	}
	to := target.id
	if tc.stepDown {
		to, target = "", nil
	}
	start := time.Now()
	if err := tc.request(ctx, ringer, c.name, to); err != nil {
		t.Fatal(err)
	}
	next, _ := c.waitFor(bound, func(m *member) bool { return m != old && (target == nil || m == target) }, "the next leader")
	d := c.checkHandedTo(old, target, start)
	t.Logf("%s elected %v after the request (renew interval %v)", next.id, d.Round(100*time.Microsecond), rungRenew)
	if tc.rung && !tc.stepDown {
		tc.again(ctx, c, ringer, ms, old, next, bound)
	}
}

// again asks once more, from the new leader next to the third member:
// the new leader found the bell free (the old one ended its sleep on the
// server) and keeps it.
func (tc rungCase) again(ctx context.Context, c *cluster, ringer *sql.DB, ms []*member, old, next *member, bound time.Duration) {
	var third *member
	for _, m := range ms {
		if m != old && m != next {
			third = m
		}
	}
	c.awaitFollowing(ms, next)
	c.awaitBell(next)
	start := time.Now()
	if err := tc.request(ctx, ringer, c.name, third.id); err != nil {
		c.t.Fatal(err)
	}
	c.waitFor(bound, func(m *member) bool { return m == third }, third.id)
	d := c.checkHandedTo(next, third, start)
	c.t.Logf("then %s elected %v after the request", third.id, d.Round(100*time.Microsecond))
}

// plainBell is the name of election name's bell as docs/operations.md
// gives it in SQL.
func plainBell(name string) string {
	return "CONCAT('sqlelect.bell#', LEFT(SHA2(CONCAT(DATABASE(), CHAR(0), 'service_election', CHAR(0), '" + name + "'), 256), 50))"
}

// holdBell takes the bell's lock on a connection of the admin's, kept
// until the test ends.
func (c *cluster) holdBell() *sql.Conn {
	c.t.Helper()
	conn, err := c.admin.Conn(c.ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	var got int
	if err := conn.QueryRowContext(c.ctx, "SELECT GET_LOCK("+plainBell(c.name)+", 0)").Scan(&got); err != nil || got != 1 {
		c.t.Fatalf("taking the bell: %d, %v", got, err)
	}
	return conn
}

// awaitBell waits until leader l keeps its bell: it takes it on a
// connection of its own (of its own database user) once it leads, a few
// round trips later.
func (c *cluster) awaitBell(l *member) {
	c.t.Helper()
	if !poll(handoverBound, time.Millisecond, func() bool {
		var user string
		err := c.admin.QueryRowContext(c.ctx, "SELECT user FROM information_schema.PROCESSLIST WHERE id = IS_USED_LOCK("+plainBell(c.name)+")").Scan(&user)
		return err == nil && user == l.user
	}) {
		c.t.Fatalf("%s keeps no bell %v after it was elected", l.id, handoverBound)
	}
}
