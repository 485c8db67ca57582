package electiontest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
)

// Bounds the suite holds backends to. A death is noticed after the lease
// by the database clock, plus a lock delay for some backends.
const (
	takeoverBound = 2*Lease + time.Second
	handoverBound = Lease / 2
)

// setupBound is how long the suite waits for a candidate to reach a state
// whose timing is not under test, such as a just-started follower's first
// wait (after Run's preflight, a dozen round trips): the polls return as
// soon as the state holds, and a loaded machine may need far longer than
// any bound the backends are held to.
const setupBound = 30 * time.Second

// noFlappingRenewals is how many renewals of one leader the suite watches
// for a change of leadership that must not happen (about 10 s of them).
const noFlappingRenewals = 100

func testOneLeaderNoFlapping(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.startN(5)
	c.waitLeader(takeoverBound, nil)
	c.awaitRenewals(noFlappingRenewals) // checked by the sampler meanwhile
	if ivs := c.rec.elections(); len(ivs) == 0 || c.flaps(ivs) != 0 {
		t.Errorf("%d leaderships in %d renewals among 5 candidates, want one (a lease lost in a stall aside)", len(ivs), noFlappingRenewals)
	}
}

func testTakeoverAfterDeath(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	died := time.Now()
	c.crash(old)
	nl, at := c.waitLeader(takeoverBound, old)
	t.Logf("takeover by %s %v after the leader died (lease %v)", nl.id, at.Sub(died).Round(time.Millisecond), Lease)
}

func testKillConnections(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	killed := time.Now()
	n := c.killConnections(old)
	// The leader may survive (a pooled connection is replaced) or be
	// replaced; either way the row is written again (a renewal or a
	// takeover), and then exactly one leads and safety holds.
	c.awaitRenewals(1)
	nl, at := c.waitLeader(takeoverBound, nil)
	t.Logf("killed %d connections of %s; %s leads %v later", n, old.id, nl.id, at.Sub(killed).Round(time.Millisecond))
}

func testResignHandsOver(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := old.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if old.e.IsLeader() {
		t.Fatal("still leader after Resign returned")
	}
	nl, at := c.waitLeader(handoverBound, old)
	t.Logf("handover to %s %v after Resign", nl.id, at.Sub(start).Round(time.Millisecond))
	if ivs := c.rec.elections(); ivs[0].reason != election.ReasonResigned {
		t.Errorf("demotion reason %q, want %q", ivs[0].reason, election.ReasonResigned)
	}
}

// testResignWakesFollowers: followers that look only every 20 s still take
// over at once after a clean resign: they are woken, not polling.
func testResignWakesFollowers(t *testing.T, s Suite) {
	if s.NoWakeup {
		t.Skip("the backend under test does not wake followers")
	}
	c := newCluster(t, s, true)
	const retry = 20 * time.Second
	slow := func(cfg *election.Config) { cfg.Tuning.RetryInterval = retry }
	old := c.start("node-1", nil, nil)
	c.waitLeader(takeoverBound, nil)
	f2 := c.start("node-2", slow, nil)
	f3 := c.start("node-3", slow, nil)
	// The followers are in their long wait: blocked in GET_LOCK (on the
	// handover hint, or on the lock backend's lock) until it is let go or
	// their retry interval ends.
	c.awaitStatement("GET_LOCK", setupBound, f2, f3)
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := old.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	nl, at := c.waitLeader(handoverBound, old)
	t.Logf("handover to %s %v after Resign (followers' retry interval %v)", nl.id, at.Sub(start).Round(time.Millisecond), retry)
}

func testShutdownHandsOver(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	start := time.Now()
	if err := c.stop(old); err != nil {
		t.Fatalf("Run returned %v on shutdown, want nil", err)
	}
	nl, at := c.waitLeader(handoverBound, old)
	t.Logf("handover to %s %v after the leader's Run was cancelled", nl.id, at.Sub(start).Round(time.Millisecond))
}

func testStall(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms := c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	// Stall the database for the election: a transaction holds the row's
	// lock for two leases, so no renewal can commit.
	tx, err := c.admin.BeginTx(c.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(c.ctx, "SELECT term FROM service_election WHERE anchor = ? FOR UPDATE", c.name); err != nil {
		t.Fatal(err)
	}
	stalled := time.Now()
	if !poll(Lease, time.Millisecond, func() bool { return !old.e.IsLeader() }) {
		t.Fatalf("%s still leads %v into a stall; its renew deadline is %v", old.id, time.Since(stalled), RenewDeadline)
	}
	t.Logf("%s stood down %v into the stall", old.id, time.Since(stalled).Round(time.Millisecond))
	// The lease runs out by the database clock, and every other candidate
	// is then blocked on the server (its heartbeat on the row's lock, or a
	// lock-backend follower in GET_LOCK): nobody may lead.
	c.awaitLeaseOver(takeoverBound)
	var others []*member
	for _, m := range ms {
		if m != old {
			others = append(others, m)
		}
	}
	c.awaitStatement("", takeoverBound, others...)
	t.Logf("lease over and the followers blocked %v into the stall", time.Since(stalled).Round(time.Millisecond))
	if ls := c.leaders(); len(ls) != 0 {
		t.Errorf("leaders during the stall: %v", ids(ls))
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	c.waitLeader(takeoverBound, nil)
}

func testOperatorReplace(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms := c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	oldTerm := old.e.Term()
	target := ms[0]
	if target == old {
		target = ms[1]
	}
	// The recipe's REPLACE, with the election's name as the anchor.
	if _, err := c.admin.ExecContext(c.ctx,
		"REPLACE INTO service_election (anchor, service_id, last_seen_active) VALUES (?, ?, NOW())", c.name, target.id); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nl, at := c.waitFor(RetryInterval+Lease+takeoverBound, func(m *member) bool { return m == target }, target.id)
	t.Logf("%s leads %v after the REPLACE", nl.id, at.Sub(start).Round(time.Millisecond))
	if term := nl.e.Term(); term <= oldTerm {
		t.Fatalf("term %d after REPLACE, was %d", term, oldTerm)
	}
}

func testOperatorDelete(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	oldTerm := old.e.Term()
	if _, err := c.admin.ExecContext(c.ctx, "DELETE FROM service_election WHERE anchor = ?", c.name); err != nil {
		t.Fatal(err)
	}
	// The holder lets go at its next renewal.
	if !poll(RenewDeadline, time.Millisecond, func() bool { return !old.e.IsLeader() || old.e.Term() != oldTerm }) {
		t.Fatalf("%s still leads term %d after DELETE", old.id, oldTerm)
	}
	nl, _ := c.waitLeader(RetryInterval+Lease+takeoverBound, nil)
	if term := nl.e.Term(); term <= oldTerm {
		t.Fatalf("term %d after DELETE, was %d", term, oldTerm)
	}
	t.Logf("after DELETE: %s leads (was %s)", nl.id, old.id)
}

func testLeaderRecord(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms := c.startN(2)
	l, _ := c.waitLeader(takeoverBound, nil)
	var follower = ms[0]
	if follower == l {
		follower = ms[1]
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	rec, err := follower.e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec.ID != l.id || rec.Term != l.e.Term() || rec.Value != "value-of-"+l.id || rec.Election != c.name {
		t.Fatalf("Leader() = %+v; leader %s term %d", rec, l.id, l.e.Term())
	}
	if rec.LeaseLeft <= 0 || rec.LeaseLeft > Lease || rec.Lease != Lease || !rec.Live() {
		t.Fatalf("Leader() lease %v left %v live %v", rec.Lease, rec.LeaseLeft, rec.Live())
	}
	if rec.Since.IsZero() || rec.LastRenewal.Before(rec.Since) || time.Since(rec.LastRenewal) > time.Minute {
		t.Fatalf("Leader() since %v last renewal %v", rec.Since, rec.LastRenewal)
	}
	for _, m := range ms {
		_ = c.stop(m)
	}
	// Every candidate released on the way out, or (a holder still waiting
	// out its lock delay when stopped) its lease runs out.
	stopped := time.Now()
	if !poll(Lease+time.Second, 10*time.Millisecond, func() bool {
		_, err = follower.e.Leader(ctx)
		return errors.Is(err, election.ErrNoLeader)
	}) {
		t.Fatalf("Leader() after everyone stopped: %v, want ErrNoLeader", err)
	}
	t.Logf("no leader %v after everyone stopped", time.Since(stopped).Round(time.Millisecond))
}

func testClientFoundRows(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	for i := 0; i < 3; i++ {
		c.start(fmt.Sprintf("node-%d", i+1), nil, func(m *mysql.Config) { m.ClientFoundRows = true })
	}
	c.waitLeader(takeoverBound, nil)
	c.awaitRenewals(30)
	if ivs := c.rec.elections(); len(ivs) != 1 {
		t.Errorf("leadership changed %d times in 30 renewals with clientFoundRows=true, want once", len(ivs))
	}
}

func testMissingTable(t *testing.T, s Suite) {
	c := newCluster(t, s, false)
	m := c.start("node-1", nil, nil)
	c.wantRunError(m, election.ErrTableMissing, 10*time.Second)
}

// wantRunError waits for m's Run to return an error wrapping want.
func (c *cluster) wantRunError(m *member, want error, within time.Duration) {
	c.t.Helper()
	c.wantRunErrorWhile(m, want, within, nil)
}

// wantRunErrorWhile is wantRunError that also calls poke, when not nil,
// every Lease until Run returns.
func (c *cluster) wantRunErrorWhile(m *member, want error, within time.Duration, poke func()) {
	c.t.Helper()
	deadline := time.After(within)
	for {
		var tick <-chan time.Time
		if poke != nil {
			tick = time.After(Lease)
		}
		select {
		case err := <-m.done:
			m.exited, m.err = true, err
			if !errors.Is(err, want) {
				c.t.Fatalf("Run returned %v, want %v", err, want)
			}
			c.t.Logf("Run returned: %v", err)
			return
		case <-deadline:
			c.t.Fatalf("Run did not fail with %v within %v", want, within)
		case <-tick:
			poke()
		}
	}
}

func testNoPrivileges(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	cfg, err := mysql.ParseDSN(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	m := c.start("node-1", nil, nil)
	for _, host := range []string{"%", "localhost"} {
		q := fmt.Sprintf("REVOKE ALL ON `%s`.* FROM '%s'@'%s'", cfg.DBName, m.user, host)
		if _, err := c.admin.ExecContext(c.ctx, q); err != nil {
			t.Fatal(err)
		}
		q = fmt.Sprintf("GRANT SELECT ON `%s`.* TO '%s'@'%s'", cfg.DBName, m.user, host)
		if _, err := c.admin.ExecContext(c.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// A session keeps the database privileges it had when it started, so
	// the member's connections are killed; and again until Run fails, for
	// a connection that was still being opened while the processlist was
	// read (a CI run on MySQL 9.7 saw the leader renew for 20 s on one).
	c.killConnections(m)
	c.wantRunErrorWhile(m, election.ErrAccessDenied, 20*time.Second, func() { c.killConnections(m) })
}

func (c *cluster) fencedTable() {
	if _, err := c.admin.ExecContext(c.ctx, `CREATE TABLE fenced_writes (
  n INT AUTO_INCREMENT PRIMARY KEY, who VARCHAR(64) NOT NULL, term BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) fencedWrites(who string) int {
	var n int
	if err := c.admin.QueryRowContext(c.ctx, "SELECT COUNT(*) FROM fenced_writes WHERE who = ?", who).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func write(m *member, term uint64) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO fenced_writes (who, term) VALUES (?, ?)", m.id, term)
		return err
	}
}

func testFrozenFenced(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.fencedTable()
	c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	term := old.e.Term()
	if err := old.e.Fenced(ctx, write(old, term)); err != nil {
		t.Fatalf("fenced write by the leader: %v", err)
	}
	// Freeze the leader past its lease: another candidate takes over.
	old.clock.Freeze()
	nl, _ := c.waitLeader(takeoverBound+Lease, old)
	// Resumed, the old leader still believes it leads (its clock has not
	// caught up yet), but every fenced write is rejected.
	if !old.e.IsLeader() || old.e.Term() != term {
		t.Fatal("the frozen leader should still believe it leads")
	}
	for i := 0; i < 5; i++ {
		if err := old.e.Fenced(ctx, write(old, term)); !errors.Is(err, election.ErrNotLeader) {
			t.Fatalf("fenced write by the deposed leader: %v, want ErrNotLeader", err)
		}
	}
	if n := c.fencedWrites(old.id); n != 1 {
		t.Fatalf("%d fenced writes by %s, want the 1 made while it led", n, old.id)
	}
	if err := nl.e.Fenced(ctx, write(nl, nl.e.Term())); err != nil {
		t.Fatalf("fenced write by the new leader %s: %v", nl.id, err)
	}
	old.clock.Thaw()
	if old.e.IsLeader() {
		t.Fatal("the thawed leader still reports leading")
	}
}

func testTakeoverWaitsForFenced(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.fencedTable()
	c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	term := old.e.Term()
	var committed time.Time
	// A fenced transaction that outlives the lease, busy on the server
	// (an idle one is dropped after a lease: see testIdleFenced): the
	// leader's own renewals wait for it, so it stands down by its clock;
	// nobody may take over before the transaction ends.
	err := old.e.Fenced(ctx, func(tx *sql.Tx) error {
		if err := write(old, term)(tx); err != nil {
			return err
		}
		if _, err := tx.Exec("SELECT SLEEP(?)", (2 * Lease).Seconds()); err != nil {
			return err
		}
		if ls := c.leaders(); len(ls) != 0 {
			return fmt.Errorf("leaders %v while a fenced transaction runs", ids(ls))
		}
		committed = time.Now()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	nl, at := c.waitLeader(takeoverBound, nil)
	t.Logf("%s leads %v after the fenced transaction committed", nl.id, at.Sub(committed).Round(time.Millisecond))
	if n := c.fencedWrites(old.id); n != 1 {
		t.Fatalf("fenced write lost: %d rows", n)
	}
	for _, iv := range c.rec.elections() {
		if iv.term > term && iv.start.Before(committed) {
			t.Fatalf("%s took over (term %d) before the fenced transaction committed", iv.id, iv.term)
		}
	}
}

// testIdleFenced: a fenced transaction whose client goes silent (a frozen
// process, a partition that leaves the connection half-open) keeps its share
// lock on the election's row only until the server drops its session, one
// lease after its last statement, not for the server's wait_timeout (hours):
// then a takeover proceeds, and the transaction's writes are rolled back.
func testIdleFenced(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	c.fencedTable()
	c.startN(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	term := old.e.Term()
	idled := make(chan time.Time, 1)
	speak := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- old.e.Fenced(ctx, func(tx *sql.Tx) error {
			if err := write(old, term)(tx); err != nil {
				return err
			}
			idled <- time.Now()
			// Silent, holding the share lock, until somebody leads again
			// (or the test's deadline).
			select {
			case <-speak:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	var start time.Time
	select { // Fenced fails at once when the leader lost its lease meanwhile
	case start = <-idled:
	case err := <-errc:
		t.Fatalf("%s's fenced transaction returned before it went silent: %v", old.id, err)
	}
	// The leader's renewals wait for the share lock: it stands down by its
	// clock (its leadership ends in the recorder). Then somebody leads
	// again (the old leader too may renew once the lock is gone), which
	// needs the server to have dropped the silent transaction's session.
	if !poll(takeoverBound, time.Millisecond, func() bool {
		for _, iv := range c.rec.elections() {
			if iv.id == old.id && iv.term == term && !iv.end.IsZero() {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("%s did not stand down while its renewals waited for the silent transaction", old.id)
	}
	nl, at := c.waitLeader(takeoverBound, nil)
	close(speak)
	t.Logf("%s leads %v after the fenced transaction went silent", nl.id, at.Sub(start).Round(time.Millisecond))
	err := <-errc
	t.Logf("the silent fenced transaction returned %v after %v", err, time.Since(start).Round(time.Millisecond))
	if err == nil {
		t.Fatal("the silent fenced transaction committed after its session was dropped")
	}
	if n := c.fencedWrites(old.id); n != 0 {
		t.Fatalf("%d fenced writes of the dropped transaction were kept", n)
	}
}
