package mysqld_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// TestGroupFailover starts a 3-member Group Replication group in
// single-primary mode from the MySQL 9.7 root, kills the primary, waits for
// the survivors to elect another, and brings the killed member back.
func TestGroupFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three MySQL servers; skipped under -short")
	}
	if ok, why := mysqld.GroupSelected(); !ok {
		t.Skip(why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g, err := mysqld.StartGroup(ctx, mysqld.GroupOptions{Logf: t.Logf})
	if errors.Is(err, mysqld.ErrNeedRoot) {
		t.Skipf("Group Replication runs MySQL 9.7 from a Debian root: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Stop() })
	t.Logf("server: %s", g.Nodes[0].Version())
	p, err := g.Primary(ctx)
	if err != nil || p != 0 {
		t.Fatalf("primary: member %d, %v; want member 1, the bootstrap", p+1, err)
	}
	killed := time.Now()
	if err := g.Kill(p); err != nil {
		t.Fatal(err)
	}
	q, err := g.WaitPrimary(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("member %d killed; member %d primary %v later", p+1, q+1, time.Since(killed).Round(time.Millisecond))
	if err := g.Rejoin(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitOnline(ctx, q); err != nil {
		t.Fatal(err)
	}
	if now, err := g.Primary(ctx); err != nil || now != q {
		t.Errorf("after the rejoin: primary member %d, %v; want member %d", now+1, err, q+1)
	}
	if err := g.Leave(ctx, q); err != nil {
		t.Fatal(err)
	}
	r, err := g.WaitPrimary(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("member %d left; member %d primary", q+1, r+1)
}
