package election

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

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
	cut := px.BlackholeOn([]byte("SET last_seen_active = " + clockSQL + " WHERE anchor IN"))
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
		if mysqlErrno(err) != 1205 {
			t.Fatal(err)
		}
		if since > limit {
			var n int
			_ = direct.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_rows_locked > 0`).Scan(&n)
			t.Fatalf("rows still locked %v after the partition (%d transactions hold row locks): %v", since.Round(10*time.Millisecond), n, err)
		}
	}
}
