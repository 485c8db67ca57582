package electiontest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sqlelect/sqlelect/election"
)

// capturing starts one candidate, with the suite's callbacks and the
// fenced_writes table, that sends each Leadership OnElected receives to the
// returned channel; ctx bounds the test's statements.
func capturing(t *testing.T, s Suite) (c *cluster, m *member, ls <-chan election.Leadership, ctx context.Context) {
	c = newCluster(t, s, true)
	c.fencedTable()
	ch := make(chan election.Leadership, 4)
	m = c.start("a", func(cfg *election.Config) {
		elected := cfg.Callbacks.OnElected
		cfg.Callbacks.OnElected = func(ctx context.Context, l election.Leadership) {
			ch <- l
			elected(ctx, l)
		}
	}, nil)
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	t.Cleanup(cancel)
	return c, m, ch, ctx
}

// nextLeadership waits for the next Leadership of ls.
func (c *cluster) nextLeadership(ls <-chan election.Leadership) election.Leadership {
	c.t.Helper()
	select {
	case l := <-ls:
		return l
	case <-time.After(takeoverBound):
		c.t.Fatal("no leadership")
	case <-c.ctx.Done():
		c.t.Fatal(c.ctx.Err())
	}
	return election.Leadership{}
}

// testLeadershipFenced checks that the Leadership OnElected receives fences
// with its own term, and fails once that leadership ended, although the same
// candidate leads again with another term.
func testLeadershipFenced(t *testing.T, s Suite) {
	c, m, ls, ctx := capturing(t, s)
	first := c.nextLeadership(ls)
	if first.Term == 0 || first.Term != m.e.Term() {
		t.Fatalf("Leadership.Term %d, Term() %d", first.Term, m.e.Term())
	}
	if err := first.Fenced(ctx, write(m, first.Term)); err != nil {
		t.Fatalf("fenced write of the first leadership: %v", err)
	}
	if err := m.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second := c.nextLeadership(ls) // the only candidate leads again
	if second.Term <= first.Term {
		t.Fatalf("second leadership's term %d, first's %d", second.Term, first.Term)
	}
	called := false
	err := first.Fenced(ctx, func(*sql.Tx) error { called = true; return nil })
	if !errors.Is(err, election.ErrNotLeader) || called {
		t.Fatalf("fenced write of the ended leadership: %v (fn called: %v), want ErrNotLeader", err, called)
	}
	if err := second.Fenced(ctx, write(m, second.Term)); err != nil {
		t.Fatalf("fenced write of the second leadership: %v", err)
	}
	if n := c.fencedWrites(m.id); n != 2 {
		t.Fatalf("%d fenced writes, want 2", n)
	}
}

// testFencedSqlx checks the documented way to use sqlx in Fenced: a
// sqlx.Tx with the Mapper of sqlx.NewDb(db, "mysql"), whose Named methods
// panic without one.
func testFencedSqlx(t *testing.T, s Suite) {
	c, m, ls, ctx := capturing(t, s)
	l := c.nextLeadership(ls)
	sdb := sqlx.NewDb(m.db, "mysql")
	row := struct {
		Who  string `db:"who"`
		Term uint64 `db:"term"`
	}{m.id, l.Term}
	err := l.Fenced(ctx, func(tx *sql.Tx) error {
		stx := &sqlx.Tx{Tx: tx, Mapper: sdb.Mapper}
		_, err := stx.NamedExecContext(ctx, "INSERT INTO fenced_writes (who, term) VALUES (:who, :term)", row)
		return err
	})
	if err != nil {
		t.Fatalf("fenced NamedExecContext: %v", err)
	}
	if n := c.fencedWrites(m.id); n != 1 {
		t.Fatalf("%d fenced writes, want 1", n)
	}
}
