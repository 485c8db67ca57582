package election_test

import (
	"context"
	"errors"
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
			runElection(t, ctx, l)
			w.waitElected(t, ctx, "L")
			// Left once L leads (Run refuses such a session at preflight):
			// its renewals land on this connection.
			tamper(t, ctx, lpool, tc.set...)
			runElection(t, ctx, f)
			if other := w.holdsFor(t, ctx, clean, name, "L", 2*tLease); other != "" {
				t.Errorf("%s was elected while L renewed", other)
			}
			if err := l.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			w.waitElected(t, ctx, "F")
			w.check(t)
		})
	}
}

// TestPreflightRefusesNoAutocommit: a DSN whose sessions do not commit each
// statement is refused by Run on both backends (ErrNoAutocommit, at once),
// and failed by the doctor for both.
func TestPreflightRefusesNoAutocommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, value string }{{"autocommit", "0"}, {"completion_type", "1"}, {"completion_type", "'CHAIN'"}} {
		for _, backend := range []string{election.BackendTable, election.BackendLock} {
			t.Run(backend+"/"+tc.key+"="+tc.value, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, db := checkDB(t, map[string]string{tc.key: tc.value})
				cfg := sessionClockConfig("no-autocommit-"+randHex(4), "L")
				newElection := election.NewTable
				if backend == election.BackendLock {
					newElection = election.NewLock
				}
				e, err := newElection(db, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Run(ctx); !errors.Is(err, election.ErrNoAutocommit) {
					t.Errorf("Run: %v, want %v", err, election.ErrNoAutocommit)
				}
				r := runCheck(t, db, election.Config{})
				if f, _ := r.Find(election.PropAutocommit); f.StatusFor(backend) != election.CheckFail {
					t.Errorf("doctor: %s is %s for %s, want fail", election.PropAutocommit, f.StatusFor(backend), backend)
				}
			})
		}
	}
}
