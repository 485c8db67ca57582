// Package testdb gives tests a fresh, empty MariaDB or MySQL database.
//
// A package that uses it calls Main from its TestMain, so that the shared
// server is torn down when its tests are done:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
//
// and each test asks for its own database:
//
//	db := testdb.Open(t, testdb.DSN(t))
//
// The shared server is set up on first use, once per test binary, from the
// first of these that works:
//
//  1. SQLELECT_TEST_DSN, a go-sql-driver/mysql DSN of a user that may
//     CREATE and DROP databases (its database name is ignored);
//  2. a Docker container, when the test binary was given a way to start one
//     (MainWith; the integration module's testdb package passes one built
//     on dockertest, so that this module does not depend on Docker) and a
//     Docker engine answers;
//  3. a throwaway local server started with package mysqld
//     (SQLELECT_TEST_SERVER picks which: see mysqld.Options.Server).
//
// When none works, tests that ask for a database fail with a message saying
// how to get one, or are skipped when run with -short.
//
// The helpers call t.Fatal, t.Skip and t.Cleanup, so they must be called
// from the test's goroutine.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/internal/netfault"
	"github.com/sqlelect/sqlelect/schema"
)

// Environment variables read by this package.
const (
	// EnvDSN names the variable holding the DSN of an existing server.
	EnvDSN = "SQLELECT_TEST_DSN"
	// EnvImage names the variable holding the Docker image to run (read by
	// the Docker starter given to MainWith).
	EnvImage = "SQLELECT_TEST_IMAGE"
	// DefaultImage is the Docker image run when EnvImage is unset.
	DefaultImage = "mariadb:10.11"
)

// ErrNoDocker marks "no Docker engine answers", as opposed to a container
// that failed; a Docker starter returns an error wrapping it.
var ErrNoDocker = errors.New("no Docker engine")

// Docker starts a server in a container and returns a config for a user
// that may create databases, and a function that removes the container.
// It returns an error wrapping ErrNoDocker when no engine answers.
type Docker func(ctx context.Context, logf func(string, ...any)) (cfg *mysql.Config, purge func() error, err error)

// howTo tells the reader of a failed or skipped test how to get a server.
const howTo = "testdb needs a MariaDB/MySQL server; either\n" +
	"\t- install one: apt-get install -y mariadb-server (or: make deps), or\n" +
	"\t- set " + EnvDSN + " to the DSN of a user that may CREATE DATABASE, e.g. root:pw@tcp(127.0.0.1:3306)/, or\n" +
	"\t- run the integration module's tests with a Docker engine (image " + EnvImage + ", default " + DefaultImage + ")"

// Where the shared server comes from.
const (
	sourceEnv    = "$" + EnvDSN
	sourceDocker = "docker"
	sourceLocal  = "mysqld"
)

// setupTimeout bounds setting up the shared server, apart from pulling a
// Docker image (which dockertest cannot cancel).
const setupTimeout = 3 * time.Minute

// shared is the server of this test binary. It is a package-level variable
// only because a test binary has a single lifetime: the server is set up by
// the first test that needs it and torn down by Main when all tests are
// done. It is unexported and never reassigned.
var shared sharedServer

// sharedServer is set up at most once; the fields after once are written
// only inside once.Do and read only after it.
type sharedServer struct {
	once  sync.Once
	noted sync.Once // the notes are logged by the first test that gets the server

	err    error
	notes  []string      // how setup went, logged in the test that ran it
	source string        // sourceEnv, sourceDocker or sourceLocal
	admin  *mysql.Config // a user that may create databases, on no database
	db     *sql.DB       // pool of admin, for CREATE and DROP DATABASE

	docker Docker // set by MainWith before any test runs; nil: no Docker path
	local  *mysqld.Server
	purge  func() error // removes the Docker container, when there is one

	upMu sync.Mutex // serializes restarting a killed local server
}

// get returns the shared server, setting it up on first use. It fails t, or
// skips it under -short, when there is no server.
func get(t testing.TB) *sharedServer {
	t.Helper()
	s := &shared
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		s.err = s.setup(ctx)
	})
	s.noted.Do(func() {
		for _, n := range s.notes {
			t.Log(n)
		}
	})
	if s.err != nil {
		msg := fmt.Sprintf("testdb: no database server: %v\n%s", s.err, howTo)
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return s
}

func (s *sharedServer) logf(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// setup finds or starts the shared server and opens the admin pool.
func (s *sharedServer) setup(ctx context.Context) error {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return fmt.Errorf("parse %s: %w", EnvDSN, err)
		}
		s.source = sourceEnv
		return s.connect(ctx, cfg)
	}

	var errs []error
	if s.docker != nil {
		cfg, purge, err := s.docker(ctx, s.logf)
		switch {
		case err == nil:
			s.source, s.purge = sourceDocker, purge
			return s.connect(ctx, cfg)
		case errors.Is(err, ErrNoDocker):
			s.logf("testdb: not using Docker: %v", err)
		default:
			s.logf("testdb: Docker failed, falling back to a local server: %v", err)
			errs = append(errs, err)
		}
	}

	srv, err := mysqld.Start(ctx, mysqld.Options{
		ExtraArgs: []string{"--character-set-server=utf8mb4"},
		Logf:      s.logf,
	})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	s.source, s.local = sourceLocal, srv
	s.logf("testdb: server %s: %s", srv.Name(), srv.Version())
	cfg, err := mysql.ParseDSN(srv.DSN(""))
	if err != nil {
		return fmt.Errorf("parse %q: %w", srv.DSN(""), err)
	}
	return s.connect(ctx, cfg)
}

// connect normalizes cfg into s.admin and opens and pings s.db.
func (s *sharedServer) connect(ctx context.Context, cfg *mysql.Config) error {
	cfg.DBName = ""
	cfg.ParseTime = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	s.admin = cfg

	pc := cfg.Clone()
	// DROP DATABASE waits for metadata locks held by a test's leftover
	// transactions; give up after a minute rather than hang the cleanup.
	pc.Params["lock_wait_timeout"] = "60"
	// Tests that kill the server leave broken idle connections, which the
	// driver would log; errors that matter are returned anyway.
	pc.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(pc)
	if err != nil {
		return fmt.Errorf("%s: %w", s.source, err)
	}
	s.db = sql.OpenDB(conn)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.db.PingContext(pingCtx); err != nil {
		return fmt.Errorf("connect to %s server at %s as %q: %w", s.source, cfg.Addr, cfg.User, err)
	}
	s.logf("testdb: using %s server at %s", s.source, cfg.Addr)
	return nil
}

// teardown closes the admin pool and stops a server this package started.
func (s *sharedServer) teardown() error {
	var errs []error
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.local != nil {
		if err := s.local.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.purge != nil {
		if err := s.purge(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ensureUp restarts the local server if a test killed it and left it down.
func (s *sharedServer) ensureUp(ctx context.Context) error {
	if s.local == nil {
		return nil
	}
	s.upMu.Lock()
	defer s.upMu.Unlock()
	if s.local.Pid() != 0 {
		return nil
	}
	return s.local.Restart(ctx)
}

// dsn formats the admin config for database db.
func (s *sharedServer) dsn(db string) string {
	cfg := s.admin.Clone()
	cfg.DBName = db
	return cfg.FormatDSN()
}

// Main runs the tests of a package and then tears down the shared server
// (stops the local server and removes its data, or purges the Docker
// container), and exits with the tests' exit code. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
//
// Main does not return. A package that does not call it leaks the server
// until the binary exits; a leaked local server is killed and its directory
// removed by the next mysqld.Start, but a leaked Docker container is not.
func Main(m *testing.M) { MainWith(m, nil) }

// MainWith is Main with a way to start a Docker container, tried after
// SQLELECT_TEST_DSN and before a local server; nil means no Docker path.
//
// Under -short, Main also sets the server up before any test runs; when
// there is none, it skips the package's Examples (an Example cannot skip
// itself, and the ones here need the server), as the tests that need it
// skip, and says so on stderr.
func MainWith(m *testing.M, docker Docker) {
	shared.docker = docker
	flag.Parse()
	if testing.Short() {
		skipExamplesWithoutServer()
	}
	code := m.Run()
	if err := shared.teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: tearing down the shared server: %v\n", err)
	}
	os.Exit(code)
}

// skipExamplesWithoutServer sets the shared server up and, when that
// fails, adds the Examples to -test.skip.
func skipExamplesWithoutServer() {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	shared.once.Do(func() { shared.err = shared.setup(ctx) })
	if shared.err == nil {
		return
	}
	skip := "^Example"
	if old := flag.Lookup("test.skip").Value.String(); old != "" {
		skip = old + "|" + skip
	}
	if err := flag.Set("test.skip", skip); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: skipping the Examples: %v\n", err)
		return
	}
	fmt.Fprintf(os.Stderr, "testdb: no database server (%v): -short skips the tests and Examples that need one\n", shared.err)
}

// DSN creates a new, empty database named sqlelect_<12 hex digits> with
// character set utf8mb4 on the shared server and returns a DSN for it
// (parseTime=true, session time zone UTC). The database is dropped in
// t.Cleanup. DSN fails t (skips it under -short) when there is no server.
func DSN(t testing.TB) string {
	t.Helper()
	s := get(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testdb: random database name: %v", err)
	}
	name := "sqlelect_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.ensureUp(ctx); err != nil {
		t.Fatalf("testdb: restart killed server: %v", err)
	}
	if _, err := s.db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("testdb: create database %s on %s: %v", name, s.admin.Addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := s.ensureUp(ctx); err != nil {
			t.Errorf("testdb: restart killed server to drop %s: %v", name, err)
			return
		}
		if _, err := s.db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
	})
	return s.dsn(name)
}

// Migrate runs the schema migrations (package schema) on the database of
// dsn; already applied migrations are left alone. Then IntactFloor: the
// table is as if migrated long ago. It fails t on any error.
func Migrate(t testing.TB, dsn string) {
	t.Helper()
	// A pool of its own, closed now: one left open for the test would
	// fail its Close at the end after a server restart (a chaos fault).
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("testdb: migrate: %v", err)
	}
	defer db.Close() //nolint:errcheck // nothing is pending on it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := schema.New(db).Up(ctx); err != nil && !errors.Is(err, schema.ErrNoChange) {
		t.Fatalf("testdb: migrate: %v", err)
	}
	IntactFloor(t, db)
}

// IntactFloor writes the term floor's marker of service_election (migration
// 8) as the library keeps it, the sum of CRC32(anchor) over the floor rows,
// and dates it back: a floor table migrated long ago that nobody tampered
// with, where an election with no floor row never existed and its first
// insert leads at once (acquired = 'first'). A test that writes floor rows
// by hand for that calls it after.
func IntactFloor(t testing.TB, db *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sum uint64
	err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(CRC32(anchor)), 0) FROM service_election_floor WHERE anchor <> ''").Scan(&sum)
	if err == nil {
		_, err = db.ExecContext(ctx, `INSERT INTO service_election_floor (anchor, term_floor, marked_at) VALUES ('', ?, 0)
ON DUPLICATE KEY UPDATE term_floor = ?, marked_at = 0`, sum, sum)
	}
	if err != nil {
		t.Fatalf("testdb: the floor's marker: %v", err)
	}
}

// AdminDSN returns a DSN for the shared server's administrative user (root,
// or the user of SQLELECT_TEST_DSN) on no database, with parseTime=true and
// the session time zone UTC. Databases it creates are not dropped
// automatically. It fails t (skips it under -short) when there is no server.
func AdminDSN(t testing.TB) string {
	t.Helper()
	return get(t).dsn("")
}

// Server returns the shared server when it is a local process started by
// package mysqld, for tests that Kill and Restart it. It skips t when the
// server comes from SQLELECT_TEST_DSN or Docker, and fails t (skips it under
// -short) when there is no server.
//
// The server is shared by all tests of the package: a test that kills it
// must not run in parallel with tests that use it. If the server is down
// when t ends, it is restarted in t.Cleanup (and before any DSN call).
func Server(t testing.TB) *mysqld.Server {
	t.Helper()
	s := get(t)
	if s.local == nil {
		t.Skipf("testdb: the shared server comes from %s; killing and restarting it needs a local process "+
			"(unset %s and stop Docker, or use mysqld.Start)", s.source, EnvDSN)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := s.ensureUp(ctx); err != nil {
			t.Errorf("testdb: restart killed server: %v", err)
		}
	})
	return s.local
}

// WithParams returns dsn with the connection parameters params added (a
// session variable each, such as sql_mode, quoted as the driver wants:
// "'STRICT_TRANS_TABLES'"). It fails t if dsn does not parse.
func WithParams(t testing.TB, dsn string, params map[string]string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testdb: parse %s: %v", redact(dsn), err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range params {
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

// Open opens dsn with the mysql driver, pings it (giving up after 10 s) and
// closes it in t.Cleanup. It fails t if the ping fails.
func Open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("testdb: open %s: %v", redact(dsn), err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("testdb: close %s: %v", redact(dsn), err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("testdb: ping %s: %v", redact(dsn), err)
	}
	return db
}

// Proxied opens dsn as Open does, through a netfault proxy of its own in
// front of the server (closed in t.Cleanup), for fault tests: the proxy
// cuts the pool off the server.
func Proxied(t testing.TB, dsn string) (*sql.DB, *netfault.Proxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	p, err := netfault.Start(cfg.Addr)
	if err != nil {
		t.Fatalf("testdb: proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cfg.Addr = p.Addr()
	return Open(t, cfg.FormatDSN()), p
}

// redact hides the password of dsn for messages.
func redact(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.Passwd == "" {
		return dsn
	}
	cfg.Passwd = "***"
	return cfg.FormatDSN()
}

// Rows runs query on db and returns its rows, each by column name, NULL
// as "" (t fails on an error).
func Rows(t testing.TB, ctx context.Context, db *sql.DB, query string, args ...any) []map[string]string {
	t.Helper()
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Elections returns a database of its own (DSN) whose default tables,
// migrated, hold n elections (n at most 10,000): e-0 to e-<n-1>, each led
// by m with its number as its term, with a floor row and a history row,
// analyzed, for a plan's tests.
func Elections(t testing.TB, ctx context.Context, n int) *sql.DB {
	t.Helper()
	dsn := DSN(t)
	Migrate(t, dsn)
	db := Open(t, dsn)
	// 10,000 numbers: a cross join of digits, on MySQL and MariaDB alike.
	const digit = `(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)`
	nums := fmt.Sprintf(`(SELECT a.d + 10*b.d + 100*c.d + 1000*x.d AS n FROM %s a, %s b, %s c, %s x) nums WHERE n < %d`, digit, digit, digit, digit, n)
	for _, q := range []string{
		"INSERT INTO service_election (anchor, service_id, term) SELECT CONCAT('e-', n), 'm', n FROM %s",
		"INSERT INTO service_election_floor (anchor, term_floor) SELECT CONCAT('e-', n), n FROM %s",
		"INSERT INTO service_election_history (anchor, slot, term, holder, began, started_at) SELECT CONCAT('e-', n), 0, n, 'm', 'first', 1 FROM %s",
	} {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(q, nums)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tbl := range []string{"service_election", "service_election_floor", "service_election_history"} {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+tbl); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// Explain returns the EXPLAIN that prints db's server's plan as a table of
// rows (MySQL 9 explains in a tree by default).
func Explain(t testing.TB, ctx context.Context, db *sql.DB) string {
	t.Helper()
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(version, "MariaDB") {
		return "EXPLAIN "
	}
	return "EXPLAIN FORMAT=TRADITIONAL "
}

// AwaitLockWait waits until a transaction of db's database waits for a
// row lock (information_schema's innodb_trx), and returns. If done
// receives first (the waiter ended without waiting), it returns what it
// received and true; it fails t when ctx ends. The server refreshes
// innodb_trx only once it has gone unread for 100 ms (InnoDB's
// trx0i_s.cc, CACHE_MIN_IDLE_TIME_US): polled more often, it never shows
// a wait that began after the first poll, so it polls every 150 ms.
func AwaitLockWait[T any](t testing.TB, ctx context.Context, db *sql.DB, done <-chan T) (T, bool) {
	t.Helper()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.innodb_trx t
JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			var zero T
			return zero, false
		}
		select {
		case <-tick.C:
		case r := <-done:
			return r, true
		case <-ctx.Done():
			t.Fatal("testdb: no transaction waited for a row lock")
		}
	}
}
