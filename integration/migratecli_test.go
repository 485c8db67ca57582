package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/integration/testdb"
	"github.com/sqlelect/sqlelect/schema"
)

// migrateCLI builds golang-migrate's own CLI (the mysql driver only), once
// per test binary, from the version this module requires.
var migrateCLI = sync.OnceValues(func() (string, error) {
	dir, err := filepath.Abs(filepath.Join("testdata", ".bin"))
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "migrate")
	out, err := exec.Command("go", "build", "-tags", "mysql", "-o", bin, "github.com/golang-migrate/migrate/v4/cmd/migrate").CombinedOutput()
	if err != nil {
		return "", errors.New("go build migrate: " + err.Error() + "\n" + string(out))
	}
	return bin, nil
})

// runMigrateCLI runs `migrate -path ../migrations -database mysql://DSN
// args...` with golang-migrate's CLI, as its README shows, and returns its
// output; the DSN's own parameters are dropped but for query, which is
// appended (x-migrations-table=…).
func runMigrateCLI(t *testing.T, ctx context.Context, dsn, query string, args ...string) (string, error) {
	t.Helper()
	bin, err := migrateCLI()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	url := "mysql://" + cfg.User + ":" + cfg.Passwd + "@tcp(" + cfg.Addr + ")/" + cfg.DBName
	if query != "" {
		url += "?" + query
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"-path", filepath.Join("..", "migrations"), "-database", url}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// migrationsRow reads golang-migrate's record in table; ok false when the
// table does not exist or holds no row.
func migrationsRow(t *testing.T, ctx context.Context, db *sql.DB, table string) (version int, dirty, ok bool) {
	t.Helper()
	err := db.QueryRowContext(ctx, "SELECT version, dirty FROM `"+table+"` LIMIT 1").Scan(&version, &dirty)
	if err != nil {
		var me *mysql.MySQLError
		if errors.Is(err, sql.ErrNoRows) || errors.As(err, &me) && me.Number == 1146 {
			return 0, false, false
		}
		t.Fatal(err)
	}
	return version, dirty, true
}

// holderRow inserts an election row and returns a function that checks it
// is still there, unchanged.
func holderRow(t *testing.T, ctx context.Context, db *sql.DB) func(when string) {
	t.Helper()
	if _, err := db.ExecContext(ctx, "INSERT INTO service_election (anchor, service_id, lease_ms) VALUES ('jobs', 'node-1', 60000)"); err != nil {
		t.Fatal(err)
	}
	return func(when string) {
		t.Helper()
		var id string
		var lease int
		if err := db.QueryRowContext(ctx, "SELECT service_id, lease_ms FROM service_election WHERE anchor = 'jobs'").Scan(&id, &lease); err != nil || id != "node-1" || lease != 60000 {
			t.Errorf("%s: the election's row is %q, lease %d (%v), want node-1 with 60000", when, id, lease, err)
		}
	}
}

// TestMigrateCLI runs golang-migrate's own CLI against sqlelect's
// migrations in the three orders a team may use: the line docs/embedding.md
// shows (which records in sqlelect's table), and the two mix-ups with the CLI's default
// table. No order may lose the election's row or leave a table dirty; a
// mix-up sqlelect can see is refused, naming the fix.
func TestMigrateCLI(t *testing.T) {
	// Databases of its own; it waits on the CLI's build and runs, and no
	// lease is timed: beside the package's other waiting tests at the end.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	latest := int(schema.Latest())

	t.Run("documented line", func(t *testing.T) {
		dsn := testdb.DSN(t)
		db := testdb.Open(t, dsn)
		if out, err := runMigrateCLI(t, ctx, dsn, "x-migrations-table="+schema.MigrationsTable, "up"); err != nil {
			t.Fatalf("migrate up: %v\n%s", err, out)
		}
		if v, dirty, ok := migrationsRow(t, ctx, db, schema.MigrationsTable); !ok || v != latest || dirty {
			t.Fatalf("%s: version %d dirty %v (recorded %v), want %d clean", schema.MigrationsTable, v, dirty, ok, latest)
		}
		if _, _, ok := migrationsRow(t, ctx, db, "schema_migrations"); ok {
			t.Errorf("the CLI recorded in schema_migrations too")
		}
		if err := schema.New(db).Up(ctx); !errors.Is(err, schema.ErrNoChange) {
			t.Fatalf("sqlelect's migrate up after the CLI's: %v, want no change", err)
		}
	})

	t.Run("sqlelect first, then the CLI's default table", func(t *testing.T) {
		dsn := testdb.DSN(t)
		db := testdb.Open(t, dsn)
		testdb.Migrate(t, dsn)
		intact := holderRow(t, ctx, db)
		// The CLI runs every migration again, recording in schema_migrations:
		// each must change nothing and succeed (no half-applied, dirty state).
		if out, err := runMigrateCLI(t, ctx, dsn, "", "up"); err != nil {
			t.Fatalf("migrate up with the default table: %v\n%s", err, out)
		}
		if v, dirty, ok := migrationsRow(t, ctx, db, "schema_migrations"); !ok || v != latest || dirty {
			t.Errorf("schema_migrations: version %d dirty %v (recorded %v), want %d clean", v, dirty, ok, latest)
		}
		if v, dirty, _ := migrationsRow(t, ctx, db, schema.MigrationsTable); v != latest || dirty {
			t.Errorf("%s: version %d dirty %v, want %d clean", schema.MigrationsTable, v, dirty, latest)
		}
		intact("after the CLI's run")
	})

	t.Run("the CLI's default table first, then sqlelect", func(t *testing.T) {
		dsn := testdb.DSN(t)
		db := testdb.Open(t, dsn)
		if out, err := runMigrateCLI(t, ctx, dsn, "", "up"); err != nil {
			t.Fatalf("migrate up with the default table: %v\n%s", err, out)
		}
		intact := holderRow(t, ctx, db)
		m := schema.New(db)
		err := m.Up(ctx)
		if !errors.Is(err, schema.ErrUnrecorded) || !strings.Contains(err.Error(), fmt.Sprintf("'sqlelect migrate force %d'", latest)) ||
			!strings.Contains(err.Error(), "x-migrations-table="+schema.MigrationsTable) {
			t.Fatalf("sqlelect's migrate up: %v, want ErrUnrecorded naming the fix", err)
		}
		if v, dirty, ok := migrationsRow(t, ctx, db, schema.MigrationsTable); ok && (v != -1 || dirty) {
			t.Errorf("%s after the refusal: version %d dirty %v, want nothing recorded", schema.MigrationsTable, v, dirty)
		}
		intact("after the refusal")
		// The fix the error names.
		if err := m.Force(ctx, latest); err != nil {
			t.Fatal(err)
		}
		if err := m.Up(ctx); !errors.Is(err, schema.ErrNoChange) {
			t.Fatalf("migrate up after force %d: %v, want no change", latest, err)
		}
		intact("after the fix")
	})
}
