package election_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestBatcherBatchesTakes (issue 33, batched takeovers): the first
// elections of many new names, two or three replicas each (a Batcher and a
// *sql.DB per replica, as three processes), are assigned their terms many
// in one term floor's transaction: the floor's marker is summed once a
// batch, where each first election summed the whole floor table (the
// start-up of 20,000 × 3 broke on it). Each election still has one leader
// at a time, one term in its history, its floor at its term, and the
// marker still sums the floor rows, never found wrong and rebuilt.
func TestBatcherBatchesTakes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, dsn := generalLogServer(t, ctx)
	const n, replicas = 60, 3
	var mu sync.Mutex
	var overlaps []string
	cands := map[string][]*election.Candidate{}
	elected := make(chan struct{}, n*replicas)
	var all []*election.Candidate
	for r := range replicas {
		db := testdb.Open(t, dsn)
		b, err := election.NewBatcher(db, election.BatcherOptions{Linger: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if i%4 == r {
				// Not every replica campaigns in every election, so
				// that batches differ: one begins while another
				// commits floor rows of names it does not hold.
				continue
			}
			name, id := fmt.Sprintf("takes-%d", i), fmt.Sprintf("r%d", r)
			cfg := sessionClockConfig(name, id)
			cfg.Tuning.Batcher = b
			cfg.Callbacks.OnElected = func(context.Context, election.Leadership) {
				mu.Lock()
				for _, o := range cands[name] {
					if o.ID() != id && o.IsLeader() {
						overlaps = append(overlaps, fmt.Sprintf("%s: %s elected while %s leads", name, id, o.ID()))
					}
				}
				mu.Unlock()
				elected <- struct{}{}
			}
			e, err := election.NewTable(db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			cands[name] = append(cands[name], e)
			all = append(all, e)
		}
	}
	for _, e := range all { // all at once, as a fleet's start
		runElection(t, ctx, e)
	}
	for i := range n {
		select {
		case <-elected:
		case <-ctx.Done():
			t.Fatalf("%d of %d elections led: %v", i, n, ctx.Err())
		}
	}
	mu.Lock()
	for _, o := range overlaps {
		t.Error("two leaders: " + o)
	}
	mu.Unlock()
	var sums, seeds, led, history, floors, marker, sum int
	for _, q := range []struct {
		query string
		into  *int
	}{
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%SUM(CRC32(anchor))%'", &sums},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%INSERT INTO `service_election_floor` (anchor, term_floor, terms) SELECT%'", &seeds},
		{"SELECT COUNT(*) FROM service_election WHERE anchor LIKE 'takes-%' AND term > 0", &led},
		{"SELECT COUNT(*) FROM service_election e JOIN service_election_history h ON h.anchor = e.anchor AND h.term = e.term WHERE e.anchor LIKE 'takes-%'", &history},
		{"SELECT COUNT(*) FROM service_election e JOIN service_election_floor f ON f.anchor = e.anchor AND f.term_floor = e.term WHERE e.anchor LIKE 'takes-%'", &floors},
		{"SELECT term_floor FROM service_election_floor WHERE anchor = ''", &marker},
		{"SELECT SUM(CRC32(anchor)) FROM service_election_floor WHERE anchor <> ''", &sum},
	} {
		if err := admin.QueryRowContext(ctx, q.query).Scan(q.into); err != nil {
			t.Fatalf("%s: %v", q.query, err)
		}
	}
	if led != n || history != n || floors != n {
		t.Errorf("of %d elections, %d have a term, %d its history row, %d their floor at the term: want all", n, led, history, floors)
	}
	if marker != sum {
		t.Errorf("the floor's marker is %d, the floor rows sum to %d", marker, sum)
	}
	if seeds > 1 {
		// The first creates the marker; another means a transaction
		// found it wrong: its sum missed floor rows others had committed.
		t.Errorf("the floor's marker was rebuilt %d times, want at most once (its creation)", seeds)
	}
	if sums >= n/2 {
		t.Errorf("the first elections of %d names × %d summed the floor table %d times: want fewer than %d (batched)", n, replicas, sums, n/2)
	}
	t.Logf("%d first elections × %d replicas summed the floor table %d times", n, replicas, sums)
}
