package election_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/netfault"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// libfaketime finds Debian's libfaketime (package libfaketime), or "".
func libfaketime() string {
	m, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

// TestGaleraClockOffset: expiry compares the NOW(6) of the node that wrote
// the last renewal with the NOW(6) of the node of the candidate that takes
// over, so a clock offset between database nodes eats into the margin
// LeaseDuration - RenewDeadline. Node 2's clock runs ahead of node 1's by an
// offset set with libfaketime. Leader L renews through node 1 and is then
// cut off (a blackhole: its renewals never arrive); M campaigns through node
// 2 and takes the row once it expired by node 2's clock. L leads until
// RenewDeadline after it sent its last renewal; M leads from when node 2's
// clock says the lease ran out, which is the offset early. With an offset
// below the margin (here a quarter of it) the two never overlap; above it
// (here twice the margin) they overlap by about offset - margin.
func TestGaleraClockOffset(t *testing.T) {
	lib := libfaketime()
	if lib == "" {
		t.Skip("libfaketime is not installed (apt-get install -y libfaketime; make deps does): cannot offset a node's clock")
	}
	// Beside the package's other tests: it waits on its two nodes' starts
	// (45 s of the host's leg, alone) far more than it computes, and load
	// only delays M's election, which shortens an overlap, never makes one.
	// The overlap it expects above the margin (about 500 ms) is far above
	// such delays.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The offset file is read by node 2's server, which runs as user mysql.
	dir, err := os.MkdirTemp("", "sqlelect-faketime-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	offsetFile := filepath.Join(dir, "offset")
	setOffset := func(d time.Duration) {
		t.Helper()
		if err := os.WriteFile(offsetFile, []byte(fmt.Sprintf("%+.6f\n", d.Seconds())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setOffset(0)
	n1, n2 := startGalera2(t, ctx, nil, []string{"LD_PRELOAD=" + lib, "FAKETIME_TIMESTAMP_FILE=" + offsetFile,
		"FAKETIME_CACHE_DURATION=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"})
	db1 := testdb.Open(t, n1.DSN("sqlelect"))
	db2 := testdb.Open(t, n2.DSN("sqlelect"))

	const (
		lease  = 1500 * time.Millisecond
		rd     = 1000 * time.Millisecond
		margin = lease - rd
	)
	for _, tc := range []struct {
		offset  time.Duration
		overlap bool
	}{
		{margin / 4, false},
		{2 * margin, true},
	} {
		setOffset(tc.offset)
		// Wait for node 2 to read the file (cached for a second) and measure.
		var measured time.Duration
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			var t1, t2 int64
			if err := db1.QueryRowContext(ctx, "SELECT FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000)").Scan(&t1); err != nil {
				t.Fatal(err)
			}
			if err := db2.QueryRowContext(ctx, "SELECT FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000)").Scan(&t2); err != nil {
				t.Fatal(err)
			}
			measured = time.Duration(t2-t1) * time.Microsecond
			if (measured - tc.offset).Abs() < 50*time.Millisecond {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 2's clock is %v ahead of node 1's; want %v", measured, tc.offset)
			}
		}
		overlap := offsetOverlap(t, ctx, n1.Addr, db2, lease, rd)
		if overlap > 0 {
			t.Logf("node 2's clock %v ahead (margin %v): two leaders: L led for %v after M was elected", measured.Round(time.Millisecond), margin, overlap.Round(time.Millisecond))
		} else {
			t.Logf("node 2's clock %v ahead (margin %v): one leader: M was elected %v after L stood down", measured.Round(time.Millisecond), margin, (-overlap).Round(time.Millisecond))
		}
		switch {
		case !tc.overlap && overlap > 0:
			t.Errorf("offset %v below the margin %v: two leaders for %v", tc.offset, margin, overlap)
		case tc.overlap && overlap <= 0:
			t.Errorf("offset %v above the margin %v: no overlap (M elected %v after L stood down); the documented bound is wrong?", tc.offset, margin, -overlap)
		}
	}
}

// offsetOverlap runs leader L through a proxy to node1, then cuts it off
// and lets M on db2 take over; it returns how long L could still believe it
// led after M was elected (negative: the gap between them).
func offsetOverlap(t *testing.T, ctx context.Context, node1 string, db2 *sql.DB, lease, rd time.Duration) time.Duration {
	t.Helper()
	proxy, err := netfault.Start(node1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	db1 := testdb.Open(t, "root@tcp("+proxy.Addr()+")/sqlelect?parseTime=true&time_zone=%27%2B00%3A00%27")
	name := "clock-offset-" + randHex(4)
	cfg := func(id string) election.Config {
		return election.Config{Name: name, ID: id, LeaseDuration: lease, Tuning: election.TuningConfig{RenewDeadline: rd, RenewInterval: 200 * time.Millisecond, RetryInterval: 100 * time.Millisecond, QueryTimeout: 300 * time.Millisecond, DisableFastHandover: true}}
	}
	var mu sync.Mutex
	var lUntil, mElected time.Time
	lc := cfg("L")
	lc.Callbacks.OnDemoted = func(d election.Demotion) { mu.Lock(); lUntil = d.Until; mu.Unlock() }
	mc := cfg("M")
	mc.Callbacks.OnElected = func(context.Context, election.Leadership) { mu.Lock(); mElected = time.Now(); mu.Unlock() }
	l, err := election.NewTable(db1, lc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := election.NewTable(db2, mc)
	if err != nil {
		t.Fatal(err)
	}
	run := func(e election.Election) func() {
		rctx, rcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.Run(rctx) }()
		return func() { rcancel(); <-done }
	}
	stopL := run(l)
	defer stopL()
	for deadline := time.Now().Add(15 * time.Second); !l.IsLeader(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("L not elected")
		}
	}
	stopM := run(m)
	defer stopM()
	time.Sleep(lease / 2)
	proxy.Blackhole(true) // a partition: nothing passes, nothing is closed
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		done := !lUntil.IsZero() && !mElected.IsZero()
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("L demoted at %v, M elected at %v", lUntil, mElected)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return lUntil.Sub(mElected)
}
