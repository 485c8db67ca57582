//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/integration/internal/groupconn"
	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// Group Replication fault kinds.
const (
	// The primary killed (SIGKILL); it ends when the survivors have
	// elected another (about 5 s later); the member then rejoins.
	kindGRPrimaryKill = "gr_primary_kill"
	// group_replication_set_as_primary moves the primary to another
	// member; the old one stays up, read-only.
	kindGRSwitchover = "gr_switchover"
	// Multi-primary: the leader's member killed; it ends when the others
	// have expelled it; the member then rejoins.
	kindGRMemberKill = "gr_member_kill"
)

// grCandidates is how many candidates campaign on a group (multi-primary:
// spread over the members).
const grCandidates = 3

// TestChaosGroupReplication runs the chaos suite on a 3-member MySQL Group
// Replication group (MySQL 9.7 from its Debian root) in single-primary mode
// (both backends; the candidates reach the primary through
// groupconn.Connector, and the primary is killed and switched over) and in
// multi-primary mode (the table backend with candidates on every member,
// the leader's member killed; a fenced transaction that outlives its
// lease; TestGroupReplicationMultiPrimary checks that the lock backend is
// refused). It is skipped when the MySQL root
// cannot be built for want of root privileges.
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
	t.Run("single", func(t *testing.T) { chaosGroup(t, n, false) })
	t.Run("multi", func(t *testing.T) { chaosGroup(t, n, true) })
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
			fault{kind: kindGRSwitchover, inject: func(c *cluster, l *slot) (string, error) { return grSwitchover(c, g) }, once: true})
	}
	faults = selectFaults(t, faults)
	backends := []string{"table", "lock"}
	if multi {
		backends = backends[:1] // the lock backend is refused
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

	if multi {
		t.Run("FencedLongTransaction", func(t *testing.T) {
			fencedLongTransaction(t, ctx, adminDSN, memberDSN(adminDSN, 1))
		})
	}

	label := "gr-single"
	if multi {
		label = "gr-multi"
	}
	for _, backend := range backends {
		// The runs share the group's chaos_writes: each checks its own.
		if _, err := admin.ExecContext(ctx, "DELETE FROM chaos_writes"); err != nil {
			t.Fatal(err)
		}
		c = newCluster(t, ctx, label+"-"+backend, backend, tm)
		c.name = "chaos-" + label + "-" + backend
		c.group = !multi
		for i := range grCandidates {
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
		t.Logf("%s: heartbeat errors by kind (certification conflicts show as deadlock): %v", c.label, res.Errors)
	}
}

// primaryOr0 is the primary of a single-primary group, else member 0.
func primaryOr0(ctx context.Context, g *mysqld.Group) int {
	if p, err := g.Primary(ctx); err == nil {
		return p
	}
	return 0
}

// grPrimaryKill kills the primary; the fault ends when another member is
// the primary, and the killed one rejoins after that.
func grPrimaryKill(c *cluster, g *mysqld.Group) (string, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	old, err := g.Primary(ctx)
	if err != nil {
		return "", err
	}
	target := fmt.Sprintf("member %d", old+1)
	began := time.Now()
	if err := g.Kill(old); err != nil {
		return target, err
	}
	p, err := g.WaitPrimary(ctx, old)
	if err != nil {
		return target, err
	}
	c.ended = time.Now()
	target += fmt.Sprintf(" (member %d primary after %v)", p+1, c.ended.Sub(began).Round(time.Millisecond))
	return target, g.Rejoin(ctx, old)
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
