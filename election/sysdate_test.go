package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestRunRefusesSysdateIsNow: on a server started with --sysdate-is-now,
// SYSDATE() is NOW(), which a session's SET @@timestamp moves, so the
// clock every statement writes and judges leases by (SYSDATE(6)) would move
// with a session clock left on the pool (see TestSessionTimestampOnPool)
// again. Run must
// refuse such a server at preflight with ErrSysdateIsNow, on both backends,
// instead of campaigning. The server is a dedicated one, of the kind
// $SQLELECT_TEST_SERVER picks.
func TestRunRefusesSysdateIsNow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := mysqld.Start(ctx, mysqld.Options{
		ExtraArgs: []string{"--sysdate-is-now", "--innodb-buffer-pool-size=64M"},
		Logf:      t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	admin := testdb.Open(t, srv.DSN(""))
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE sqlelect"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("sqlelect")
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	// The doctor fails it too (issue 31: it said safe).
	r := runCheck(t, db, election.Config{})
	for _, b := range []string{election.BackendTable, election.BackendLock} {
		if f, _ := r.Find(election.PropSysdate); f.StatusFor(b) != election.CheckFail || r.Safe(b) {
			t.Errorf("doctor, %s backend: %s is %s", b, election.PropSysdate, f.StatusFor(b))
		}
	}
	for _, tc := range []struct {
		name string
		new  func(election.Config) (election.Election, error)
	}{
		{"table", func(c election.Config) (election.Election, error) { return election.NewTable(db, c) }},
		{"lock", func(c election.Config) (election.Election, error) { return election.NewLock(db, c) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Long enough to be elected, were the server not refused.
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			cfg := sessionClockConfig("sysdate-"+randHex(4), "A")
			cfg.Tuning.DisableLockDelay = true
			elected := make(chan struct{}, 1)
			cfg.Callbacks.OnElected = func(context.Context, election.Leadership) {
				select {
				case elected <- struct{}{}:
				default:
				}
			}
			e, err := tc.new(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = e.Run(rctx)
			if !errors.Is(err, election.ErrSysdateIsNow) {
				t.Errorf("Run = %v, want %v", err, election.ErrSysdateIsNow)
			}
			if rctx.Err() != nil {
				t.Errorf("Run returned only when its context ended")
			}
			select {
			case <-elected:
				t.Error("elected on a server with --sysdate-is-now")
			default:
			}
		})
	}
}

// TestSysdateIsNowAfterFailover (issue 31, item 4): the server a pool
// reaches is restarted with --sysdate-is-now under running candidates (as
// a failover to a server so configured would do), and application code
// leaves SET @@timestamp, 5 s ahead, on the follower's connection. Run
// checked the option only at its start: the follower read the leader's live
// row as expired by its session's clock, and took it while the leader still
// believed. Every statement now checks that SYSDATE(6) is not NOW(6)
// (trustedSQL): nobody takes the row, and each Run stops with
// ErrSysdateIsNow.
func TestSysdateIsNowAfterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--innodb-buffer-pool-size=64M"}
	srv, dsn := ownServer(t, ctx, args...)
	name := "failover-" + randHex(4)
	lpool, fpool := testdb.Open(t, dsn), onePool(t, ctx, dsn)
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
	runs := make(chan error, 2)
	run := func(e election.Election) {
		rctx, stop := context.WithCancel(ctx)
		t.Cleanup(stop)
		go func() { runs <- e.Run(rctx) }()
	}
	run(l)
	w.waitElected(t, ctx, "L")
	run(f)
	if err := srv.RestartWith(ctx, append(args, "--sysdate-is-now")...); err != nil {
		t.Fatal(err)
	}
	tamper(t, ctx, fpool, "SET @@timestamp = UNIX_TIMESTAMP() + 5")
	for range 2 {
		select {
		case err := <-runs:
			if !errors.Is(err, election.ErrSysdateIsNow) {
				t.Errorf("Run = %v, want %v", err, election.ErrSysdateIsNow)
			}
		case <-ctx.Done():
			t.Fatalf("Run did not stop: %v", ctx.Err())
		}
	}
	w.check(t)
}
