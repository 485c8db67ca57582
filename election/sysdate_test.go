package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestSysdateIsNowAfterFailover (issue 31, item 4): the server a pool
// reaches is restarted with --sysdate-is-now under running candidates (as
// a failover to a server so configured would do), and application code
// leaves SET @@timestamp, 5 s ahead, on the follower's connection. Run
// checked the option only at its start: the follower read the leader's live
// row as expired by its session's clock, and took it while the leader still
// believed. Every statement now checks that SYSDATE(6) is not NOW(6)
// (dbclock.Trusted): nobody takes the row, and each Run stops with
// ErrSysdateIsNow.
func TestSysdateIsNowAfterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	// A server of its own, and it waits on the server's restart (MySQL
	// 9.7's takes seconds) more than it computes: beside the package's
	// other waiting tests. The deadline below starts when it runs.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--innodb-buffer-pool-size=64M"}
	srv, dsn := testdb.OwnServer(t, ctx, args...)
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
