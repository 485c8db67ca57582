package election_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
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
// start-up of 20,000 × 3 broke on it), and, set-based (floor.TakeAll),
// one statement locks and reads the batch's floor rows, where each election
// read its own, and one sends the batch's heartbeats. Each election still has one leader
// at a time, one term in its history, its floor at its term, and the
// marker still sums the floor rows, never found wrong and rebuilt.
func TestBatcherBatchesTakes(t *testing.T) {
	ctx, admin, dsn := generalLogServer(t)
	const n, replicas = 60, 3
	fleet := newBatchedFleet(n * replicas)
	// Statement deadlines a loaded machine does not miss: a batch that
	// outlived its deadline (the tests' 500 ms) sent its takes
	// alone, and those counted as unbatched (71 in one CI run, beside the
	// package's other tests six at once).
	fleet.lease = 10 * time.Second
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
			all = append(all, fleet.add(t, db, b, fmt.Sprintf("takes-%d", i), fmt.Sprintf("r%d", r)))
		}
	}
	for _, e := range all { // all at once, as a fleet's start
		runElection(t, ctx, e)
	}
	fleet.wait(t, ctx, n)
	var sums, seeds, singles, beats, singleBeats, led, history, floors, marker, sum int
	for _, q := range []struct {
		query string
		into  *int
	}{
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%SUM(CRC32(anchor))%'", &sums},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%term_floor FROM `service_election_floor` WHERE anchor = %'", &singles},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%INSERT INTO `service_election_floor` (anchor, term_floor, terms) SELECT%'", &seeds},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%INSERT INTO `service_election`(anchor%SELECT r.p_name%'", &beats},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%INSERT INTO `service_election`(anchor%VALUES(%' AND argument LIKE '%takes-%'", &singleBeats},
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
	if singles >= n/2 {
		t.Errorf("the first elections of %d names × %d read %d single floor rows: want fewer than %d (set-based)", n, replicas, singles, n/2)
	}
	if beats == 0 || singleBeats >= n/2 {
		t.Errorf("the first elections of %d names × %d sent %d heartbeat statements for many elections and %d for one: want some for many, and fewer than %d for one", n, replicas, beats, singleBeats, n/2)
	}
	t.Logf("%d first elections × %d replicas summed the floor table %d times, read %d single floor rows, and sent %d heartbeat statements for many elections and %d for one",
		n, replicas, sums, singles, beats, singleBeats)
}

// TestBatcherBatchesTakeovers (issue 36, a shard group's moves): when the
// leader of many elections resigns them all, the followers (a Batcher and
// a *sql.DB per replica, as processes) take them over many in one term
// floor's transaction, set-based (floor.TakeAll): one statement locks and
// reads the batch's floor rows, one raises them, and one each closes and
// appends their history, where each election sent each of these
// statements; and the heartbeats are one statement (Batcher.takeSet), from
// which each candidate learns what its own heartbeat would have told it:
// the winner of each election that it leads, without a lock delay (the row
// was released), the other replica's candidate that it does not. The leader's resignations give the rows up many in one
// transaction too (Batcher.execGive), where each sent its own. Each
// election still has one leader at a time, its floor at its new term, and
// a history whose newest term is its holder's and open, and the one
// before it resigned.
func TestBatcherBatchesTakeovers(t *testing.T) {
	ctx, admin, dsn := generalLogServer(t)
	const n = 60
	fleet := newBatchedFleet(3 * n)
	// A lease a loaded machine does not run out: r0 must hold every
	// election until it resigns, or a takeover before it would end r0's
	// term otherwise and count as one of the n awaited.
	fleet.lease = 10 * time.Second
	replica := func(r int) (stop func()) {
		db := testdb.Open(t, dsn)
		b, err := election.NewBatcher(db, election.BatcherOptions{Linger: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var stops []func()
		for i := range n {
			e := fleet.add(t, db, b, fmt.Sprintf("takeovers-%d", i), fmt.Sprintf("r%d", r))
			stops = append(stops, runElection(t, ctx, e))
		}
		return func() {
			for _, s := range stops {
				go s() // resign all at once
			}
		}
	}
	stop := replica(0)
	fleet.wait(t, ctx, n)
	replica(1)
	replica(2)
	if _, err := admin.ExecContext(ctx, "TRUNCATE mysql.general_log"); err != nil {
		t.Fatal(err)
	}
	if k := len(fleet.elected); k > 0 {
		t.Fatalf("%d elections changed hands before r0 resigned", k)
	}
	stop()
	fleet.wait(t, ctx, n)
	var sets, singles, beats, singleBeats, gives, singleGives, rowReads, moved, floors int
	for _, q := range []struct {
		query string
		into  *int
	}{
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%FROM `service_election_floor` FORCE INDEX (PRIMARY) WHERE anchor IN (%'", &sets},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%term_floor FROM `service_election_floor` WHERE anchor = %'", &singles},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%INSERT INTO `service_election`(anchor%SELECT r.p_name%'", &beats},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%INSERT INTO `service_election`(anchor%VALUES(%' AND argument LIKE '%takeovers-%'", &singleBeats},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE 'UPDATE `service_election` FORCE INDEX (PRIMARY) SET released = 1%'", &gives},
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%`service_election_history` SET ended_at%WHERE anchor = %'", &singleGives},
		// A take's read of its row after the commit (tableBackend.confirm).
		{"SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE '%SELECT %FROM `service_election` WHERE anchor = %'", &rowReads},
		// The term before the new one resigned (r0's last: under load
		// r0 may have claimed its own row once before), the new one its
		// holder's and open.
		{`SELECT COUNT(*) FROM service_election e
JOIN service_election_history h1 ON h1.anchor = e.anchor AND h1.ended = 'resigned' AND h1.ended_at IS NOT NULL
  AND h1.term = (SELECT MAX(h.term) FROM service_election_history h WHERE h.anchor = e.anchor AND h.term < e.term)
JOIN service_election_history h2 ON h2.anchor = e.anchor AND h2.term = e.term AND h2.holder = e.service_id COLLATE utf8mb4_bin AND h2.ended IS NULL
WHERE e.anchor LIKE 'takeovers-%' AND e.service_id <> 'r0'`, &moved},
		// The floor at the new term, its count at the history's newest slot.
		{`SELECT COUNT(*) FROM service_election e JOIN service_election_floor f ON f.anchor = e.anchor AND f.term_floor = e.term
  AND f.terms + 1 = (SELECT COUNT(*) FROM service_election_history h WHERE h.anchor = e.anchor) WHERE e.anchor LIKE 'takeovers-%'`, &floors},
	} {
		if err := admin.QueryRowContext(ctx, q.query).Scan(q.into); err != nil {
			t.Fatalf("%s: %v", q.query, err)
		}
	}
	if moved != n || floors != n {
		t.Errorf("of %d elections taken over, %d have a history of a resigned term and an open one, %d their floor at the new term and its count at the newest slot: want all", n, moved, floors)
		for i := range n {
			logHistory(t, ctx, admin, fmt.Sprintf("takeovers-%d", i))
		}
	}
	if sets == 0 || singles >= n/2 {
		t.Errorf("%d takeovers read %d batches of floor rows and %d single floor rows: want batches, and fewer than %d single", n, sets, singles, n/2)
	}
	if beats == 0 || singleBeats >= n/2 {
		t.Errorf("%d takeovers sent %d heartbeat statements for many elections and %d for one: want some for many, and fewer than %d for one", n, beats, singleBeats, n/2)
	}
	if gives == 0 || singleGives >= n/2 {
		t.Errorf("%d resignations sent %d batches of give-ups and ended %d terms alone: want batches, and fewer than %d alone", n, gives, singleGives, n/2)
	}
	if rowReads >= n/2 {
		t.Errorf("%d takeovers read %d election rows one by one: want fewer than %d (their reads batched)", n, rowReads, n/2)
	}
	t.Logf("%d takeovers read %d batches of floor rows, %d single floor rows and %d single election rows, and sent %d heartbeat statements for many elections and %d for one; the resignations sent %d batches of give-ups and ended %d terms alone",
		n, sets, singles, rowReads, beats, singleBeats, gives, singleGives)
}

// batchedFleet is the candidates of many elections over replicas that
// each have a Batcher; each election reports when one is elected while
// another of its candidates believes it leads.
type batchedFleet struct {
	lease    time.Duration // if set, the candidates' lease, and their deadlines scaled to it
	mu       sync.Mutex
	overlaps []string
	cands    map[string][]*election.Candidate
	elected  chan string // the election's name, at each election
}

func newBatchedFleet(size int) *batchedFleet {
	return &batchedFleet{cands: map[string][]*election.Candidate{}, elected: make(chan string, size)}
}

// add is replica id's candidate in election name, on db and b.
func (f *batchedFleet) add(t *testing.T, db *sql.DB, b *election.Batcher, name, id string) *election.Candidate {
	t.Helper()
	cfg := sessionClockConfig(name, id)
	if f.lease > 0 {
		cfg.LeaseDuration = f.lease
		cfg.Tuning.RenewDeadline = f.lease * 6 / 10
		cfg.Tuning.QueryTimeout = f.lease / 4
	}
	cfg.Tuning.Batcher = b
	cfg.Callbacks.OnElected = func(context.Context, election.Leadership) {
		f.mu.Lock()
		for _, o := range f.cands[name] {
			if o.ID() != id && o.IsLeader() {
				f.overlaps = append(f.overlaps, fmt.Sprintf("%s: %s elected while %s leads", name, id, o.ID()))
			}
		}
		f.mu.Unlock()
		f.elected <- name
	}
	e, err := election.NewTable(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.cands[name] = append(f.cands[name], e)
	f.mu.Unlock()
	return e
}

// wait waits until n elections have each had a leader elected (one that
// lost its lease on a loaded machine and was elected again counts once),
// then reports the overlaps seen.
func (f *batchedFleet) wait(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for led := map[string]bool{}; len(led) < n; {
		select {
		case name := <-f.elected:
			led[name] = true
		case <-ctx.Done():
			t.Fatalf("%d of %d elections led: %v", len(led), n, ctx.Err())
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.overlaps {
		t.Error("two leaders: " + o)
	}
}

// logHistory logs election name's row and history, to show a failure.
func logHistory(t *testing.T, ctx context.Context, db *sql.DB, name string) {
	t.Helper()
	var row string
	if err := db.QueryRowContext(ctx, "SELECT CONCAT_WS(' ', service_id, term, released) FROM service_election WHERE anchor = ?", name).Scan(&row); err != nil {
		t.Logf("%s: %v", name, err)
	}
	rows, err := db.QueryContext(ctx, "SELECT CONCAT_WS(' ', term, holder, began, IFNULL(ended, '-')) FROM service_election_history WHERE anchor = ? ORDER BY term", name)
	if err != nil {
		t.Logf("%s: %v", name, err)
		return
	}
	defer rows.Close()
	var terms []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Logf("%s: %v", name, err)
			return
		}
		terms = append(terms, s)
	}
	t.Logf("%s: row %q, history %q", name, row, terms)
}

// TestBatcherTakeLetFinish: a candidate whose Run ends while its take
// waits in a batch lets the take finish, does not lead, and gives the row
// up. Cut off, the take committed after Run returned, unknown to the
// candidate, and the row named it, live: the next candidate with its ID
// waited out a lock delay (a shard group, which stops candidates as its
// plan changes, came up in 20 s instead of 3 so). The take waits on the
// row, locked elsewhere until Run's context has ended.
func TestBatcherTakeLetFinish(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	const name = "let-finish"
	lock := lockedExpiredRow(t, ctx, db, name)
	b, err := election.NewBatcher(db, election.BatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The defaults: a statement may wait seconds on a row lock (with the
	// suite's 500 ms, none).
	cfg := election.Config{Name: name, ID: "me", Tuning: election.TuningConfig{Batcher: b}}
	var elected atomic.Bool
	cfg.Callbacks.OnElected = func(context.Context, election.Leadership) { elected.Store(true) }
	e, err := election.NewTable(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var runErr error
	done := make(chan struct{})
	go func() { defer close(done); runErr = e.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	admin := testdb.Open(t, testdb.AdminDSN(t)) // sees every transaction
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// The take's heartbeat, held up by the row lock for a second (the
	// preflight's, on other rows, never take that long).
	for waiting := 0; waiting == 0; {
		if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE '%INSERT%INTO `service_election`(%' AND time >= 1").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the take never waited on the locked row")
		}
	}
	stop()
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if <-done; runErr != nil {
		t.Fatal(runErr)
	}
	var holder string
	var released bool
	for holder != "me" {
		if err := db.QueryRowContext(ctx, `SELECT service_id, released FROM service_election WHERE anchor = ?`, name).Scan(&holder, &released); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the take never committed: the row names %q", holder)
		}
	}
	if !released {
		t.Error("the take committed after Run returned, and the row names the candidate, live: its next candidate would wait out a lock delay")
	}
	if elected.Load() {
		t.Error("the candidate led after Run's context ended")
	}
}

// TestBatcherTakeSeesRowsAsLocked (safety): a batch of takes learns what
// each heartbeat did from its rows read before and after the heartbeats'
// statement (internal/takeset). The read after must see each row as it is,
// not as the transaction's snapshot had it: a batch with a first election
// reads the floor's sum (a plain read, which fixes the snapshot under
// REPEATABLE READ) before it locks its rows, and a row its live holder
// renewed in between, read from that snapshot, would count as changed by a
// heartbeat that changed nothing, and a candidate would believe it renewed
// or took a row it did not. F's batch holds a first election and L's live
// row, which L renews while the batch waits for its lock: F's heartbeat
// on it must report no change.
func TestBatcherTakeSeesRowsAsLocked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	name := "take-snapshot-" + randHex(4)
	live, first := name+"-live", name+"-first"
	for _, q := range []string{
		`INSERT INTO service_election (anchor, service_id, term, term_started_at, last_seen_active, lease_ms) VALUES (?, 'L', 7, NOW(6), NOW(6), 60000)`,
		`INSERT INTO service_election_floor (anchor, term_floor) VALUES (?, 7)`,
	} {
		if _, err := db.ExecContext(ctx, q, live); err != nil {
			t.Fatal(err)
		}
	}
	renewal, err := db.BeginTx(ctx, nil) // L's renewal, committed while F's batch waits
	if err != nil {
		t.Fatal(err)
	}
	defer renewal.Rollback() //nolint:errcheck // committed below
	if _, err := renewal.ExecContext(ctx, `UPDATE service_election SET last_seen_active = NOW(6) WHERE anchor = ?`, live); err != nil {
		t.Fatal(err)
	}
	b, err := election.NewBatcher(db, election.BatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n    []int64
		errs []error
		err  error
	}
	done := make(chan result, 1)
	go func() {
		n, errs, err := election.TakeBatch(ctx, b, "F", 10*time.Second, []string{first, live})
		done <- result{n, errs, err}
	}()
	if r, ended := testdb.AwaitLockWait(t, ctx, db, done); ended { // F's batch waits for L's row
		t.Fatalf("F's batch ended before it was seen waiting for L's row: affected %v, errors %v, %v", r.n, r.errs, r.err)
	}
	if err := renewal.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.errs[0] != nil || r.errs[1] != nil {
		t.Fatalf("the batch's error is %v, the heartbeats' %v", r.err, r.errs)
	}
	if r.n[1] != 0 {
		t.Errorf("F's heartbeat on L's live row, renewed while F's batch waited for it, reports %d affected rows: want 0 (it changed nothing)", r.n[1])
	}
	if r.n[0] != 1 {
		t.Errorf("F's first election reports %d affected rows: want 1 (inserted)", r.n[0])
	}
}
