package election_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestSessionCommitModeOnPool (issue 31, item 3): application code leaves a
// session that does not commit each statement on the only connection of the
// leader's pool, once the leader leads: autocommit=0, or the transaction a
// COMMIT AND CHAIN opens (completion_type=CHAIN). The leader's renewals used
// to run in that open transaction: 1 affected row, so the leader went on
// believing, while every other session saw its lease run out (and, once the
// transaction was rolled back, a follower took the row while the leader
// still believed). Now a renewal the session would not commit is refused and
// the heartbeat renews in its own transaction: a clean session sees the
// leader's lease renewed, and the follower is not elected, for two leases by
// the database clock.
func TestSessionCommitModeOnPool(t *testing.T) {
	t.Parallel() // waits on leases, on a database and an election of its own
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{"autocommit=0", []string{"SET autocommit = 0"}},
		{"autocommit=0/open", []string{"SET autocommit = 0", "SELECT COUNT(*) FROM service_election"}},
		{"completion_type=CHAIN", []string{"SET completion_type = 'CHAIN'", "BEGIN", "COMMIT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dsn := testdb.DSN(t)
			testdb.Migrate(t, dsn)
			clean := testdb.Open(t, dsn)
			name := "commit-mode-" + randHex(4)
			lpool := onePool(t, ctx, dsn)
			fpool := onePool(t, ctx, dsn)
			w := newOverlapWatch()
			var l, f election.Election
			lc, fc := sessionClockConfig(name, "L"), sessionClockConfig(name, "F")
			lc.Callbacks = w.callbacks("L", func() []election.Election { return []election.Election{f} })
			fc.Callbacks = w.callbacks("F", func() []election.Election { return []election.Election{l} })
			var err error
			if l, err = election.NewTable(lpool, lc); err != nil {
				t.Fatal(err)
			}
			if f, err = election.NewTable(fpool, fc); err != nil {
				t.Fatal(err)
			}
			stopL := runElection(t, ctx, l)
			w.waitElected(t, ctx, "L")
			// Left once L leads (Run refuses such a session at preflight):
			// its renewals land on this connection.
			tamper(t, ctx, lpool, tc.set...)
			runElection(t, ctx, f)
			if other := w.holdsFor(t, ctx, clean, name, "L", 2*tLease); other != "" {
				t.Errorf("%s was elected while L renewed", other)
			}
			stopL() // gives the row up for good: F takes it
			w.waitElected(t, ctx, "F")
			w.check(t)
		})
	}
}

// TestLockConnectionLeftInTransaction (issue 31): the lock backend takes its
// connection from the caller's pool, which may hand it one left in an open
// transaction (here by COMMIT AND CHAIN; the chaos fault
// db_restart_options found the library's own Fenced leaving one). The
// session's settings do not end it: every renewal on that connection used
// to stay uncommitted while the leader believed, until the transaction
// ended (a restart of the server rolled it back, and a follower took the
// row at once). The leader's lock connection is KILLed, so that it takes a
// new one from its pool: the one left in a transaction. A clean session
// must see its renewals.
func TestLockConnectionLeftInTransaction(t *testing.T) {
	t.Parallel() // waits on leases, on a database and an election of its own
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	clean := testdb.Open(t, dsn)
	name := "lock-in-tx-" + randHex(4)
	pool := testdb.Open(t, dsn)
	pool.SetMaxOpenConns(2)
	pool.SetMaxIdleConns(2)
	w := newOverlapWatch()
	cfg := sessionClockConfig(name, "L")
	cfg.Callbacks = w.callbacks("L", func() []election.Election { return nil })
	l, err := election.NewLock(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runElection(t, ctx, l)
	w.waitElected(t, ctx, "L")
	// The pool's other connection: left in a transaction.
	tamper(t, ctx, pool, "SET completion_type = 'CHAIN'", "BEGIN", "COMMIT", "SET completion_type = 'NO_CHAIN'")
	rec, err := ops(clean).Status(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clean.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", rec.ConnectionID)); err != nil {
		t.Fatal(err)
	}
	// Renewed on the new lock connection, as a clean session sees it.
	if other := w.holdsFor(t, ctx, clean, name, "L", 2*tLease); other != "" {
		t.Errorf("%s elected", other)
	}
	after, err := ops(clean).Status(ctx, name)
	if err != nil || after.ConnectionID == rec.ConnectionID || after.ID != "L" {
		t.Errorf("Status after the KILL: %+v, %v; want L on another connection than %d", after, err, rec.ConnectionID)
	}
}

// TestFencedLeavesNoTransaction (issue 31): Fenced gives its connection back
// to the pool in no transaction, whatever the session's completion_type:
// database/sql's ROLLBACK that ends the *sql.Tx used to open the next
// transaction on a session with completion_type=CHAIN, and the pool then
// handed that connection to the next statement (the lock backend's lock
// connection among them). A write on the pool's only connection after
// Fenced must be seen by a clean session.
func TestFencedLeavesNoTransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	clean := testdb.Open(t, dsn)
	if _, err := clean.ExecContext(ctx, "CREATE TABLE probe (n INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	name := "fenced-tx-" + randHex(4)
	pool := onePool(t, ctx, dsn)
	w := newOverlapWatch()
	cfg := sessionClockConfig(name, "L")
	cfg.Callbacks = w.callbacks("L", func() []election.Election { return nil })
	l, err := election.NewTable(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runElection(t, ctx, l)
	w.waitElected(t, ctx, "L")
	tamper(t, ctx, pool, "SET completion_type = 'CHAIN'")
	if err := l.Fenced(ctx, func(*sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	tamper(t, ctx, pool, "INSERT INTO probe VALUES (1)")
	var n int
	if err := clean.QueryRowContext(ctx, "SELECT COUNT(*) FROM probe").Scan(&n); err != nil || n != 1 {
		t.Errorf("a write on the pool after Fenced: %d rows seen, %v; want 1 (committed)", n, err)
	}
}
