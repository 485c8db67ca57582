package election

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/netfault"
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
		reqs = append(reqs, renewReq{name: name, id: "me", term: 7})
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
		reqs = append(reqs, renewReq{name: name, id: "me", term: 7})
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
// COMMITTED, runs under READ COMMITTED on every server (see renewLocked),
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
		reqs = append(reqs, renewReq{name: name, id: "me", term: 7})
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
			t.Errorf("%s not renewed", reqs[i].name)
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
// another candidate, an older term, a released row or a missing one.
func TestBatcherRenewsOnlyHeldRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	bt, err := NewBatcher(db, BatcherOptions{QueryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	prefix := fmt.Sprintf("dup-%d-", time.Now().UnixNano())
	a, b, gone, none := prefix+"a", prefix+"b", prefix+"released", prefix+"none"
	for _, row := range []struct {
		name     string
		released int
	}{{a, 0}, {b, 0}, {gone, 1}} {
		if _, err := db.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms, released)
VALUES (?, 'me', NOW(6) - INTERVAL 5 SECOND, 7, NOW(6) - INTERVAL 5 SECOND, 10000, ?)`, row.name, row.released); err != nil {
			t.Fatal(err)
		}
	}
	reqs := []renewReq{
		{name: a, id: "other", term: 7},
		{name: a, id: "me", term: 7},
		{name: a, id: "me", term: 6},
		{name: a, id: "me", term: 7}, // a duplicate
		{name: gone, id: "me", term: 7},
		{name: none, id: "me", term: 7},
		{name: b, id: "me", term: 7},
	}
	// The batch's own bound (the Combiner's Timeout) is ctx's here.
	out, err := bt.execRenew(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, false, false, false, false, true} {
		if out[i] != want {
			t.Errorf("%+v renewed %v, want %v", reqs[i], out[i], want)
		}
	}
	for name, renewed := range map[string]bool{a: true, b: true, gone: false} {
		var fresh bool
		if err := db.QueryRowContext(ctx, `SELECT last_seen_active > NOW(6) - INTERVAL 2 SECOND FROM service_election WHERE anchor = ?`, name).Scan(&fresh); err != nil {
			t.Fatal(err)
		}
		if fresh != renewed {
			t.Errorf("%s's row renewed %v, want %v", name, fresh, renewed)
		}
	}
}
