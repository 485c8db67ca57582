package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionprom"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// A candidate that holds nothing, named by a live row that carries a planned
// change (transfer_to; say its process restarted while an operator's
// request was pending), may not claim the row: it looks again at its retry
// interval, not in a loop of reads and heartbeats until the row expires.
func TestNamedCandidateWithPendingRequestWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	const name = "pending"
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election
  (anchor, service_id, last_seen_active, term, lease_ms, released, acquired, backend, transfer_to)
  VALUES (?, 'me', NOW(6), 5, 10000, 0, 'insert', 'table', 'other')`, name); err != nil {
		t.Fatal(err)
	}
	m := electionprom.NewMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	const retry, window = 100 * time.Millisecond, 800 * time.Millisecond
	e, err := election.NewTable(db, election.Config{Name: name, ID: "me", LeaseDuration: 3 * time.Second,
		Tuning: election.TuningConfig{RenewDeadline: 2 * time.Second, RenewInterval: retry, RetryInterval: retry}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithTimeout(ctx, window)
	defer stop()
	if err := e.Run(rctx); err != nil {
		t.Fatal(err)
	}
	if e.IsLeader() {
		t.Fatal("led a row with a request pending")
	}
	looks := heartbeats(t, reg, name)
	t.Logf("%d looks at the election in %v (retry interval %v)", looks, window, retry)
	if max := uint64(2 * window / retry); looks > max {
		t.Fatalf("%d looks at the election in %v, want at most %d: it did not wait between looks", looks, window, max)
	}
}

// heartbeats returns how many statements the candidates of election name
// timed (sqlelect_heartbeat_duration_seconds' sample count).
func heartbeats(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sqlelect_heartbeat_duration_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "election" && l.GetValue() == name {
					return mt.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatalf("no heartbeat histogram for %s", name)
	return 0
}
