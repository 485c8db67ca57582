package probe_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestPreflightStatements: the statements each backend's preflight sends,
// counted on its one connection (the session's Questions): the table
// backend's include the heartbeat probe, a scratch transaction it rolls
// back; the lock backend's do not, since it sends no heartbeat (the
// doctor's affected_rows is the table backend's), and so are 10 where the
// table backend's are 15 (BENCHMARKS.md, "First election").
func TestPreflightStatements(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	db.SetMaxOpenConns(1) // the preflight's statements and the counts below share a session
	status := func(name string) (n int64) {
		var v string
		if err := db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE '"+name+"'").Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	peek := `SELECT ` + probe.RecordColumns + ` FROM service_election WHERE 1 = 0`
	for _, tc := range []struct {
		backend         string
		sent, rollbacks int64
	}{{probe.Table, 15, 1}, {probe.Lock, 10, 0}} {
		q, rb := status("Questions"), status("Com_rollback")
		if _, err := probe.Preflight(ctx, db, "service_election", tc.backend, peek); err != nil {
			t.Fatalf("%s: %v", tc.backend, err)
		}
		// Less the SHOW of Com_rollback and the one below.
		if sent, rolled := status("Questions")-q-2, status("Com_rollback")-rb; sent != tc.sent || rolled != tc.rollbacks {
			t.Errorf("%s backend's preflight: %d statements, %d rollbacks; want %d and %d", tc.backend, sent, rolled, tc.sent, tc.rollbacks)
		}
	}
}

func TestMain(m *testing.M) { testdb.Main(m) }

// TestServerRollbackBounded: the heartbeat probe's transaction ends within
// its context when the server stops answering at its ROLLBACK (a lost
// reply, then nothing through): database/sql's Rollback, which has no
// deadline, waited until the connection failed, and a candidate's Run with
// it. A proxy in front of the server drops everything from the ROLLBACK
// on.
func TestServerRollbackBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db, p := testdb.Proxied(t, dsn)
	hit := p.BlackholeOn([]byte("ROLLBACK"))
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	done := make(chan error, 1)
	go func() { done <- probe.Server(pctx, db, "service_election") }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Server: %v, want nil (the campaign says what went wrong)", err)
		}
	case <-ctx.Done():
		t.Fatal("Server did not return after its context ended: its ROLLBACK waits without a deadline")
	}
	select {
	case <-hit:
	default:
		t.Error("no ROLLBACK was sent")
	}
}
