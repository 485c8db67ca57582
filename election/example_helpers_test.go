package election_test

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/sqlelect/sqlelect/internal/testdb"
)

// exampleDB gives an Example that needs a server what testdb gives a test:
// a pool on a fresh, migrated database of the test server (a throwaway
// MariaDB, SQLELECT_TEST_DSN's, or SQLELECT_TEST_SERVER's: see package
// testdb), and a function that closes the pool and drops the database.
// Without a server the Example fails with testdb's message on how to get
// one, as the package's tests do.
func exampleDB() (db *sql.DB, done func()) { return openExampleDB(true) }

// exampleEmptyDB is exampleDB without the migrations: no election table.
func exampleEmptyDB() (db *sql.DB, done func()) { return openExampleDB(false) }

func openExampleDB(migrate bool) (db *sql.DB, done func()) {
	t := &exampleT{}
	dsn := testdb.DSN(t)
	if migrate {
		testdb.Migrate(t, dsn)
	}
	return testdb.Open(t, dsn), t.cleanup
}

// exampleT stands in for the *testing.T an Example has not, for the
// methods testdb calls: Fatal, Skip and Errorf end the Example with a
// panic, which fails it, and Cleanup's functions run in done.
type exampleT struct {
	testing.TB // nil: testdb calls only the methods below
	cleanups   []func()
}

func (t *exampleT) Helper()                   {}
func (t *exampleT) Log(...any)                {}
func (t *exampleT) Logf(string, ...any)       {}
func (t *exampleT) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (t *exampleT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (t *exampleT) Skip(args ...any)          { t.Fatal(args...) }
func (t *exampleT) Skipf(f string, a ...any)  { t.Fatalf(f, a...) }
func (t *exampleT) Errorf(f string, a ...any) { t.Fatalf(f, a...) }

// cleanup runs the Cleanup functions, last registered first.
func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
