// Package testdb is the integration module's way to a fresh, empty MariaDB or
// MySQL database: the main module's internal/testdb, plus a Docker path built
// on dockertest (tried after SQLELECT_TEST_DSN and before a local server),
// so that the library's own module does not depend on Docker.
//
// A package that uses it calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
//
// See internal/testdb for what each helper does.
package testdb

import (
	"database/sql"
	"testing"

	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// Environment variables read by this package.
const (
	// EnvDSN names the variable holding the DSN of an existing server.
	EnvDSN = testdb.EnvDSN
	// EnvImage names the variable holding the Docker image to run.
	EnvImage = testdb.EnvImage
	// DefaultImage is the Docker image run when EnvImage is unset.
	DefaultImage = testdb.DefaultImage
)

// Main runs the tests of a package, with a Docker container as the shared
// server when a Docker engine answers (and SQLELECT_TEST_DSN is unset), and
// then tears the server down. It does not return.
func Main(m *testing.M) { testdb.MainWith(m, startDocker) }

// DSN creates a new, empty database on the shared server and returns a DSN
// for it; the database is dropped in t.Cleanup.
func DSN(t testing.TB) string { t.Helper(); return testdb.DSN(t) }

// Migrate runs the schema migrations on the database of dsn.
func Migrate(t testing.TB, dsn string) { t.Helper(); testdb.Migrate(t, dsn) }

// AdminDSN returns a DSN for the shared server's administrative user.
func AdminDSN(t testing.TB) string { t.Helper(); return testdb.AdminDSN(t) }

// Server returns the shared server when it is a local process.
func Server(t testing.TB) *mysqld.Server { t.Helper(); return testdb.Server(t) }

// Open opens and pings dsn and closes it in t.Cleanup.
func Open(t testing.TB, dsn string) *sql.DB { t.Helper(); return testdb.Open(t, dsn) }

// WithParams is internal/testdb.WithParams: dsn with connection parameters
// added.
func WithParams(t testing.TB, dsn string, params map[string]string) string {
	t.Helper()
	return testdb.WithParams(t, dsn, params)
}
