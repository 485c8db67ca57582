package election_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestTakeLearnsLateCommit: a take that commits late in its step still
// learns that it won, and leads with the term it took. Its confirming read
// has a statement's time of its own: under what was left of the step, a
// take that had waited (in a Batcher's queue, at 100,000 shards, or on a
// row lock) lost its read, and the next step found the row naming the
// candidate, claimed it with a new term, and waited out the lock delay.
// Here the take waits on a row lock, and its read on a table lock held
// past the step's deadline.
func TestTakeLearnsLateCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	const name = "late-commit"
	rowLock := lockedExpiredRow(t, ctx, db, name)
	// A step (a follower's look, its take and the take's read) has
	// QueryTimeout; the lease's defaults leave the hold 10 s.
	const step = 4 * time.Second
	cfg := election.Config{Name: name, ID: "me", Tuning: election.TuningConfig{QueryTimeout: step}}
	elected := make(chan election.Leadership, 1)
	cfg.Callbacks.OnElected = func(_ context.Context, l election.Leadership) { elected <- l }
	e, err := election.NewTable(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runElection(t, ctx, e)
	admin := testdb.Open(t, testdb.AdminDSN(t)) // sees every session
	// The take's heartbeat waits on the row; its step began before.
	waitSession(t, ctx, admin, "%INSERT%INTO `service_election`(%")
	began := time.Now()
	// Let it wait half the step, then queue a table lock behind its
	// transaction, and let the take commit: its read then waits on the
	// table lock, from at least half the step after the step began.
	waitUntil(t, ctx, began.Add(step/2))
	tableLock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tableLock.Close()
	locked := make(chan error, 1)
	go func() {
		_, err := tableLock.ExecContext(ctx, "LOCK TABLES service_election WRITE")
		locked <- err
	}()
	waitSession(t, ctx, admin, "LOCK TABLES%")
	if err := rowLock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	waitSession(t, ctx, admin, "SELECT%FROM `service_election`%WHERE anchor%")
	// Past the step's deadline (by began + step), and within its read's
	// own time (from began + step/2 on): a quarter of the step either way.
	waitUntil(t, ctx, began.Add(step+step/4))
	if _, err := tableLock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	var l election.Leadership
	select {
	case l = <-elected:
	case <-ctx.Done():
		t.Fatal("never elected")
	}
	rows := testdb.Rows(t, ctx, db, "SELECT term, holder, began FROM service_election_history WHERE anchor = ? AND term > 7 ORDER BY term", name)
	if len(rows) != 1 || rows[0]["began"] != "expired" || rows[0]["term"] != strconv.FormatUint(l.Term, 10) {
		t.Errorf("elected with term %v; the terms since the expired one: %v; want one, the take's, begun on the expired row (not claimed again, with a lock delay)", l.Term, rows)
	}
}

// lockedExpiredRow gives election name a row of candidate "other" expired
// a minute ago (term 7, with its floor and history), and returns a
// transaction that holds that row's lock, rolled back at the end of t.
func lockedExpiredRow(t *testing.T, ctx context.Context, db *sql.DB, name string) *sql.Tx {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms, released)
VALUES (?, 'other', NOW(6) - INTERVAL 60 SECOND, 7, NOW(6) - INTERVAL 60 SECOND, 1000, 0)`,
		`INSERT INTO service_election_floor (anchor, term_floor) VALUES (?, 7)`,
		`INSERT INTO service_election_history (anchor, slot, term, holder, began, started_at) VALUES (?, 0, 7, 'other', 'first', 1)`,
	} {
		if _, err := db.ExecContext(ctx, q, name); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(ctx, `SELECT term FROM service_election WHERE anchor = ? FOR UPDATE`, name); err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitSession waits until a session of db's server runs a statement like
// the pattern.
func waitSession(t *testing.T, ctx context.Context, db *sql.DB, like string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for n := 0; n == 0; {
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE ? AND id <> CONNECTION_ID()", like).Scan(&n); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no session ran %q", like)
		}
	}
}

// waitUntil waits until the instant at, a deadline of the code under test.
func waitUntil(t *testing.T, ctx context.Context, at time.Time) {
	t.Helper()
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}
