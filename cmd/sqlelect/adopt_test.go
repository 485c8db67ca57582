package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/schema"
)

// TestMigrateAdoptCLI: on the MySQL-table recipe's table, every command
// says what it found and what to do (it used to say "run migrate up"
// forever, migrate up reporting success); adopt converts it keeping the
// holder, unadopt reverts it.
func TestMigrateAdoptCLI(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	dsn := testdb.DSN(t)
	db := testdb.Open(t, dsn)
	if _, err := db.ExecContext(ctx, `CREATE TABLE service_election (
  anchor tinyint(3) unsigned NOT NULL,
  service_id varchar(128) NOT NULL,
  last_seen_active timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (anchor))`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election VALUES (1, 'host-a', NOW())`); err != nil {
		t.Fatal(err)
	}
	has := func(r result, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(r.stdout+r.stderr, p) {
				t.Errorf("want %q in\n%s", p, r)
			}
		}
	}
	has(mustRun(t, ctx, dsn, exitTable, append([]string{"campaign", "1", "--id", "n1"}, fastFlags...)...),
		"columns found: anchor tinyint", "unsigned, service_id varchar(128), last_seen_active timestamp", "sqlelect migrate adopt")
	has(mustRun(t, ctx, dsn, exitTable, "migrate", "up"),
		"layout of the MySQL-table recipe (anchor tinyint", "unsigned primary key, service_id varchar(128), last_seen_active timestamp)",
		"sqlelect migrate adopt", "nothing done")
	has(mustRun(t, ctx, dsn, 0, "migrate", "version"), "schema version 0 (latest 10)")
	has(mustRun(t, ctx, dsn, exitUsage, "migrate", "adopt"), "--yes")
	mustRun(t, ctx, dsn, exitUsage, "migrate", "adopt", "--yes", "--recipe-timeout", "1500ms")
	has(mustRun(t, ctx, dsn, 0, "migrate", "adopt", "--yes", "--recipe-timeout", "20s"),
		"schema version 0 -> 10 (latest 10): adopted", `election "1": holder host-a, live`)
	has(mustRun(t, ctx, dsn, 0, "status", "1"), "host-a", "live")
	has(mustRun(t, ctx, dsn, 0, "migrate", "adopt", "--yes"), "no change")
	has(mustRun(t, ctx, dsn, 0, "migrate", "version"), "adoption period: rows written without lease_ms get a 21s lease", "adopt-end")
	has(mustRun(t, ctx, dsn, 0, "migrate", "adopt-end"), "adoption period ended", "instead of 21s")
	if r := mustRun(t, ctx, dsn, 0, "migrate", "version"); strings.Contains(r.stdout, "adoption") {
		t.Errorf("migrate version after adopt-end still reports an adoption period:\n%s", r)
	}
	has(mustRun(t, ctx, dsn, 0, "migrate", "adopt-end"), "no change", "no adoption period")
	has(mustRun(t, ctx, dsn, 0, "migrate", "unadopt", "--yes"), "schema version 10 -> none", "recipe's table again")
	has(mustRun(t, ctx, dsn, exitTable, "migrate", "up"), "sqlelect migrate adopt")

	// Neither sqlelect's nor the recipe's.
	other := testdb.DSN(t)
	odb := testdb.Open(t, other)
	if _, err := odb.ExecContext(ctx, `CREATE TABLE service_election (id INT PRIMARY KEY, name VARCHAR(20))`); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "adopt", "--yes"}, {"migrate", "down", "--yes"}} {
		has(mustRun(t, ctx, other, exitTable, args...), "service_election", "columns found: id int", "name varchar(20)", "RENAME TABLE")
	}
}

// TestMigrateNewerSchema: a schema migrated by a newer sqlelect is refused
// with exit 8 and left as it is.
func TestMigrateNewerSchema(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	newer := fmt.Sprint(schema.Latest() + 1)
	// As a newer sqlelect records it (force refuses versions it does not know).
	if _, err := testdb.Open(t, dsn).ExecContext(ctx, "UPDATE "+schema.MigrationsTable+" SET version = "+newer); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ctx, dsn, exitUsage, "migrate", "force", newer)
	want := fmt.Sprintf("version %s, this binary's latest is %d", newer, schema.Latest())
	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "down", "--yes"}, {"migrate", "adopt", "--yes"}, {"migrate", "unadopt", "--yes"}} {
		r := mustRun(t, ctx, dsn, exitSchemaNewer, args...)
		if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "newer") {
			t.Errorf("%q: want %q in\n%s", args, want, r)
		}
	}
	r := mustRun(t, ctx, dsn, exitSchemaNewer, "migrate", "version")
	if !strings.Contains(r.stdout, "schema version "+newer) || !strings.Contains(r.stderr, "newer than this binary") {
		t.Errorf("migrate version on a newer schema:\n%s", r)
	}
	mustRun(t, ctx, dsn, 0, "status")
}
