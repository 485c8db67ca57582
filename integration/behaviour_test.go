// Package integration holds the tests that need a real MySQL-compatible
// server: the behaviour suite against every backend, and end-to-end checks.
package integration

import (
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electiontest"
	"github.com/sqlelect/sqlelect/integration/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func TestTableBackend(t *testing.T) {
	electiontest.Run(t, electiontest.Suite{New: election.NewTable, DSN: testdb.DSN})
}

func TestLockBackend(t *testing.T) {
	electiontest.Run(t, electiontest.Suite{New: election.NewLock, DSN: testdb.DSN})
}

// TestTableBackendSimultaneousAssignment runs the suite with MariaDB's
// SIMULTANEOUS_ASSIGNMENT sql_mode, under which the heartbeat's SET clauses
// all read the old row: the statement must decide the same either way.
func TestTableBackendSimultaneousAssignment(t *testing.T) {
	db := testdb.Open(t, testdb.AdminDSN(t))
	var version string
	if err := db.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		t.Skipf("SIMULTANEOUS_ASSIGNMENT is MariaDB's; server is %s", version)
	}
	dsn := func(t testing.TB) string {
		cfg, err := mysql.ParseDSN(testdb.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["sql_mode"] = "'STRICT_TRANS_TABLES,SIMULTANEOUS_ASSIGNMENT'"
		return cfg.FormatDSN()
	}
	electiontest.Run(t, electiontest.Suite{New: election.NewTable, DSN: dsn})
}
