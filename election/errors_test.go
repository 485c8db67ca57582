package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestSentinels: the two causes of ErrNoLeader match it and not each other,
// and every sentinel's message has the package prefix once.
func TestSentinels(t *testing.T) {
	for _, tc := range []struct {
		err, is error
		want    bool
	}{
		{ErrNoSuchElection, ErrNoLeader, true},
		{ErrNoLiveLease, ErrNoLeader, true},
		{ErrNoSuchElection, ErrNoLiveLease, false},
		{ErrNoLiveLease, ErrNoSuchElection, false},
		{ErrNoLeader, ErrNoSuchElection, false},
		{fmt.Errorf("%w: x", ErrNoLiveLease), ErrNoLeader, true},
	} {
		if got := errors.Is(tc.err, tc.is); got != tc.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", tc.err, tc.is, got, tc.want)
		}
	}
	for err, want := range map[error]string{
		ErrNoSuchElection: "election: no such election",
		ErrNoLiveLease:    "election: no live lease",
		ErrNotRunning:     "election: not running",
	} {
		if err.Error() != want {
			t.Errorf("%q, want %q", err.Error(), want)
		}
	}
}

func TestClassify(t *testing.T) {
	server := func(n uint16, msg string) error {
		return &mysql.MySQLError{Number: n, SQLState: [5]byte{'4', '2', '0', '0', '0'}, Message: msg}
	}
	for _, tc := range []struct {
		err      error
		sentinel error
		want     string
	}{
		{server(1045, "Access denied for user 'x'"), ErrAccessDenied, "election: access denied: Error 1045 (42000): Access denied for user 'x'"},
		// A unix_socket or auth_socket user connecting over TCP.
		{server(1698, "Access denied for user 'root'@'localhost'"), ErrAccessDenied, "election: access denied: Error 1698 (42000): Access denied for user 'root'@'localhost'"},
		{server(1142, "DELETE command denied"), ErrAccessDenied, "election: access denied: Error 1142 (42000): DELETE command denied"},
		{server(1146, "Table 'a.b' doesn't exist"), ErrTableMissing, "election: table missing (run `sqlelect migrate up`): Error 1146 (42000): Table 'a.b' doesn't exist"},
		{server(1049, "Unknown database 'a'"), ErrUnknownDatabase, "election: unknown database: Error 1049 (42000): Unknown database 'a'"},
		{server(1054, "Unknown column"), ErrSchemaMismatch, "election: table schema out of date (run `sqlelect migrate up`): Error 1054 (42000): Unknown column"},
		{server(1298, "Unknown or incorrect time zone: 'No/Such'"), ErrUnknownTimeZone, "election: unknown session time zone (the DSN's time_zone): Error 1298 (42000): Unknown or incorrect time zone: 'No/Such'"},
		{fmt.Errorf("ping: %w", server(1045, "denied")), ErrAccessDenied, "election: access denied: ping: Error 1045 (42000): denied"},
		{server(1213, "Deadlock"), nil, "Error 1213 (42000): Deadlock"},
		{sql.ErrConnDone, nil, sql.ErrConnDone.Error()},
	} {
		got := Classify(tc.err)
		if got.Error() != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if tc.sentinel != nil && !errors.Is(got, tc.sentinel) {
			t.Errorf("Classify(%v) does not match %v", tc.err, tc.sentinel)
		}
		if tc.sentinel == nil && got != tc.err {
			t.Errorf("Classify(%v) changed an unclassified error", tc.err)
		}
		if again := Classify(got); again.Error() != got.Error() {
			t.Errorf("Classify twice: %q", again)
		}
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) != nil")
	}
	// The table-specific classification of the package's statements.
	if got := probe.Classify(server(1049, "Unknown database 'a'"), "a.t"); !errors.Is(got, ErrTableMissing) ||
		got.Error() != "election: table missing (run `sqlelect migrate up`): a.t: Error 1049 (42000): Unknown database 'a'" {
		t.Errorf("probe.Classify(1049) = %q", got)
	}
}

// TestStatusErrors: Status tells a missing election from a dead lease.
func TestStatusErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	if _, err := ReadRecord(ctx, db, DefaultTable, "nosuch"); !errors.Is(err, ErrNoSuchElection) || !errors.Is(err, ErrNoLeader) ||
		err.Error() != `election: no such election: "nosuch" in service_election` {
		t.Errorf("no row: %v", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, last_seen_active, term, term_started_at, lease_ms, released)
VALUES ('gone', 'me', NOW(6), 7, NOW(6), 10000, 1)`); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadRecord(ctx, db, DefaultTable, "gone")
	if !errors.Is(err, ErrNoLiveLease) || !errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNoSuchElection) ||
		err.Error() != `election: no live lease: "gone": lease of "me" released` || rec.Term != 7 {
		t.Errorf("released row: %+v, %v", rec, err)
	}
	if _, err := ReadRecord(ctx, db, "nosuchdb.service_election", "x"); !errors.Is(err, ErrTableMissing) {
		t.Errorf("missing database: %v", err)
	}
	e, err := NewTable(db, Config{Name: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Resign(ctx); err != ErrNotRunning {
		t.Errorf("Resign before Run: %v, want ErrNotRunning", err)
	}
}

// TestErrorKind: the metrics' kind of each heartbeat error. Group
// Replication's certification conflicts (3101, and 1180 for a transaction a
// remote write set aborted, with the message MySQL 9.7 sends) count as
// deadlocks, as Galera's (1213) do; another 1180 is a server error.
func TestErrorKind(t *testing.T) {
	server := func(n uint16, msg string) error {
		return &mysql.MySQLError{Number: n, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: msg}
	}
	for _, tc := range []struct {
		err      error
		want     string
		conflict bool
	}{
		{nil, "", false},
		{server(1213, "Deadlock found when trying to get lock; try restarting transaction"), "deadlock", true},
		{server(3101, "Plugin instructed the server to rollback the current transaction."), "deadlock", true},
		{server(1180, "Got error 149 - 'Lock deadlock; Retry transaction' during COMMIT"), "deadlock", true},
		{fmt.Errorf("election: fenced: commit: %w", server(1180, "Got error 149 - 'Lock deadlock; Retry transaction' during COMMIT")), "deadlock", true},
		{server(1180, "Got error 1 - 'Operation not permitted' during COMMIT"), "server", false},
		{server(1180, "Got error 1490 - 'x' during COMMIT"), "server", false},
		{server(3100, "Error on observer while running replication hook 'before_commit'."), "server", false},
		{server(1290, "The MySQL server is running with the --super-read-only option"), "server", false},
		{server(1205, "Lock wait timeout exceeded"), "lock_wait", false},
		{server(1146, "Table 'a.b' doesn't exist"), "server", false},
		{Classify(server(1146, "Table 'a.b' doesn't exist")), "schema", false},
		{Classify(server(1142, "UPDATE command denied")), "access", false},
		{context.DeadlineExceeded, "timeout", false},
		{errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"), "connection", false},
	} {
		if got := ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if got := mysqlerr.WriteConflict(tc.err); got != tc.conflict {
			t.Errorf("mysqlerr.WriteConflict(%v) = %v, want %v", tc.err, got, tc.conflict)
		}
	}
}

// TestMigrateHint: Run's error about a missing or outdated table that is
// not service_election, which `sqlelect migrate` does not manage, says what
// to apply instead; other errors and tables are left alone.
func TestMigrateHint(t *testing.T) {
	missing := probe.Classify(&mysql.MySQLError{Number: mysqlerr.NoSuchTable, Message: "Table 'app.jobs' doesn't exist"}, "jobs")
	deadlock := &mysql.MySQLError{Number: 1213 /* ER_LOCK_DEADLOCK */, Message: "Deadlock"}
	for _, tc := range []struct {
		table string
		err   error
		hint  string // appended; "" for none
	}{
		{"service_election", missing, ""},
		{"app.service_election", missing, ""},
		{"jobs", deadlock, ""},
		{"jobs", nil, ""},
		{"jobs", missing, " (`sqlelect migrate` manages service_election only: for jobs, apply schema.DDL(\"jobs\") with your own migrations)"},
		{"app.jobs", fmt.Errorf("%w: no decision", ErrSchemaMismatch),
			" (`sqlelect migrate` manages service_election only: for app.jobs, apply schema.DDL(\"jobs\") with your own migrations)"},
	} {
		got := migrateHint(tc.err, tc.table)
		if tc.err == nil {
			if got != nil {
				t.Errorf("migrateHint(nil, %q) = %v", tc.table, got)
			}
			continue
		}
		if want := tc.err.Error() + tc.hint; got.Error() != want || !errors.Is(got, tc.err) {
			t.Errorf("migrateHint(%v, %q) = %q, want %q wrapping the error", tc.err, tc.table, got, want)
		}
	}
}
