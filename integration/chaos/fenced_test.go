//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// TestChaosFencedLongTransaction: Election.Fenced promises that a deposed
// leader's transaction cannot commit after a takeover. Leader L runs a
// fenced transaction that outlives its lease, under a context that is never
// cancelled (the API allows it), while candidate M campaigns. On one server
// M's takeover waits for L's share lock on the election's row, so M cannot
// lead before L's transaction ended. (TestChaosGalera runs the same with L
// and M on two Galera nodes, where the share lock is local to L's node: M
// takes over, and applying its write on L's node aborts L's transaction.)
func TestChaosFencedLongTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short")
	}
	// Part of the chaos suite: 0 rounds (the go test legs of make test and
	// make ci, where chaos-short runs it on every server) skips it.
	rounds(t)
	// A server of its own, and it waits on leases more than it computes:
	// beside the suite's other short tests once TestChaos and the cluster
	// tests (run one at a time before them) have ended.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	serverStarts.Lock()
	srv, err := mysqld.Start(ctx, mysqld.Options{})
	serverStarts.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	_, dsn := setupDatabase(t, ctx, srv.DSN(""))
	fencedLongTransaction(t, ctx, dsn, dsn, false)
}

// fencedLongTransaction fails t when L's fenced transaction commits after M
// began to lead, or its row is in the table after M led. With busy, the
// transaction's session runs a statement every 100 ms, so that the server
// does not drop it for idling past the lease (Fenced bounds its idle
// time): on a Group Replication group the commit must then fail in
// certification.
func fencedLongTransaction(t *testing.T, ctx context.Context, dsnA, dsnB string, busy bool) {
	tm := defaultTimings
	open := func(dsn string) *sql.DB {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	dbA, dbB := open(dsnA), open(dsnB)
	// A table of its own: the campaigns' checker reads chaos_writes.
	if _, err := dbA.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS chaos_fenced_long (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, term BIGINT UNSIGNED NOT NULL, at DATETIME(6) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	cfg := func(id string) election.Config {
		return election.Config{Name: "fenced-long", ID: id, LeaseDuration: tm.Lease, Tuning: election.TuningConfig{RenewDeadline: tm.RenewDeadline, RenewInterval: tm.RenewInterval, RetryInterval: tm.RetryInterval, QueryTimeout: tm.QueryTimeout}}
	}
	run := func(e election.Election) {
		rctx, rcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(rctx) }()
		t.Cleanup(func() { rcancel(); <-done })
	}
	l, err := election.NewTable(dbA, cfg("L"))
	if err != nil {
		t.Fatal(err)
	}
	mElected := make(chan struct{}, 1)
	mcfg := cfg("M")
	mcfg.Callbacks.OnElected = func(context.Context, election.Leadership) {
		select {
		case mElected <- struct{}{}:
		default:
		}
	}
	m, err := election.NewTable(dbB, mcfg)
	if err != nil {
		t.Fatal(err)
	}
	run(l)
	for deadline := time.Now().Add(10 * time.Second); !l.IsLeader(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("L not elected")
		}
	}
	run(m)
	term := l.Term()
	var mLedAt time.Time
	var mTerm uint64
	began := time.Now()
	err = l.Fenced(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec("INSERT INTO chaos_fenced_long (term, at) VALUES (?, NOW(6))", term); err != nil {
			return err
		}
		// Outlive the lease; stop early once M is elected. With busy, a
		// statement every 100 ms keeps the session active.
		keep := time.NewTicker(100 * time.Millisecond)
		defer keep.Stop()
		outlive := time.NewTimer(2*tm.Lease + 2*time.Second)
		defer outlive.Stop()
		for {
			select {
			case <-mElected:
				mLedAt, mTerm = time.Now(), m.Term()
				time.Sleep(100 * time.Millisecond) // M acts as leader meanwhile
				return nil
			case <-outlive.C:
				return nil
			case <-keep.C:
				if busy {
					if _, err := tx.Exec("SELECT 1"); err != nil {
						return err
					}
				}
			}
		}
	})
	committed := time.Now()
	t.Logf("L's fenced transaction (term %d) ran %v and returned %v", term, committed.Sub(began).Round(time.Millisecond), err)
	switch {
	case mLedAt.IsZero():
		t.Logf("M did not lead while L's fenced transaction was open: the guarantee held")
	case err == nil:
		t.Errorf("fence broken: M led term %d from %s while L's fenced transaction of term %d was open, and that transaction committed at %s, %v later",
			mTerm, mLedAt.Format(tsFormat), term, committed.Format(tsFormat), committed.Sub(mLedAt).Round(time.Millisecond))
	case errors.Is(err, election.ErrNotLeader):
		t.Logf("M led, and L's commit was refused: %v", err)
	default:
		t.Logf("M led, and L's commit failed: %v", err)
	}
	var n int
	if err := dbA.QueryRowContext(ctx, "SELECT COUNT(*) FROM chaos_fenced_long WHERE term = ?", term).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if !mLedAt.IsZero() && n != 0 {
		t.Errorf("L's fenced row of term %d is in the table after M led", term)
	}
}
