package electiontest

import (
	"context"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// testSameNameTwoDatabases: one election name in two databases of one server
// is two elections. User-level locks (GET_LOCK) are server-wide, so a backend
// whose lock names ignored the database would let one database's holder
// starve the other's candidates (the lock backend: no leader at all) or
// keep their handover from waking them (the table backend: a clean Resign
// handed over only when the lease ran out).
//
// Database b's election starts first, so that its leader takes whatever
// server-wide locks it keeps before a's candidates start; a's followers look
// only every 20 s, so a fast handover in a must come from being woken.
func testSameNameTwoDatabases(t *testing.T, s Suite) {
	b := newCluster(t, s, true)
	a := newCluster(t, s, true)
	a.name = b.name // the same election name in both databases
	const retry = 20 * time.Second
	slow := func(cfg *election.Config) { cfg.Tuning.RetryInterval = retry }

	b.startN(2)
	bl, _ := b.waitLeader(takeoverBound, nil)
	a1 := a.start("a-1", nil, nil)
	if al, _ := a.waitLeader(takeoverBound, nil); al != a1 {
		t.Fatalf("%s leads database a, want a-1", al.id)
	}
	a2 := a.start("a-2", slow, nil)
	a3 := a.start("a-3", slow, nil)

	// Each database keeps its leader: neither starves the other. a's
	// followers are in their long wait (in GET_LOCK, where they are woken),
	// and both leaders renew their rows (about 2 s).
	if !s.NoWakeup {
		a.awaitStatement("GET_LOCK", setupBound, a2, a3)
	}
	a.awaitRenewals(10)
	b.awaitRenewals(10)
	for _, c := range []*cluster{a, b} {
		if ls := c.leaders(); len(ls) != 1 {
			t.Errorf("database of %s: leaders %v after 10 renewals, want one", c.member[0].id, ids(ls))
		}
		if ivs := c.rec.elections(); len(ivs) == 0 || c.flaps(ivs) != 0 {
			t.Errorf("database of %s: %d leaderships, want one (a lease lost in a stall aside)", c.member[0].id, len(ivs))
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	if s.NoWakeup {
		return // no handover wakeup to check
	}
	// A clean Resign in a hands over in milliseconds, although b's leader
	// holds locks of the same election name.
	ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := a1.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	nl, at := a.waitLeader(handoverBound, a1)
	t.Logf("database a: handover to %s %v after Resign (followers' retry interval %v); database b led by %s throughout",
		nl.id, at.Sub(start).Round(time.Millisecond), retry, bl.id)
	if ls := b.leaders(); len(ls) != 1 || ls[0] != bl {
		t.Errorf("database b: leaders %v after a's handover, want %s", ids(ls), bl.id)
	}
}
