package election

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/netfault"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/takeset"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestBatcherPartitionFreesRowLocks (issue 12, item 5): the network is cut
// just after a batch of renewals ran its SELECT … FOR UPDATE SKIP LOCKED
// (the UPDATE never reaches the server), without the server seeing a close.
// The orphaned session holds the rows' locks until the server drops it:
// with the server's wait_timeout (8 hours by default) nobody could renew or
// take those elections. The Batcher's session is bounded, so within about
// QueryTimeout and a few seconds another connection can update the rows.
func TestBatcherPartitionFreesRowLocks(t *testing.T) {
	const queryTimeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	direct := testdb.Open(t, dsn)

	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px, err := netfault.Start(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	// The partition: nothing passes, nothing is closed, from the batch's
	// UPDATE on (the UPDATE never reaches the server).
	cut := px.BlackholeOn([]byte("SET last_seen_active = " + dbclock.Now + " WHERE anchor IN"))
	cutAtc := make(chan time.Time, 1)
	go func() { <-cut; cutAtc <- time.Now() }()
	cfg.Addr = px.Addr()
	proxied := testdb.Open(t, cfg.FormatDSN())

	var names []any
	var reqs []renewReq
	for i := range 2 * minRenewBatch {
		name := fmt.Sprintf("part-%d", i)
		if _, err := direct.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms)
VALUES (?, 'me', NOW(6), 7, NOW(6), 10000)`, name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		reqs = append(reqs, renewReq{Ctx: ctx, Name: name, ID: "me", Term: 7})
	}
	b, err := NewBatcher(proxied, BatcherOptions{QueryTimeout: queryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, queryTimeout)
	_, err = b.execRenew(bctx, reqs)
	bcancel()
	var cutAt time.Time
	select {
	case cutAt = <-cutAtc:
	case <-time.After(time.Second):
		t.Fatalf("the batch never sent its UPDATE (err %v)", err)
	}
	t.Logf("partitioned before the batch's UPDATE; the batch returned %v", err)

	// Another client updates the rows, giving up on a lock after 1 s.
	probe, err := direct.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if _, err := probe.ExecContext(ctx, `SET SESSION innodb_lock_wait_timeout = 1`); err != nil {
		t.Fatal(err)
	}
	limit := queryTimeout + 5*time.Second
	for {
		_, err := probe.ExecContext(ctx, `UPDATE service_election SET value = 'free' WHERE anchor IN (`+placeholders(len(names))+`)`, names...)
		since := time.Since(cutAt)
		if err == nil {
			t.Logf("rows free %v after the partition", since.Round(10*time.Millisecond))
			return
		}
		if mysqlerr.Errno(err) != 1205 {
			t.Fatal(err)
		}
		if since > limit {
			var n int
			_ = direct.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_rows_locked > 0`).Scan(&n)
			t.Fatalf("rows still locked %v after the partition (%d transactions hold row locks): %v", since.Round(10*time.Millisecond), n, err)
		}
	}
}

// TestBatcherCommitEndsWithItsContext (issue 22): a batch of renewals whose
// COMMIT gets no answer (here a partition from the COMMIT on; on Galera a
// commit stalls until a dead node is evicted) returns when its context
// ends, as the floor's transaction does: database/sql's Tx.Commit takes no
// context and would wait for the answer, past the heartbeat's deadline.
func TestBatcherCommitEndsWithItsContext(t *testing.T) {
	const queryTimeout = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	direct := testdb.Open(t, dsn)

	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px, err := netfault.Start(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	// COM_QUERY (3) "COMMIT": not READ COMMITTED, which the batch sets
	// first.
	cut := px.BlackholeOn([]byte("\x03COMMIT"))
	cfg.Addr = px.Addr()
	proxied := testdb.Open(t, cfg.FormatDSN())

	prefix := fmt.Sprintf("commit-%d-", time.Now().UnixNano())
	var reqs []renewReq
	for i := range minRenewBatch {
		name := prefix + fmt.Sprint(i)
		if _, err := direct.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms)
VALUES (?, 'me', NOW(6), 7, NOW(6), 10000)`, name); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, renewReq{Ctx: ctx, Name: name, ID: "me", Term: 7})
	}
	b, err := NewBatcher(proxied, BatcherOptions{QueryTimeout: queryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, queryTimeout)
	defer bcancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := b.execRenew(bctx, reqs)
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("the batch returned %v after %v", err, time.Since(start).Round(time.Millisecond))
		if err == nil {
			t.Fatal("the batch succeeded without an answer to its COMMIT")
		}
		select {
		case <-cut:
		default:
			t.Fatalf("the batch never sent its COMMIT (err %v)", err)
		}
	case <-time.After(queryTimeout + 5*time.Second):
		t.Fatalf("the batch still waits for its COMMIT %v after it began, its context ended at %v",
			time.Since(start).Round(time.Millisecond), queryTimeout)
	}
}

// TestBatcherRenewsReadCommitted: the batch's transaction, begun with BEGIN
// on its connection (inConnTx) after SET TRANSACTION ISOLATION LEVEL READ
// COMMITTED, runs under READ COMMITTED on every server (see readCommitted),
// as InnoDB reports it while the transaction holds the rows.
func TestBatcherRenewsReadCommitted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	direct := testdb.Open(t, dsn)

	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px, err := netfault.Start(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	cfg.Addr = px.Addr()
	proxied := testdb.Open(t, cfg.FormatDSN())
	proxied.SetMaxOpenConns(1) // the batch runs on the connection read here
	var id uint64
	if err := proxied.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// Before the batch's UPDATE reaches the server: its SELECT … FOR
	// UPDATE began the transaction.
	isolation := make(chan string, 1)
	px.On([]byte("SET last_seen_active = "+dbclock.Now+" WHERE anchor IN"), func() {
		var level string
		err := direct.QueryRowContext(ctx, `SELECT trx_isolation_level FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`, id).Scan(&level)
		if err != nil {
			level = err.Error()
		}
		isolation <- level
	})

	prefix := fmt.Sprintf("rc-%d-", time.Now().UnixNano())
	var reqs []renewReq
	for i := range minRenewBatch {
		name := prefix + fmt.Sprint(i)
		if _, err := direct.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms)
VALUES (?, 'me', NOW(6), 7, NOW(6), 10000)`, name); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, renewReq{Ctx: ctx, Name: name, ID: "me", Term: 7})
	}
	b, err := NewBatcher(proxied, BatcherOptions{QueryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
	defer bcancel()
	out, err := b.execRenew(bctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range out {
		if !ok {
			t.Errorf("%s not renewed", reqs[i].Name)
		}
	}
	select {
	case level := <-isolation:
		if level != "READ COMMITTED" {
			t.Errorf("the batch's transaction ran under %q, want READ COMMITTED", level)
		}
	default:
		t.Fatal("the batch never sent its UPDATE")
	}
}

// TestBatcherRenewsOnlyHeldRows: a batch of renewals whose lock lists an
// election once per request (a name repeated) renews a row only for the
// request naming its candidate and term, answers a duplicate of that
// request false (it falls back to its own heartbeat), and renews no row of
// another candidate, an older term, a released row or a missing one; nor
// the row of a caller that gave up (it retries: run both, a backlog of
// renewals doubles).
func TestBatcherRenewsOnlyHeldRows(t *testing.T) {
	ctx, db, bt := heldRows(t, "dup", "a", "b", "c")
	a, b, c, gone, none := "dup-a", "dup-b", "dup-c", "dup-released", "dup-none"
	ended, cancel := context.WithCancel(ctx)
	cancel() // a caller that gave up: left out
	reqs := []renewReq{
		{Name: a, ID: "other", Term: 7},
		{Name: a, ID: "me", Term: 7},
		{Name: a, ID: "me", Term: 6},
		{Name: a, ID: "me", Term: 7}, // a duplicate
		{Name: gone, ID: "me", Term: 7},
		{Name: none, ID: "me", Term: 7},
		{Name: b, ID: "me", Term: 7},
		{Name: c, ID: "me", Term: 7, Ctx: ended},
	}
	for i := range reqs {
		reqs[i].Ctx = cmp.Or(reqs[i].Ctx, ctx)
	}
	// The batch's own bound (the Combiner's Timeout) is ctx's here.
	out, err := bt.execRenew(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, false, false, false, false, true, false} {
		if out[i] != want {
			t.Errorf("%+v renewed %v, want %v", reqs[i], out[i], want)
		}
	}
	for name, renewed := range map[string]bool{a: true, b: true, c: false, gone: false} {
		var fresh bool
		if err := db.QueryRowContext(ctx, `SELECT last_seen_active > NOW(6) - INTERVAL 2 SECOND FROM service_election WHERE anchor = ?`, name).Scan(&fresh); err != nil {
			t.Fatal(err)
		}
		if fresh != renewed {
			t.Errorf("%s's row renewed %v, want %v", name, fresh, renewed)
		}
	}
}

// TestBatcherGivesOnlyHeldRows (issue 36): a batch of give-ups gives up a
// row, as its own statement would, only for the request naming the row's
// candidate and term (a release, a hand-off's expiry in :lease, a
// hand-over to :to), ends that term in the history, and answers the others
// false (each then sends its own statement): another candidate, an older
// term, a duplicate, a released row, a missing one, a caller that gave up.
func TestBatcherGivesOnlyHeldRows(t *testing.T) {
	ctx, db, bt := heldRows(t, "give", "a", "b", "c")
	a, b, c, gone, none := "give-a", "give-b", "give-c", "give-released", "give-none"
	held := func(name, id string, term uint64) renewReq { return renewReq{Name: name, ID: id, Term: term} }
	// A caller that gave up at its deadline: left out, and its deadline
	// does not bound the others'.
	ended, cancel := context.WithDeadline(ctx, time.Now())
	defer cancel()
	reqs := []giveReq{
		{renewReq: held(a, "other", 7), w: writeRelease},
		{renewReq: held(a, "me", 7), w: writeHandOver, to: "x", lease: 4000},
		{renewReq: held(a, "me", 6), w: writeRelease},
		{renewReq: held(a, "me", 7), w: writeHandOver, to: "x", lease: 4000}, // a duplicate
		{renewReq: held(gone, "me", 7), w: writeRelease},
		{renewReq: held(none, "me", 7), w: writeRelease},
		{renewReq: held(b, "me", 7), w: writeRelease},
		{renewReq: held(c, "me", 7), w: writeHandOff, lease: 3000},
		{renewReq: renewReq{Ctx: ended, Name: c, ID: "me", Term: 7}, w: writeRelease},
	}
	for i := range reqs {
		reqs[i].Ctx = cmp.Or(reqs[i].Ctx, ctx)
	}
	out, err := bt.execGive(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, false, false, false, false, true, true, false} {
		if out[i] != want {
			t.Errorf("%+v given up %v, want %v", reqs[i], out[i], want)
		}
	}
	for _, w := range []struct {
		name, row, ended string
	}{
		{a, "1 x 4000 1", "transferred"},
		{b, "1 - 10000 0", "resigned"},
		{c, "0 - 3000 1", "resigned"},
		{gone, "1 - 10000 0", ""},
	} {
		var row, ended string
		if err := db.QueryRowContext(ctx, `SELECT CONCAT_WS(' ', released, IFNULL(transfer_to, '-'), lease_ms, last_seen_active > NOW(6) - INTERVAL 2 SECOND) FROM service_election WHERE anchor = ?`, w.name).Scan(&row); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, `SELECT IFNULL(ended, '') FROM service_election_history WHERE anchor = ? AND term = 7`, w.name).Scan(&ended); err != nil {
			t.Fatal(err)
		}
		if row != w.row || ended != w.ended {
			t.Errorf("%s: row (released, transfer_to, lease_ms, written now) %q, history %q; want %q, %q", w.name, row, ended, w.row, w.ended)
		}
	}
}

// TestBatcherGivesUseKeys: each statement of a batch of give-ups finds its
// rows by a key (the election table's primary key, the history's open
// terms), for one election, a few and a batch of 500 in tables of 2,000,
// where a scan would lock every row it reads.
func TestBatcherGivesUseKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := testdb.Elections(t, ctx, 2000)
	explain := testdb.Explain(t, ctx, db)
	s := batchStatements(DefaultTable, 5*time.Second)
	for _, n := range []int{1, 5, 500} {
		p := stmt.Params{Names: make([]string, n), Terms: make([]uint64, n), To: "x", Lease: 1000}
		for i := range p.Names {
			p.Names[i], p.Terms[i] = fmt.Sprintf("e-%d", i*3), uint64(i*3)
		}
		lock, _ := stmt.In(s.giveLock, p.Names, nil)
		all := map[string]string{"lock": lock}
		for w, st := range append(s.give[:], s.giveEnd) {
			all[fmt.Sprint("give ", w)], _ = st.Bind(p)
		}
		for what, q := range all {
			for _, plan := range testdb.Rows(t, ctx, db, explain+q) {
				if plan["key"] != "PRIMARY" && plan["key"] != "open_terms" || plan["type"] == "index" || plan["type"] == "ALL" {
					t.Errorf("%s, %d names: the plan %v; want a key's rows", what, n, plan)
				}
			}
		}
	}
}

// heldRows returns a context with the test's deadline, a database of its
// own with the election table's rows <prefix>-<name> of names and
// <prefix>-released (released), each led by me with term 7 (its history
// row too), last written 5 s ago, and a Batcher on it.
func heldRows(t *testing.T, prefix string, names ...string) (context.Context, *sql.DB, *Batcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	bt, err := NewBatcher(db, BatcherOptions{QueryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(names, "released") {
		name := prefix + "-" + name
		if _, err := db.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms, released)
VALUES (?, 'me', NOW(6) - INTERVAL 5 SECOND, 7, NOW(6) - INTERVAL 5 SECOND, 10000, ?)`, name, strings.HasSuffix(name, "-released")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO service_election_history (anchor, slot, term, holder, began, started_at) VALUES (?, 0, 7, 'me', 'first', 1)`, name); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, db, bt
}

// TestBatcherTakesEndByDeadline: a batch of takes ends, and rolls back, by
// the earliest deadline of its candidates: a take committed after its
// candidate gave up on it would leave the candidate a row it did not know
// it held, which it must wait out the lock delay to lead (a shard group's
// crash once took 38 s so, BENCHMARKS.md). Candidate a's take has 1 s,
// b's 20 s, and b's row is locked elsewhere until a gave up: a's take,
// sent first, must not commit.
func TestBatcherTakesEndByDeadline(t *testing.T) {
	ctx, db, bt := heldRows(t, "late", "a", "b")
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election_floor (anchor, term_floor) VALUES ('late-a', 7), ('late-b', 7)`); err != nil {
		t.Fatal(err)
	}
	// Expired: a take by "new" would take them.
	if _, err := db.ExecContext(ctx, `UPDATE service_election SET lease_ms = 1 WHERE anchor IN ('late-a', 'late-b')`); err != nil {
		t.Fatal(err)
	}
	lock, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, `SELECT term FROM service_election WHERE anchor = 'late-b' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	f, hb := floor.NewStmts(DefaultTable, stmt.Bound{}, time.Second), stmt.Must(probe.HeartbeatSQL(quoteTable(DefaultTable)))
	take := func(ctx context.Context, name string) takeReq {
		return takeReq{Ctx: ctx, F: f, Heartbeat: hb, P: stmt.Params{Name: name, Me: "new", Lease: 10000}, Did: new(takeset.Did)}
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = bt.execTake(ctx, []takeReq{take(actx, "late-a"), take(ctx, "late-b")})
	}()
	<-actx.Done() // a gave up
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	<-done
	var holder string
	if err := db.QueryRowContext(ctx, `SELECT service_id FROM service_election WHERE anchor = 'late-a'`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if holder != "me" {
		t.Errorf("late-a's row names %q after its candidate gave up on the take: the batch committed it", holder)
	}
}
