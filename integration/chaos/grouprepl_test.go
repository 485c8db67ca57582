//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/internal/groupconn"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/schema"
)

// Group Replication fault kinds.
const (
	// The primary killed (SIGKILL); it ends when the survivors have
	// elected another (about 5 s later); the member then rejoins.
	kindGRPrimaryKill = "gr_primary_kill"
	// group_replication_set_as_primary moves the primary to another
	// member; the old one stays up, read-only.
	kindGRSwitchover = "gr_switchover"
	// The primary leaves the group (STOP GROUP_REPLICATION): it stays up,
	// read-only, with its clients' connections open; it ends when another
	// member is the primary; the member then rejoins.
	kindGRPrimaryLeave = "gr_primary_leave"
	// Multi-primary: the leader's member killed; it ends when the others
	// have expelled it; the member then rejoins.
	kindGRMemberKill = "gr_member_kill"
)

// grCandidates is how many candidates campaign on a single-primary group;
// grMultiCandidates on a multi-primary one, two per member, so that the
// others race for a released or expired row from three members and their
// writes conflict in certification.
const (
	grCandidates      = 3
	grMultiCandidates = 6
)

// TestChaosGroupReplication runs the chaos suite on a 3-member MySQL Group
// Replication group (MySQL 9.7 from its Debian root), one group per mode,
// started once for all that follows.
//
// Single-primary mode: the doctor on the primary (both backends safe) and
// on a secondary (read_only fails both); then both backends, one after the
// other, with the candidates reaching the primary through
// groupconn.Connector, while the primary is killed (SIGKILL: the others
// expel it and elect another), switched over
// (group_replication_set_as_primary: the old primary stays up, read-only)
// and made to leave the group (STOP GROUP_REPLICATION: likewise), besides
// the suite's other faults. The lock backend is safe there: GET_LOCK is local to each
// member, so a primary change takes the holder's lock with it, and the
// first candidate to reach the new primary leads after the rest of the
// old lease (the lock delay of a lost connection); Run's preflight
// accepts it.
//
// Multi-primary mode: schema.Up (golang-migrate records its version in a
// SERIALIZABLE transaction, which update-everywhere checks refuse: its
// error is logged) and then schema.DDL; the doctor on a member (the table
// backend safe, the lock backend fails topology); the lock backend's Run
// refused with ErrUnsupportedTopology on every member; a fenced
// transaction that outlives its lease on one member while a candidate on
// another takes over (the commit must fail in certification); then the
// table backend with six candidates, two on every member, the leader's
// member killed, besides the suite's other faults: members' concurrent
// writes of the row conflict in certification, the loser is "not leader
// this tick", and Run never fails.
//
// Every run checks that the heartbeats' certification conflicts (errors
// 1213, 3101 and 1180 "Got error 149") are counted as kind=deadlock in the
// metrics, and logs, for each fault, how long nobody led. It is skipped
// when the MySQL root cannot be built for want of root privileges.
func TestChaosGroupReplication(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite takes minutes; skipped under -short")
	}
	n := rounds(t)
	if ok, why := mysqld.GroupSelected(); !ok {
		t.Skip(why)
	}
	// A group of its own, and it waits on members' restarts and GR's own
	// elections more than it computes: beside the short tests, once
	// TestChaos has ended (its two modes one after the other).
	t.Parallel()
	candidateBinary(t)
	t.Run("single", func(t *testing.T) { t.Parallel(); chaosGroup(t, n, false) })
	t.Run("multi", func(t *testing.T) { t.Parallel(); chaosGroup(t, n, true) })
}

func chaosGroup(t *testing.T, rounds int, multi bool) {
	tm := defaultTimings
	var g *mysqld.Group
	var admin *sql.DB    // follows the primary (single), any member (multi)
	var admins []*sql.DB // one per member
	var c *cluster       // the run under way
	// Operators write through the primary (single), any member (multi).
	var ctx context.Context
	var cancel context.CancelFunc
	adminFor := func() *sql.DB { return admins[primaryOr0(ctx, g)] }
	adminOf := func(l *slot) *sql.DB { return adminFor() }
	if multi {
		adminFor = func() *sql.DB { return admins[c.rng.IntN(len(admins))] }
		adminOf = func(l *slot) *sql.DB { return admins[l.node] }
	}
	faults := []fault{
		{kind: kindKill9, inject: kill9},
		{kind: kindSigstop, inject: sigstop},
		{kind: kindResign, inject: resign},
		{kind: kindKillConn, inject: func(c *cluster, l *slot) (string, error) { return killConn(adminOf)(c, l) }},
		{kind: kindOpReplace, inject: func(c *cluster, l *slot) (string, error) { return opReplace(adminFor)(c, l) }},
		{kind: kindOpDelete, inject: func(c *cluster, l *slot) (string, error) { return opDelete(adminFor)(c, l) }},
	}
	if multi {
		// op_assume_resign cuts the leader off through its slot's relay:
		// only the multi-primary candidates have one (one member each).
		faults = append(faults,
			fault{kind: kindOpAssumeResign, inject: func(c *cluster, l *slot) (string, error) {
				return opCompound(kindOpAssumeResign, adminFor, adminOf)(c, l)
			}, once: true},
			fault{kind: kindGRMemberKill, inject: func(c *cluster, l *slot) (string, error) { return grMemberKill(c, l, g) }, once: true},
			fault{kind: kindNetHalfOpen, inject: netHalfOpen, once: true})
	} else {
		faults = append(faults,
			fault{kind: kindGRPrimaryKill, inject: func(c *cluster, l *slot) (string, error) { return grPrimaryKill(c, g) }, once: true},
			fault{kind: kindGRSwitchover, inject: func(c *cluster, l *slot) (string, error) { return grSwitchover(c, g) }, once: true},
			fault{kind: kindGRPrimaryLeave, inject: func(c *cluster, l *slot) (string, error) { return grPrimaryLeave(c, g) }, once: true})
	}
	faults = selectFaults(t, faults)
	backends := []string{"table", "lock"}
	candidates := grCandidates
	if multi {
		backends = backends[:1] // the lock backend is refused
		candidates = grMultiCandidates
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Duration(len(backends))*budget(rounds, len(faults))+3*time.Minute)
	t.Cleanup(cancel)

	var err error
	serverStarts.Lock()
	g, err = mysqld.StartGroup(ctx, mysqld.GroupOptions{MultiPrimary: multi, Logf: t.Logf})
	serverStarts.Unlock()
	if errors.Is(err, mysqld.ErrNeedRoot) {
		t.Skipf("Group Replication runs MySQL 9.7 from a Debian root built with debootstrap: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Stop() })
	t.Logf("group of %d (multi-primary %v): %s", len(g.Nodes), multi, g.Nodes[0].Version())
	if multi {
		// golang-migrate records the version in a SERIALIZABLE
		// transaction, which a multi-primary group with update-everywhere
		// checks refuses (error 3098): setupDatabaseWith creates the table
		// from schema.DDL next, as a user with migrations of their own
		// would.
		cfg := createDatabase(t, ctx, g.Nodes[0].DSN(""), "chaos")
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("schema.Up on a multi-primary group: %v", schema.New(db).Up(ctx))
		db.Close()
	}
	_, adminDSN := setupDatabaseWith(t, ctx, g.Nodes[0].DSN(""), "chaos", multi)
	memberDSN := func(dsn string, i int) string { return strings.Replace(dsn, g.Nodes[0].Addr, g.Nodes[i].Addr, 1) }
	var cfgs []*mysql.Config
	for i := range g.Nodes {
		db, err := sql.Open("mysql", memberDSN(adminDSN, i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		admins = append(admins, db)
		cfg, err := mysql.ParseDSN(memberDSN(adminDSN, i))
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	conn, err := groupconn.New(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	admin = sql.OpenDB(conn)
	t.Cleanup(func() { admin.Close() })

	if err := g.Sync(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Run("Doctor", func(t *testing.T) { doctorGroup(t, ctx, g, multi) })
	if multi {
		t.Run("LockBackendRefused", func(t *testing.T) { lockRefused(t, ctx, admins) })
		t.Run("FencedLongTransaction", func(t *testing.T) {
			// The session kept busy: the commit must fail in
			// certification, not for a session dropped for idling.
			fencedLongTransaction(t, ctx, adminDSN, memberDSN(adminDSN, 1), true)
		})
	}

	label := "gr-single"
	if multi {
		label = "gr-multi"
	}
	for _, backend := range backends {
		// The runs share the group's chaos_writes: each checks its own.
		// Through the primary (single-primary; member 1 on multi-primary):
		// admin's idle connection may be to the member a switchover or a
		// leave has just made read-only (the connector drops it only
		// after the server refused a statement there).
		if _, err := admins[primaryOr0(ctx, g)].ExecContext(ctx, "DELETE FROM chaos_writes"); err != nil {
			t.Fatal(err)
		}
		c = newCluster(t, ctx, label+"-"+backend, backend, tm)
		c.name = "chaos-" + label + "-" + backend
		c.group = !multi
		for i := range candidates {
			node := i % len(g.Nodes)
			user := fmt.Sprintf("%s%d", backend[:1], i+1)
			dsn := createUser(t, ctx, adminFor(), user, g.Nodes[0].Addr)
			if multi {
				h := newHole(t, g.Nodes[node].Addr)
				c.addSlot(user, strings.Replace(dsn, g.Nodes[0].Addr, h.Addr(), 1), node, nil, h)
				continue
			}
			var dsns []string
			for k := range g.Nodes {
				dsns = append(dsns, memberDSN(dsn, k))
			}
			c.addSlot(user, strings.Join(dsns, ";"), node, nil, nil)
		}
		if err := g.Sync(ctx, 0); err != nil {
			t.Fatal(err)
		}
		for _, s := range c.slots {
			c.start(s)
		}
		c.campaign(faults, rounds)
		if err := g.Sync(ctx, primaryOr0(ctx, g)); err != nil {
			t.Errorf("%s: %v", c.label, err)
		}
		res := c.finish(admin)
		checkConflicts(t, c.label, res)
		for i, gap := range gaps(res) {
			f := res.Faults[i]
			t.Logf("%s: %s of %s: next leader %v after it began (the fault lasted %v), nobody led for %v", c.label,
				f.Fault.Kind, f.Fault.Target, f.Failover.Round(time.Millisecond), f.Fault.End.Sub(f.Fault.Time).Round(time.Millisecond), gap.Round(time.Millisecond))
		}
	}
}

// checkConflicts fails t unless every certification conflict of a
// heartbeat (1213, or 3101 at COMMIT, or 1180 "Got error 149" for a local
// transaction a remote one aborted) is counted as kind=deadlock in the
// metrics (a heartbeat's error is counted there once, and logged at most
// once; the candidates print both, Record.ErrNumbers).
func checkConflicts(t *testing.T, label string, res Result) {
	t.Helper()
	conflicts := res.ErrNumbers["1213"] + res.ErrNumbers["3101"] + res.ErrNumbers["1180/149"]
	if conflicts > res.Errors["deadlock"] {
		t.Errorf("%s: heartbeat errors by kind %v: %.0f deadlocks, but the heartbeats logged %.0f certification conflicts (by number: %v)",
			label, res.Errors, res.Errors["deadlock"], conflicts, res.ErrNumbers)
	}
	t.Logf("%s: heartbeat errors by kind %v, by MySQL error number %v (1290: a member not yet in the group is read-only): %.0f certification conflicts, counted as kind=deadlock: %.0f",
		label, res.Errors, res.ErrNumbers, conflicts, res.Errors["deadlock"])
}

// gaps returns, for each fault of res, how long nobody led: from the end
// of the last leadership that began before the fault to the start of the
// first that began after it (0 when the leader survived it).
func gaps(res Result) []time.Duration {
	var out []time.Duration
	ivs := append([]Interval(nil), res.Intervals...)
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].Start.Before(ivs[j].Start) })
	for _, f := range res.Faults {
		if f.Survived {
			out = append(out, 0)
			continue
		}
		var before, after *Interval
		for i := range ivs {
			if ivs[i].Start.Before(f.Fault.Time) {
				before = &ivs[i]
			} else if after == nil {
				after = &ivs[i]
			}
		}
		var gap time.Duration
		if before != nil && after != nil {
			gap = after.Start.Sub(before.End)
		}
		out = append(out, gap)
	}
	return out
}

// doctorGroup checks what doctor.Check reports on g, a group just set up
// (database chaos): on the primary of a single-primary group (member 0)
// both backends are safe; a secondary (super_read_only) is safe for
// neither; on a multi-primary group the table backend is safe and the lock
// backend fails topology.
func doctorGroup(t *testing.T, ctx context.Context, g *mysqld.Group, multi bool) {
	r := checkMember(t, ctx, g, 0)
	wantFails := map[string]string{doctor.BackendTable: "", doctor.BackendLock: ""}
	if multi {
		wantFails[doctor.BackendLock] = doctor.PropTopology
	}
	for b, want := range wantFails {
		if got := strings.Join(r.Failed(b), ","); got != want {
			t.Errorf("member 0, %s backend fails [%s], want [%s]", b, got, want)
		}
	}
	for _, f := range r.For(doctor.BackendTable) {
		if f.Status == doctor.CheckWarn && !(multi && f.Property == doctor.PropTopology) {
			t.Errorf("member 0 warns: %s %s", f.Property, f.Detail)
		}
	}
	if multi {
		return
	}
	r = checkMember(t, ctx, g, 1)
	for _, b := range []string{doctor.BackendTable, doctor.BackendLock} {
		if got := r.Failed(b); len(got) == 0 || got[0] != doctor.PropReadOnly {
			t.Errorf("secondary, %s backend fails %v, want read_only first", b, got)
		}
	}
}

// checkMember runs doctor.Check as root on member i of g, database chaos,
// with the session settings docs/servers.md advises on MySQL, and logs the
// report.
func checkMember(t *testing.T, ctx context.Context, g *mysqld.Group, i int) doctor.Report {
	t.Helper()
	cfg, err := mysql.ParseDSN(g.Nodes[i].DSN("chaos"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"time_zone": "'+00:00'", "innodb_lock_wait_timeout": "1"}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := doctor.Check(ctx, db, election.Config{})
	if err != nil {
		t.Fatalf("Check on member %d: %v", i, err)
	}
	for _, f := range r.Findings {
		t.Logf("member %d: %-17s %-4s %v %s", i, f.Property, f.Status, f.Backends, f.Detail)
	}
	return r
}

// lockRefused checks that the lock backend's Run is refused with
// ErrUnsupportedTopology at its preflight on every member of a
// multi-primary group or node of a Galera cluster (GET_LOCK is local to
// each); dbs are the members' (nodes') pools.
func lockRefused(t *testing.T, ctx context.Context, dbs []*sql.DB) {
	for i, db := range dbs {
		e, err := election.NewLock(db, election.Config{Name: "refused", ID: "x"})
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		err = e.Run(rctx)
		rcancel()
		if !errors.Is(err, election.ErrUnsupportedTopology) {
			t.Errorf("member %d: the lock backend's Run returned %v, want ErrUnsupportedTopology", i+1, err)
		} else {
			t.Logf("member %d: %v", i+1, err)
		}
	}
}

// primaryOr0 is the primary of a single-primary group, else member 0.
func primaryOr0(ctx context.Context, g *mysqld.Group) int {
	if p, err := g.Primary(ctx); err == nil {
		return p
	}
	return 0
}

// grPrimaryKill kills the primary (SIGKILL); see grPrimaryGone.
func grPrimaryKill(c *cluster, g *mysqld.Group) (string, error) {
	return grPrimaryGone(c, g, func(_ context.Context, i int) error { return g.Kill(i) })
}

// grPrimaryLeave makes the primary leave the group (STOP
// GROUP_REPLICATION); see grPrimaryGone.
func grPrimaryLeave(c *cluster, g *mysqld.Group) (string, error) {
	return grPrimaryGone(c, g, g.Leave)
}

// grPrimaryGone takes the primary away with take; the fault ends when
// another member is the primary. The old one then rejoins, and the new
// primary sees every member ONLINE.
func grPrimaryGone(c *cluster, g *mysqld.Group, take func(ctx context.Context, i int) error) (string, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	old, err := g.Primary(ctx)
	if err != nil {
		return "", err
	}
	target := fmt.Sprintf("member %d", old+1)
	began := time.Now()
	if err := take(ctx, old); err != nil {
		return target, err
	}
	p, err := g.WaitPrimary(ctx, old)
	if err != nil {
		return target, err
	}
	c.ended = time.Now()
	target += fmt.Sprintf(" (member %d primary after %v)", p+1, c.ended.Sub(began).Round(time.Millisecond))
	if err := g.Rejoin(ctx, old); err != nil {
		return target, err
	}
	return target, g.WaitOnline(ctx, p)
}

// grSwitchover makes another member the primary.
func grSwitchover(c *cluster, g *mysqld.Group) (string, error) {
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	old, err := g.Primary(ctx)
	if err != nil {
		return "", err
	}
	next := (old + 1 + c.rng.IntN(len(g.Nodes)-1)) % len(g.Nodes)
	return fmt.Sprintf("member %d to member %d", old+1, next+1), g.SetPrimary(ctx, next)
}

// grMemberKill kills the leader's member of a multi-primary group; the
// fault ends when another member no longer lists it, and it rejoins after
// that.
func grMemberKill(c *cluster, l *slot, g *mysqld.Group) (string, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	k := l.node
	target := fmt.Sprintf("member %d (leader %s)", k+1, l.proc.id)
	if err := g.Kill(k); err != nil {
		return target, err
	}
	other := (k + 1) % len(g.Nodes)
	for {
		ms, err := g.Members(ctx, other)
		gone := err == nil
		for _, m := range ms {
			gone = gone && m.Node != k
		}
		if gone {
			break
		}
		if ctx.Err() != nil {
			return target, fmt.Errorf("member %d still listed: %v (%v)", k+1, ms, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.ended = time.Now()
	return target, g.Rejoin(ctx, k)
}
