package election_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// restoreSQL is docs/operations.md's restore of election rows from a copy
// (backup): with a fresh lease, never the copy's last_seen_active.
const restoreSQL = `REPLACE INTO service_election (anchor, service_id, term, term_started_at, last_seen_active, lease_ms, acquired, value, backend, priority)
SELECT anchor, service_id, term, term_started_at, NOW(6), GREATEST(lease_ms, %d), acquired, value, backend, priority
FROM %s`

// TestRestoreWithFreshLease (issue 31, item 2): a DBA restores the table
// from a copy taken a while ago, while candidates run. Restored as the copy
// was, the row is already expired: a follower takes it at once while the
// leader, whose next renewal fails, still believes (0.83–0.97 s measured).
// Restored as docs/operations.md says, with a fresh lease, the row is live
// for a lease: a copy of the leader's own term is renewed by it as before;
// one of another term makes the leader stand down at its next renewal, and
// nobody else takes the row before the lease runs out.
//
// A trial in which L lost its lease on its own (a renewal that missed its
// deadline on a slow database) says nothing of the restore: another one
// runs, up to three.
func TestRestoreWithFreshLease(t *testing.T) {
	t.Parallel() // waits on leases, on a database and an election of its own
	for _, backend := range []string{"table", "lock"} {
		t.Run(backend, func(t *testing.T) {
			for trial := 1; ; trial++ {
				var inconclusive bool
				t.Run(fmt.Sprintf("trial-%d", trial), func(t *testing.T) { inconclusive = restoreTrial(t, backend) })
				if !inconclusive {
					return
				}
				if trial == 3 {
					t.Fatal("three trials inconclusive: L lost its lease on its own in each (a database slower than the renew deadline)")
				}
			}
		})
	}
}

// restoreTrial is one trial of TestRestoreWithFreshLease; it reports true
// when it was inconclusive.
func restoreTrial(t *testing.T, backend string) (inconclusive bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	name := "restore-" + randHex(4)
	newElection := election.NewTable
	if backend == "lock" {
		newElection = election.NewLock
	}
	w := newOverlapWatch()
	var l, f election.Election
	lc, fc := sessionClockConfig(name, "L"), sessionClockConfig(name, "F")
	// L renews seldom, F looks often: a row restored expired is
	// F's before L renews it, most times.
	lc.Tuning.RenewInterval = tRenewDeadline - tRetryInterval
	lc.Callbacks = w.callbacks("L", func() []election.Election { return []election.Election{f} })
	// L's renewals failing on their own (a database slower than
	// the renew deadline) end its lease whatever the restore does.
	var lost atomic.Bool
	lc.Callbacks.OnDemoted = func(d election.Demotion) { lost.Store(lost.Load() || d.Reason == election.ReasonLeaseLost) }
	fc.Callbacks = w.callbacks("F", func() []election.Election { return []election.Election{l} })
	var err error
	if l, err = newElection(testdb.Open(t, dsn), lc); err != nil {
		t.Fatal(err)
	}
	if f, err = newElection(testdb.Open(t, dsn), fc); err != nil {
		t.Fatal(err)
	}
	stopL := runElection(t, ctx, l)
	w.waitElected(t, ctx, "L")
	runElection(t, ctx, f)
	// The backup: a copy of the row, restored once it reads as
	// expired (as a copy taken more than a lease ago does).
	backup := "backup_" + randHex(4)
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+backup+" AS SELECT * FROM service_election WHERE anchor = ?", name); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for expired := false; !expired; {
		if err := db.QueryRowContext(ctx, "SELECT last_seen_active + INTERVAL lease_ms * 1000 MICROSECOND <= SYSDATE(6) FROM "+backup).Scan(&expired); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf(restoreSQL, tLease.Milliseconds(), backup)); err != nil {
		t.Fatal(err)
	}
	// The copy is of L's term: L goes on renewing it, and F is
	// not elected meanwhile (restored as copied, F took the
	// expired row at once while L still believed).
	if other := w.holdsFor(t, ctx, db, name, "L", 2*tLease); other != "" {
		if lost.Load() {
			t.Logf("inconclusive: L lost its lease on its own (a renewal missed its deadline), so %s's election says nothing of the restore", other)
			return true
		}
		t.Errorf("%s was elected after the restore while L renewed", other)
	}
	stopL() // gives the row up for good: F takes it
	w.waitElected(t, ctx, "F")
	w.check(t)
	return false
}
