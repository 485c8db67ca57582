package testdb_test

import (
	"context"
	"database/sql"
	"regexp"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var dbName = regexp.MustCompile(`^sqlelect_[0-9a-f]{12}$`)

func TestDSNGivesFreshEmptyDatabases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)

	dsn1, dsn2 := testdb.DSN(t), testdb.DSN(t)
	if dsn1 == dsn2 {
		t.Fatalf("DSN returned the same DSN twice: %s", dsn1)
	}
	db1, db2 := testdb.Open(t, dsn1), testdb.Open(t, dsn2)

	var names [2]string
	for i, db := range []*sql.DB{db1, db2} {
		var n int
		if err := db.QueryRowContext(ctx,
			"SELECT DATABASE(), (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE())",
		).Scan(&names[i], &n); err != nil {
			t.Fatalf("db%d: %v", i+1, err)
		}
		if !dbName.MatchString(names[i]) {
			t.Errorf("db%d: name %q does not match %v", i+1, names[i], dbName)
		}
		if n != 0 {
			t.Errorf("db%d (%s): %d tables, want 0", i+1, names[i], n)
		}
	}
	if names[0] == names[1] {
		t.Fatalf("both DSNs point at database %s", names[0])
	}

	// The databases are separate: a table in one is not in the other.
	if _, err := db1.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db2.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("table created in %s shows up in %s", names[0], names[1])
	}
}

func TestDSNSessionSettings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("ParseDSN(%q): %v", dsn, err)
	}
	if !cfg.ParseTime {
		t.Errorf("DSN %s: parseTime is off", dsn)
	}
	db := testdb.Open(t, dsn)
	var tz, cs string
	var now time.Time
	if err := db.QueryRowContext(ctx,
		"SELECT @@session.time_zone, @@character_set_database, UTC_TIMESTAMP(6)").Scan(&tz, &cs, &now); err != nil {
		t.Fatal(err)
	}
	if tz != "+00:00" {
		t.Errorf("session time_zone = %q, want +00:00", tz)
	}
	if cs != "utf8mb4" {
		t.Errorf("character_set_database = %q, want utf8mb4", cs)
	}
	if d := time.Since(now); d < -time.Minute || d > time.Minute {
		t.Errorf("UTC_TIMESTAMP() = %v, %v away from now", now, d)
	}
}

func TestDSNDropsDatabaseOnCleanup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	admin := testdb.Open(t, testdb.AdminDSN(t))
	var name string
	t.Run("user", func(t *testing.T) {
		cfg, err := mysql.ParseDSN(testdb.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		name = cfg.DBName
	})
	if name == "" {
		t.Fatal("subtest did not get a database")
	}
	var n int
	if err := admin.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

// TestServerKillRestart kills the shared server; it must not run in
// parallel with the other tests of this package.
func TestServerKillRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := testdb.Server(t)
	db := testdb.Open(t, testdb.DSN(t))
	if err := srv.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	pingCtx, pingCancel := context.WithTimeout(ctx, 5*time.Second)
	err := db.PingContext(pingCtx)
	pingCancel()
	if err == nil {
		t.Fatal("ping after Kill succeeded")
	}
	// DSN brings a killed shared server back before creating a database.
	db2 := testdb.Open(t, testdb.DSN(t))
	if err := db2.PingContext(ctx); err != nil {
		t.Fatalf("ping after DSN restarted the server: %v", err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	// Left down on purpose: Server's and DSN's cleanups restart it.
}

// TestServerIsUpAfterKillTest runs after TestServerKillRestart left the
// server down, and checks the cleanups brought it back.
func TestServerIsUpAfterKillTest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	db := testdb.Open(t, testdb.AdminDSN(t))
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("shared server is down: %v", err)
	}
}
