package election_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestBatcherSharesPreflight (issue 33, item 4): the candidates of
// elections that share a Batcher and its database run Run's preflight one
// at a time and reuse one that passed less than a lease ago: a herd of
// elections that start at once sends one preflight, not one each (at
// 30,000 × 3 their preflights alone kept every candidate from campaigning
// for minutes). The server's general log, of a server of its own, counts
// the preflight's read of the table's columns (the adopted lease).
func TestBatcherSharesPreflight(t *testing.T) {
	ctx, admin, dsn := generalLogServer(t)
	db := testdb.Open(t, dsn)
	b, err := election.NewBatcher(db, election.BatcherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	w := newOverlapWatch()
	for i := range n {
		cfg := sessionClockConfig(fmt.Sprintf("shared-preflight-%d", i), "c")
		cfg.Tuning.Batcher = b
		cfg.Callbacks = w.callbacks(cfg.Name, func() []election.Election { return nil })
		e, err := election.NewTable(db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		runElection(t, ctx, e)
	}
	for i := range n {
		select {
		case <-w.elected:
		case <-ctx.Done():
			t.Fatalf("%d of %d elections led: %v", i, n, ctx.Err())
		}
	}
	var reads int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.general_log WHERE command_type <> 'Prepare' AND argument LIKE 'SELECT LOWER(COLUMN_NAME)%'").Scan(&reads); err != nil {
		t.Fatal(err)
	}
	if reads != 1 {
		t.Errorf("%d elections on one Batcher read the table's columns %d times at preflight, want once", n, reads)
	}
}

// generalLogServer, for a test that counts statements in a server's
// general log (skipped in -short, parallel), starts a server of its own
// whose general log goes to mysql.general_log, and returns the test's
// context (2 minutes), a pool on the server and its DSN.
func generalLogServer(t *testing.T) (ctx context.Context, admin *sql.DB, dsn string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	_, dsn = testdb.OwnServer(t, ctx)
	admin = testdb.Open(t, dsn)
	if _, err := admin.ExecContext(ctx, "SET GLOBAL log_output = 'TABLE', general_log = 1"); err != nil {
		t.Fatal(err)
	}
	return ctx, admin, dsn
}
