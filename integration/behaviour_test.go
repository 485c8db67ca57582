// Package integration holds the tests that need a real MySQL-compatible
// server: the behaviour suite against every backend, and end-to-end checks.
package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electiontest"
	"github.com/sqlelect/sqlelect/integration/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestBehaviour runs the behaviour suite on the table backend, the lock
// backend, and the table backend batched (every candidate's steady-state
// statements through a Batcher), the three at once (electiontest.Run):
// TestBehaviour/table/..., TestBehaviour/lock/... and
// TestBehaviour/batched/....
func TestBehaviour(t *testing.T) {
	electiontest.Run(t,
		electiontest.Suite{Name: "table", New: election.NewTable, DSN: testdb.DSN},
		electiontest.Suite{Name: "lock", New: election.NewLock, DSN: testdb.DSN},
		electiontest.Suite{Name: "batched", New: newBatched(), DSN: testdb.DSN, NoWakeup: true})
}

// TestTableBackendSimultaneousAssignment checks that Run refuses a pool
// whose sessions have MariaDB's SIMULTANEOUS_ASSIGNMENT sql_mode, under
// which the heartbeat (it decides in its first assignment and reads the
// decision in the others) would never take a row: a clear error at start,
// not a candidate that silently never leads. That the statement changes
// nothing on such a session is election's
// TestHeartbeatSimultaneousAssignment.
func TestTableBackendSimultaneousAssignment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testdb.Open(t, testdb.AdminDSN(t))
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		t.Skipf("SIMULTANEOUS_ASSIGNMENT is MariaDB's; server is %s", version)
	}
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	dsn = testdb.WithParams(t, dsn, map[string]string{"sql_mode": "'STRICT_TRANS_TABLES,SIMULTANEOUS_ASSIGNMENT'"})
	e, err := election.NewTable(testdb.Open(t, dsn), election.Config{Name: "simultaneous", ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(ctx); !errors.Is(err, election.ErrSimultaneousAssignment) {
		t.Fatalf("Run under SIMULTANEOUS_ASSIGNMENT = %v; want ErrSimultaneousAssignment", err)
	}
}
