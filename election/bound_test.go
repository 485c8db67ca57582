package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/stmt"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestLockBoundOnServer runs every bounded statement of the table backend
// and of Fenced on the test server: none may warn (an ignored hint or
// variable would), and a heartbeat that meets a row lock held by another
// transaction fails with ER_LOCK_WAIT_TIMEOUT after about the bound (1 s),
// not after innodb_lock_wait_timeout (50 s), even though its client would
// wait longer.
func TestLockBoundOnServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	e, err := NewTable(db, Config{Name: "bound", ID: "me", Tuning: TuningConfig{QueryTimeout: time.Second, DisableFastHandover: true}})
	if err != nil {
		t.Fatal(err)
	}
	tb := e.b.(*tableBackend)
	bound, err := tb.preflight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var version string
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	heartbeatSQL, heartbeatArgs := tb.stmts.heartbeat.Bind(tb.params(0))
	t.Logf("server %s: bound %+v; heartbeat begins %q", version, bound, heartbeatSQL[:min(len(heartbeatSQL), 90)])
	if bound.Flavor == stmt.FlavorOther || bound.Secs != 1 {
		t.Fatalf("bound = %+v, want a flavour and 1 s", bound)
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	noWarnings := func(what string) {
		t.Helper()
		rows, err := conn.QueryContext(ctx, `SHOW WARNINGS`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var level, msg string
			var code int
			if err := rows.Scan(&level, &code, &msg); err != nil {
				t.Fatal(err)
			}
			t.Errorf("%s: %s %d %s", what, level, code, msg)
		}
	}
	res, err := conn.ExecContext(ctx, heartbeatSQL, heartbeatArgs...)
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	noWarnings("heartbeat")
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("heartbeat inserted %d rows, want 1", n)
	}
	var rec Record
	readQuery, readArgs := stmt.Must(readSQL(quoteTable(DefaultTable))).Bind(stmt.Params{Name: "bound"})
	if err := rec.scan(conn.QueryRowContext(ctx, readQuery, readArgs...)); err != nil {
		t.Fatalf("read: %v", err)
	}
	noWarnings("read")
	term := rec.Term
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fencedSQL, fencedArgs := bound.Stmt(fencedCheckSQL(quoteTable(DefaultTable))).Bind(stmt.Params{Name: "bound", Me: "me", Hold: term})
	var one int
	if err := tx.QueryRowContext(ctx, fencedSQL, fencedArgs...).Scan(&one); err != nil {
		t.Fatalf("fenced check: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	releaseSQL, releaseArgs := tb.held[writeRelease].pool.Bind(tb.params(term))
	if _, err := conn.ExecContext(ctx, releaseSQL, releaseArgs...); err != nil {
		t.Fatalf("release: %v", err)
	}
	noWarnings("release")

	// The session keeps its own values: the bound was for one statement.
	var ilwt, lwt int64
	if err := conn.QueryRowContext(ctx, `SELECT @@session.innodb_lock_wait_timeout, @@session.lock_wait_timeout`).Scan(&ilwt, &lwt); err != nil {
		t.Fatal(err)
	}
	if ilwt == 1 || lwt == 1 {
		t.Errorf("session lock waits %d, %d after bounded statements: the bound leaked into the session", ilwt, lwt)
	}

	// A row lock held by another transaction: the bounded heartbeat gives
	// up on the server after the bound.
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, `SELECT term FROM service_election WHERE anchor = 'bound' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ftx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = ftx.QueryRowContext(ctx, fencedSQL, fencedArgs...).Scan(&one)
	took := time.Since(start)
	_ = ftx.Rollback()
	// MariaDB: ER_LOCK_WAIT_TIMEOUT; MySQL: ER_QUERY_TIMEOUT (3024).
	if n := mysqlerr.Errno(err); n != 1205 && n != 3024 || took > 5*time.Second {
		t.Fatalf("fenced check on a locked row: %v after %v; want Error 1205 or 3024 after about 1 s", err, took)
	}
	t.Logf("fenced check on a locked row: %v after %v", err, took)
	if bound.Flavor != stmt.FlavorMariaDB {
		t.Logf("%s: a write's row lock wait cannot be bounded per statement here", version)
		return
	}
	start = time.Now()
	_, err = conn.ExecContext(ctx, heartbeatSQL, heartbeatArgs...)
	took = time.Since(start)
	if mysqlerr.Errno(err) != 1205 || took > 5*time.Second {
		t.Fatalf("heartbeat on a locked row: %v after %v; want Error 1205 after about 1 s", err, took)
	}
	t.Logf("heartbeat on a locked row: %v after %v", err, took)
}

// TestBatcherRestoresSession: a batch of renewals bounds its connection's
// session and gives the connection back to the pool with the session's own
// values.
func TestBatcherRestoresSession(t *testing.T) {
	ctx, db := oneConnDB(t)
	read := func() (w, ilwt, lwt int64) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT @@session.wait_timeout, @@session.innodb_lock_wait_timeout, @@session.lock_wait_timeout`).Scan(&w, &ilwt, &lwt); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := db.ExecContext(ctx, `SET SESSION wait_timeout = 1234, innodb_lock_wait_timeout = 42, lock_wait_timeout = 4321`); err != nil {
		t.Fatal(err)
	}
	b, err := NewBatcher(db, BatcherOptions{QueryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []renewReq
	for i := range minRenewBatch {
		name := fmt.Sprintf("s%d", i)
		if _, err := db.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms)
VALUES (?, 'me', NOW(6), 7, NOW(6), 10000)`, name); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, renewReq{Ctx: ctx, Name: name, ID: "me", Term: 7})
	}
	got, err := b.execRenew(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range got {
		if !ok {
			t.Errorf("%s not renewed", reqs[i].Name)
		}
	}
	if w, ilwt, lwt := read(); w != 1234 || ilwt != 42 || lwt != 4321 {
		t.Errorf("after a batch the pooled session has wait_timeout %d, innodb_lock_wait_timeout %d, lock_wait_timeout %d; want 1234, 42, 4321", w, ilwt, lwt)
	}
	if _, err := b.execRead(ctx, []string{"s0"}); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
}

// TestFencedRestoresSession: a fenced transaction's session may idle at most
// the lease (whole seconds, rounded up), and the pooled connection gets its
// own wait_timeout back afterwards.
func TestFencedRestoresSession(t *testing.T) {
	ctx, db := oneConnDB(t)
	if _, err := db.ExecContext(ctx, `SET SESSION wait_timeout = 1234`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms)
VALUES ('f', 'me', NOW(6), 7, NOW(6), 10000)`); err != nil {
		t.Fatal(err)
	}
	cfg := settings{Config: Config{Table: DefaultTable, Name: "f", ID: "me"}}
	var inside int64
	err := fenced(ctx, db, cfg, &fenceMode{}, 7, stmt.Bound{}, 2500*time.Millisecond, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT @@session.wait_timeout`).Scan(&inside)
	})
	if err != nil {
		t.Fatal(err)
	}
	var after int64
	if err := db.QueryRowContext(ctx, `SELECT @@session.wait_timeout`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if inside != 3 || after != 1234 {
		t.Errorf("wait_timeout %d inside the fenced transaction, %d after; want 3 and 1234", inside, after)
	}
}

// oneConnDB returns a context with a deadline and a migrated test database
// whose pool holds one connection: what the test runs after a library call
// runs on the session that call used and gave back.
func oneConnDB(t *testing.T) (context.Context, *sql.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	db.SetMaxOpenConns(1)
	return ctx, db
}

// TestLockHandOffLeavesUnservedDelay: the lock backend's release with an
// unserved lock delay (without its lock connection: on a pooled one) leaves
// the row live for that delay, not released, and touches only its own term.
func TestLockHandOffLeavesUnservedDelay(t *testing.T) {
	ctx, db := oneConnDB(t)
	e, err := NewLock(db, Config{Name: "handoff", ID: "me"})
	if err != nil {
		t.Fatal(err)
	}
	lb := e.b.(*lockBackend)
	if _, err := lb.preflight(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms, backend)
VALUES ('handoff', 'me', NOW(6), 7, NOW(6), 60000, 'lock')`); err != nil {
		t.Fatal(err)
	}
	for _, hold := range []uint64{8, 7} { // another term's hand-off is a no-op
		if err := giveUp(ctx, lb, hold, surrender{unserved: 2500 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := ReadRecord(ctx, db, DefaultTable, "handoff")
	if err != nil {
		t.Fatal(err)
	}
	if rec.ID != "me" || rec.Term != 7 || rec.Released || rec.Transfer || rec.Lease != 2500*time.Millisecond ||
		rec.LeaseLeft <= 0 || rec.LeaseLeft > 2500*time.Millisecond {
		t.Errorf("after the hand-off: %+v; want term 7 live for 2.5 s, not released", rec)
	}
}
