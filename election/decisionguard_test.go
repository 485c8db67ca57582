package election

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// unguardDecision turns off the decision column's CHECK constraint for the
// statements run on the returned connection: on MariaDB for that session
// (check_constraint_checks=0), on MySQL for the table (NOT ENFORCED). It is
// what a hand-made table without the constraint, or an operator's session
// with checks off, leaves a candidate facing.
func unguardDecision(t *testing.T, ctx context.Context, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if strings.Contains(strings.ToLower(mustVersion(t, ctx, db)), "mariadb") {
		if _, err := conn.ExecContext(ctx, "SET SESSION check_constraint_checks = 0"); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	var name string
	if err := conn.QueryRowContext(ctx, `SELECT CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND CONSTRAINT_TYPE = 'CHECK'`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "ALTER TABLE service_election ALTER CHECK `"+name+"` NOT ENFORCED"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestLeftoverDecisionIsNotARenewal: a value left in the decision column by
// another statement makes a heartbeat that decides nothing change the
// column back to NULL (2 affected rows, the row's term unchanged). A holder
// whose row was handed to another candidate must not read that as a
// renewal: it reads the row and finds it is no longer its own. Before the
// fix, heartbeatOnce took 2 rows and the held term for a renewal, and two
// candidates led.
func TestLeftoverDecisionIsNotARenewal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	const name = "leftover"
	e, err := NewTable(db, Config{Name: name, ID: "a", LeaseDuration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tb := backendOf(e).(*tableBackend)
	b, err := tb.heartbeatOnce(ctx, 0)
	if err != nil || !b.held {
		t.Fatalf("first heartbeat: %+v, %v; want held", b, err)
	}
	// a hands the row over to b, with a window of a minute; then a value
	// is left in the decision column.
	if _, err := db.ExecContext(ctx, `UPDATE service_election SET released = 1, transfer_to = 'b',
last_seen_active = SYSDATE(6), lease_ms = 60000 WHERE anchor = ?`, name); err != nil {
		t.Fatal(err)
	}
	conn := unguardDecision(t, ctx, db)
	if _, err := conn.ExecContext(ctx, "UPDATE service_election SET decision = 'renewed' WHERE anchor = ?", name); err != nil {
		t.Fatal(err)
	}
	got, err := tb.heartbeatOnce(ctx, b.term)
	if err != nil {
		t.Fatal(err)
	}
	if got.held {
		t.Errorf("a's heartbeat on a row handed to b, with a decision left in the column: %+v; want not held", got)
	}
}

// TestPreflightRefusesUnguardedDecision: Run's preflight (and doctor) refuse
// a table whose decision column takes a value outside the heartbeat.
func TestPreflightRefusesUnguardedDecision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	if err := probe.Server(ctx, db, "service_election"); err != nil {
		t.Fatalf("preflight with the constraint: %v", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = probe.RunHeartbeat(ctx, tx, quoteTable("service_election"), probe.ScratchPrefix+"guard")
	_ = tx.Rollback()
	if err != nil {
		t.Fatalf("probe with the constraint: %v; want guarded, no problem", err)
	}
	conn := unguardDecision(t, ctx, db)
	tx, err = conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = probe.RunHeartbeat(ctx, tx, quoteTable("service_election"), probe.ScratchPrefix+"guard")
	_ = tx.Rollback()
	if !errors.Is(err, ErrUnsafeServer) || !strings.Contains(err.Error(), "CHECK constraint") {
		t.Errorf("probe without the constraint: %v; want ErrUnsafeServer naming the CHECK constraint", err)
	}
	if strings.Contains(strings.ToLower(mustVersion(t, ctx, db)), "mariadb") {
		// MariaDB's is the session's setting: another session is guarded.
		return
	}
	err = probe.Server(ctx, db, "service_election")
	if !errors.Is(err, ErrUnsafeServer) || !strings.Contains(err.Error(), "CHECK constraint") {
		t.Errorf("preflight without the constraint: %v; want ErrUnsafeServer naming the CHECK constraint", err)
	}
}

func mustVersion(t *testing.T, ctx context.Context, db *sql.DB) string {
	t.Helper()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
