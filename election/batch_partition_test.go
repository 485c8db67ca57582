package election

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/integration/testdb"
)

// partitionProxy forwards TCP connections from a port of 127.0.0.1 to the
// server until it sees the client send marker; from then on it forwards
// nothing, either way, and closes nothing: to the server the client went
// silent, as behind a network partition. (toxiproxy's timeout toxic drops
// the data but passes the client's close on to the server, which then ends
// the session at once: no partition looks like that.)
type partitionProxy struct {
	ln     net.Listener
	target string
	marker []byte

	mu      sync.Mutex
	cut     bool
	cutAt   time.Time
	cutDone chan struct{}
	conns   []net.Conn
}

func newPartitionProxy(t *testing.T, target string, marker string) *partitionProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partitionProxy{ln: ln, target: target, marker: []byte(marker), cutDone: make(chan struct{})}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *partitionProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(s, c, true)
		go p.pipe(c, s, false)
	}
}

// pipe copies from src to dst until the partition; upstream (client to
// server) data is scanned for the marker, and the packet holding it is
// dropped.
func (p *partitionProxy) pipe(dst, src net.Conn, upstream bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if upstream && !p.cut && bytes.Contains(buf[:n], p.marker) {
				p.cut, p.cutAt = true, time.Now()
				close(p.cutDone)
			}
			cut := p.cut
			p.mu.Unlock()
			if cut {
				// Partitioned: swallow everything, close nothing.
				// dst stays open until the test ends.
				_, _ = io.Copy(io.Discard, src)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if !cut {
				dst.Close()
			}
			return
		}
	}
}

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
	px := newPartitionProxy(t, cfg.Addr, "SET last_seen_active = NOW(6) WHERE anchor IN")
	cfg.Addr = px.ln.Addr().String()
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
	select {
	case <-px.cutDone:
	default:
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
		since := time.Since(px.cutAt)
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
