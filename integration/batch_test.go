package integration

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/testdb"
)

// newBatched makes a table candidate that shares a Batcher per *sql.DB, as
// a process running many elections would.
func newBatched() func(db *sql.DB, cfg election.Config) (*election.Candidate, error) {
	var mu sync.Mutex
	batchers := map[*sql.DB]*election.Batcher{}
	return func(db *sql.DB, cfg election.Config) (*election.Candidate, error) {
		mu.Lock()
		b := batchers[db]
		if b == nil {
			var err error
			if b, err = election.NewBatcher(db, election.BatcherOptions{Table: cfg.Table, QueryTimeout: cfg.Tuning.QueryTimeout}); err != nil {
				mu.Unlock()
				return nil, err
			}
			batchers[db] = b
		}
		mu.Unlock()
		cfg.Tuning.Batcher = b
		return election.NewTable(db, cfg)
	}
}

// batchFleet is n elections with one candidate each in k "processes", each
// process with its own *sql.DB and Batcher.
type batchFleet struct {
	names   []string
	cands   [][]election.Election // [process][election]
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	errs    chan error
	elected func() map[string]int // OnElected calls per election
	// running returns how many elections have exactly one leadership whose
	// OnElected has started and whose OnDemoted has not been called.
	running func() int
}

// The fleet's timings. 600 candidates under the race detector on a 2-core
// machine, with other test packages running beside them, can stall for over
// a second (a CI run saw a leader miss a 1.2 s renew deadline at steady
// state): the deadlines leave room for that. The renew interval is each
// test's: at 200 ms, 600 race-instrumented candidates alone keep most of a
// core busy, and a run beside other suites still missed a 4 s deadline;
// the large fleet renews every second, the small one every 200 ms to keep
// transfers quick.
const (
	fleetLease         = 6 * time.Second
	fleetRenewDeadline = 4 * time.Second
	fleetQueryTimeout  = 2 * time.Second
)

// startFleet starts n elections × k processes renewing every interval.
func startFleet(t *testing.T, dsn string, n, k int, interval time.Duration) *batchFleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &batchFleet{cancel: cancel, errs: make(chan error, n*k)}
	t.Cleanup(func() {
		cancel()
		f.wg.Wait()
		close(f.errs)
		for err := range f.errs {
			t.Errorf("Run: %v", err)
		}
	})
	for i := range n {
		f.names = append(f.names, fmt.Sprintf("shard-%04d", i))
	}
	var mu sync.Mutex
	counts, demoted := map[string]int{}, map[string]int{}
	for p := range k {
		db := testdb.Open(t, dsn)
		db.SetMaxOpenConns(8)
		b, err := election.NewBatcher(db, election.BatcherOptions{QueryTimeout: fleetQueryTimeout})
		if err != nil {
			t.Fatal(err)
		}
		var row []election.Election
		for _, name := range f.names {
			e, err := election.NewTable(db, election.Config{
				Name: name, ID: fmt.Sprintf("proc-%d", p), Tuning: election.TuningConfig{Batcher: b, RenewDeadline: fleetRenewDeadline, RenewInterval: interval, RetryInterval: interval, QueryTimeout: fleetQueryTimeout, DisableLockDelay: true},
				LeaseDuration: fleetLease, Callbacks: election.Callbacks{
					OnElected: func(context.Context, election.Leadership) {
						mu.Lock()
						counts[name]++
						mu.Unlock()
					},
					OnDemoted: func(election.Demotion) {
						mu.Lock()
						demoted[name]++
						mu.Unlock()
					},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			row = append(row, e)
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				if err := e.Run(ctx); err != nil {
					f.errs <- err
				}
			}()
		}
		f.cands = append(f.cands, row)
	}
	f.elected = func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(counts))
		for k, v := range counts {
			out[k] = v
		}
		return out
	}
	f.running = func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for name, c := range counts {
			if c-demoted[name] == 1 {
				n++
			}
		}
		return n
	}
	return f
}

// leaders returns, per election, the processes that believe they lead.
func (f *batchFleet) leaders() [][]int {
	out := make([][]int, len(f.names))
	for p, row := range f.cands {
		for i, e := range row {
			if e.IsLeader() {
				out[i] = append(out[i], p)
			}
		}
	}
	return out
}

// waitAllLed waits until every election has exactly one leader.
func (f *batchFleet) waitAllLed(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		missing, multi := 0, 0
		for _, ls := range f.leaders() {
			switch {
			case len(ls) == 0:
				missing++
			case len(ls) > 1:
				multi++
			}
		}
		if multi > 0 {
			t.Fatalf("%d elections with more than one leader", multi)
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d elections without a leader after %v", missing, len(f.names), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCallbacks waits until every election's OnElected has caught up with
// the leaders IsLeader shows: OnElected runs in a goroutine of its own,
// started after IsLeader turned true, so a count read as soon as
// waitAllLed returns may miss the last few. Call it after waitAllLed.
func (f *batchFleet) waitCallbacks(t *testing.T, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); f.running() != len(f.names); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d elections have one running leadership by the callbacks %v after every one had a leader",
				f.running(), len(f.names), within)
		}
	}
}

// TestBatcherManyElections: 200 elections with 3 candidates in 3 processes
// sharing a Batcher each: every election gets one leader and keeps it; a
// row locked by another transaction only affects its own election.
func TestBatcherManyElections(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a server")
	}
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	admin := testdb.Open(t, dsn)
	status := func() (q float64) {
		// SHOW GLOBAL STATUS works on MySQL and MariaDB alike
		// (information_schema.GLOBAL_STATUS is MariaDB's only).
		var name string
		if err := admin.QueryRow("SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &q); err != nil {
			t.Fatal(err)
		}
		return q
	}

	const n, k, interval = 200, 3, time.Second
	f := startFleet(t, dsn, n, k, interval)
	f.waitAllLed(t, 30*time.Second)
	f.waitCallbacks(t, 5*time.Second)
	base := f.elected()

	q0, t0 := status(), time.Now()
	time.Sleep(2 * time.Second)
	q1, t1 := status(), time.Now()
	f.waitAllLed(t, 0)
	if got := f.elected(); fmt.Sprint(got) != fmt.Sprint(base) {
		t.Errorf("leadership changed at steady state")
	}
	perSec := (q1 - q0) / t1.Sub(t0).Seconds()
	unbatched := float64(n*k) / interval.Seconds()
	t.Logf("%d elections x %d candidates: %.0f statements/s on the server (one statement per heartbeat would be about %.0f/s)", n, k, perSec, unbatched)

	// Lock one election's row for longer than the renew deadline: only that
	// election loses its leader; the others, renewed in the same batches,
	// keep theirs.
	locked := f.names[7]
	tx, err := admin.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT term FROM service_election WHERE anchor = ? FOR UPDATE", locked); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fleetRenewDeadline + 1500*time.Millisecond)
	ls := f.leaders()
	if len(ls[7]) != 0 {
		t.Errorf("election %s: leader %v kept leading with its row locked past the renew deadline", locked, ls[7])
	}
	_ = tx.Rollback()
	after := f.elected()
	for i, name := range f.names {
		if i != 7 && after[name] != base[name] {
			t.Errorf("election %s changed leader while another election's row was locked", name)
		}
		if i != 7 && len(ls[i]) != 1 {
			t.Errorf("election %s has leaders %v while another election's row was locked", name, ls[i])
		}
	}
	f.waitAllLed(t, fleetLease+10*time.Second)
}

// TestBatcherTransfer: operators' transfer requests reach leaders whose
// renewals are batched (the batch leaves a row with a request to the
// election's own heartbeat, which acts on it).
func TestBatcherTransfer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a server")
	}
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	admin := testdb.Open(t, dsn)
	const n, k, interval = 40, 2, 200 * time.Millisecond
	f := startFleet(t, dsn, n, k, interval)
	f.waitAllLed(t, 30*time.Second)
	ls := f.leaders()
	start := time.Now()
	want := map[int]int{} // election -> process asked to lead it
	for i := 0; i < n; i += 4 {
		to := 1 - ls[i][0]
		want[i] = to
		if _, err := ops(admin).Transfer(context.Background(), f.names[i], fmt.Sprintf("proc-%d", to)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ls, done := f.leaders(), 0
		for i, to := range want {
			if len(ls[i]) == 1 && ls[i][0] == to {
				done++
			}
		}
		if done == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d transfers done 5s after the requests (renew interval %v)", done, len(want), interval)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%d transfers between batched leaders done %v after the requests", len(want), time.Since(start).Round(time.Millisecond))
	f.waitAllLed(t, 0)
}
