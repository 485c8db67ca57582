package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/schema"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// recipeDDL is the seed recipe's table, verbatim.
const recipeDDL = `CREATE TABLE service_election (
  anchor tinyint(3) unsigned NOT NULL,
  service_id varchar(128) NOT NULL,
  last_seen_active timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (anchor)
)`

// recipeODKU is the recipe's election statement, verbatim but for the id.
const recipeODKU = `insert ignore into service_election (
	anchor, service_id, last_seen_active
) values (
	1, ?, now()
) on duplicate key update
	service_id = if(last_seen_active < now() - interval 20 second, values(service_id), service_id),
	last_seen_active = if(service_id = values(service_id), values(last_seen_active), last_seen_active)`

func setup(t *testing.T) (context.Context, string, *sql.DB, *schema.Migrator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	db := testdb.Open(t, dsn)
	return ctx, dsn, db, schema.New(db)
}

func exec(t *testing.T, ctx context.Context, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func showCreate(t *testing.T, ctx context.Context, db *sql.DB) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE service_election").Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	return ddl
}

func version(t *testing.T, m *schema.Migrator) uint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, dirty, err := m.Version(ctx)
	if err != nil || dirty {
		t.Fatalf("Version() = %d, %v, %v", v, dirty, err)
	}
	return v
}

// matches counts the rows whose service_id equals id by the server's
// comparison.
func matches(t *testing.T, ctx context.Context, db *sql.DB, id string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM service_election WHERE service_id = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func leaseDefault(t *testing.T, ctx context.Context, db *sql.DB) string {
	t.Helper()
	var def string
	err := db.QueryRowContext(ctx, `SELECT COLUMN_DEFAULT FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND COLUMN_NAME = 'lease_ms'`).Scan(&def)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestMigrationsUpAndDown applies every migration one step at a time, then
// reverts them one at a time, checking what each changes: 2 makes
// service_id compare without padding, 3 makes the default lease the
// library's, 4 adds transfer_to with service_id's collation, 5 adds
// priority (default 0), 6 the term floor table, 7 the decision column, 8
// the floor's marker (its column marked_at, and its row), 9 the members
// table (package members), 10 the history table (package history).
func TestMigrationsUpAndDown(t *testing.T) {
	ctx, _, db, m := setup(t)
	if schema.Latest() != 10 {
		t.Fatalf("Latest() = %d: this test knows migrations 1 to 10", schema.Latest())
	}
	wantLease := fmt.Sprint(election.DefaultLeaseDuration.Milliseconds())
	check := func(v uint) {
		t.Helper()
		if got := version(t, m); got != v {
			t.Fatalf("version %d, want %d", got, v)
		}
		if v == 0 {
			var n int
			err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election'`).Scan(&n)
			if err != nil || n != 0 {
				t.Fatalf("at version 0 the table exists (%d, %v)", n, err)
			}
			return
		}
		exec(t, ctx, db, "DELETE FROM service_election")
		exec(t, ctx, db, "INSERT INTO service_election (anchor, service_id) VALUES ('e', 'n1')")
		padded := matches(t, ctx, db, "n1 ")
		if want := map[bool]int{true: 0, false: 1}[v >= 2]; padded != want || matches(t, ctx, db, "n1") != 1 {
			t.Errorf("version %d: 'n1 ' matches %d rows holding 'n1', want %d", v, padded, want)
		}
		if def, want := leaseDefault(t, ctx, db), map[bool]string{true: wantLease, false: "20000"}[v >= 3]; def != want {
			t.Errorf("version %d: lease_ms default %s, want %s", v, def, want)
		}
		var idColl, toColl, prioDefault sql.NullString
		err := db.QueryRowContext(ctx, `SELECT MAX(IF(COLUMN_NAME = 'service_id', COLLATION_NAME, NULL)),
  MAX(IF(COLUMN_NAME = 'transfer_to', COLLATION_NAME, NULL)),
  MAX(IF(COLUMN_NAME = 'priority', COLUMN_DEFAULT, NULL))
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election'`).Scan(&idColl, &toColl, &prioDefault)
		switch {
		case err != nil:
			t.Fatal(err)
		case toColl.Valid != (v >= 4):
			t.Errorf("version %d: transfer_to present %v", v, toColl.Valid)
		case toColl.Valid && toColl.String != idColl.String:
			t.Errorf("version %d: transfer_to collation %s, service_id's %s", v, toColl.String, idColl.String)
		case prioDefault.Valid != (v >= 5) || prioDefault.Valid && prioDefault.String != "0":
			t.Errorf("version %d: priority default %v, want 0 from version 5 on", v, prioDefault)
		}
		var floors int
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election_floor'`).Scan(&floors)
		if err != nil || floors != map[bool]int{true: 1, false: 0}[v >= 6] {
			t.Errorf("version %d: %d tables service_election_floor (%v), want one from version 6 on", v, floors, err)
		}
		// Version 7: the heartbeat's decision column, NULL outside the
		// heartbeat, which its CHECK constraint enforces.
		var decisions int
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election' AND COLUMN_NAME = 'decision'`).Scan(&decisions)
		if err != nil || decisions != map[bool]int{true: 1, false: 0}[v >= 7] {
			t.Errorf("version %d: %d columns decision (%v), want one from version 7 on", v, decisions, err)
		}
		if v >= 7 {
			if _, err := db.ExecContext(ctx, "UPDATE service_election SET decision = 'renewed'"); err == nil {
				t.Errorf("version %d: a row kept decision = 'renewed'; want the CHECK constraint to refuse it", v)
			}
		}
		// Version 8: the floor's marker (anchor ''), the sum of CRC32(anchor)
		// over the floor rows, written by the migration.
		var markers int
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'service_election_floor' AND COLUMN_NAME = 'marked_at'`).Scan(&markers)
		if err != nil || markers != map[bool]int{true: 1, false: 0}[v >= 8] {
			t.Errorf("version %d: %d columns marked_at (%v), want one from version 8 on", v, markers, err)
		}
		if v >= 8 {
			var ok sql.NullBool
			err := db.QueryRowContext(ctx, `SELECT m.term_floor = (SELECT COALESCE(SUM(CRC32(anchor)), 0) FROM service_election_floor WHERE anchor <> '') AND m.marked_at > 0
FROM service_election_floor m WHERE m.anchor = ''`).Scan(&ok)
			if err != nil || !ok.Bool {
				t.Errorf("version %d: the floor's marker: %v, %v; want the sum of the floor rows", v, ok, err)
			}
		}
		for _, tc := range []struct {
			table string
			from  uint
		}{{"service_election_members", 9}, {"service_election_history", 10}} {
			var n int
			err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, tc.table).Scan(&n)
			if err != nil || n != map[bool]int{true: 1, false: 0}[v >= tc.from] {
				t.Errorf("version %d: %d tables %s (%v), want one from version %d on", v, n, tc.table, err, tc.from)
			}
		}
	}
	check(0)
	for v := uint(1); v <= schema.Latest(); v++ {
		if err := m.Steps(ctx, 1); err != nil {
			t.Fatalf("step up to %d: %v", v, err)
		}
		if v == 6 {
			// Migration 6 seeds the floor with the existing row's term
			// (check(5) left one).
			var ok sql.NullBool
			err := db.QueryRowContext(ctx, `SELECT f.term_floor = e.term FROM service_election e
JOIN service_election_floor f ON f.anchor = e.anchor WHERE e.anchor = 'e'`).Scan(&ok)
			if err != nil || !ok.Bool {
				t.Errorf("version 6: the floor of the existing row: %v, %v; want its term", ok, err)
			}
		}
		check(v)
	}
	if err := m.Up(ctx); !errors.Is(err, schema.ErrNoChange) {
		t.Fatalf("Up at the latest version = %v, want ErrNoChange", err)
	}
	for v := schema.Latest(); v > 0; v-- {
		if err := m.Steps(ctx, -1); err != nil {
			t.Fatalf("step down from %d: %v", v, err)
		}
		check(v - 1)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	check(schema.Latest())
	if err := m.Down(ctx); err != nil {
		t.Fatal(err)
	}
	check(0)
}

// TestDDLMatchesMigrations: the script users copy gives the same table.
func TestDDLMatchesMigrations(t *testing.T) {
	ctx, dsn, db, m := setup(t)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	want := showCreate(t, ctx, db)
	exec(t, ctx, db, "DROP TABLE service_election")
	// The DDL has several statements (migration 2 prepares one).
	multi := testdb.Open(t, dsn+"&multiStatements=true")
	exec(t, ctx, multi, schema.DDL(""))
	if got := showCreate(t, ctx, db); got != want {
		t.Errorf("schema.DDL gives\n%s\nthe migrations\n%s", got, want)
	}
}

// TestUpRefusesOtherTables: migrate up over a table that is not sqlelect's
// does nothing and says what it found and what to do (migration 1's CREATE
// TABLE IF NOT EXISTS used to report success and leave it as it was). A
// candidate's preflight (here Check's) names the recipe's table exactly
// when the migrations do.
func TestUpRefusesOtherTables(t *testing.T) {
	for _, tc := range []struct {
		name, ddl string
		want      error
		msg       []string
	}{
		{"recipe", recipeDDL, schema.ErrRecipeTable,
			// MySQL 8.0.19 and later show no display width: tinyint unsigned.
			[]string{"anchor tinyint", "unsigned primary key, service_id varchar(128), last_seen_active timestamp", "sqlelect migrate adopt"}},
		{"orchestrator-host", `CREATE TABLE service_election (anchor TINYINT UNSIGNED NOT NULL PRIMARY KEY,
  host VARCHAR(128) NOT NULL, last_seen_active TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)`, schema.ErrForeignTable,
			[]string{"columns found: anchor tinyint", "host varchar(128)", "RENAME COLUMN host TO service_id"}},
		{"other", `CREATE TABLE service_election (id INT PRIMARY KEY, name VARCHAR(20))`, schema.ErrForeignTable,
			[]string{"columns found: id int", "name varchar(20)", "RENAME TABLE service_election TO service_election_old", "nothing done"}},
		{"recipe-datetime", strings.Replace(recipeDDL, "timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP", "datetime NOT NULL", 1),
			schema.ErrForeignTable, []string{"last_seen_active datetime"}},
		{"recipe-reordered", `CREATE TABLE service_election (service_id varchar(128) NOT NULL,
  last_seen_active timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, anchor int NOT NULL PRIMARY KEY)`, schema.ErrRecipeTable,
			[]string{"service_id varchar(128), last_seen_active timestamp, anchor int", "sqlelect migrate adopt"}},
		{"recipe-string-anchor", strings.Replace(recipeDDL, "tinyint(3) unsigned", "varchar(20)", 1),
			schema.ErrForeignTable, []string{"anchor varchar(20) primary key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _, db, m := setup(t)
			exec(t, ctx, db, tc.ddl)
			before := showCreate(t, ctx, db)
			for _, run := range []func(context.Context) error{m.Up, m.Down, func(ctx context.Context) error { return m.Steps(ctx, 1) }} {
				err := run(ctx)
				var le *schema.LayoutError
				if !errors.Is(err, tc.want) || !errors.As(err, &le) || le.Table != "service_election" {
					t.Fatalf("got %v, want a *LayoutError wrapping %v", err, tc.want)
				}
				for _, s := range tc.msg {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
			}
			if after := showCreate(t, ctx, db); after != before || version(t, m) != 0 {
				t.Errorf("the table or version changed:\n%s\n%s", before, after)
			}
			_, err := doctor.Check(ctx, db, election.Config{})
			recipe := strings.Contains(fmt.Sprint(err), "recipe's table")
			if !errors.Is(err, election.ErrSchemaMismatch) || recipe != (tc.want == schema.ErrRecipeTable) {
				t.Errorf("doctor.Check: %v; want ErrSchemaMismatch naming the recipe's table: %v", err, tc.want == schema.ErrRecipeTable)
			}
		})
	}
}

// TestUpRefusesSelectLimit: a session whose sql_select_limit is below its
// default (the DSN's, or the server's init_connect) would cut the reads
// of the table's columns short, and a sqlelect table would read as
// another's ("rename or drop it"). Up and Down refuse it, saying why, and
// create nothing; a DSN that sets it back to DEFAULT migrates.
func TestUpRefusesSelectLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	for _, limit := range []string{"0", "3"} {
		m := schema.New(testdb.Open(t, testdb.WithParams(t, dsn, map[string]string{"sql_select_limit": limit})))
		for _, run := range []func(context.Context) error{m.Up, m.Down} {
			if err := run(ctx); err == nil || !strings.Contains(err.Error(), "sql_select_limit is "+limit) {
				t.Errorf("sql_select_limit=%s: %v; want a refusal naming sql_select_limit", limit, err)
			}
		}
	}
	db := testdb.Open(t, dsn)
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("after the refusals: %d tables, %v; want none", tables, err)
	}
	if err := schema.New(testdb.Open(t, testdb.WithParams(t, dsn, map[string]string{"sql_select_limit": "DEFAULT"}))).Up(ctx); err != nil {
		t.Fatalf("sql_select_limit=DEFAULT: %v", err)
	}
}

// TestUpTableMissingAtVersion: the table was dropped by hand behind
// golang-migrate's back: up would record success without a table, down
// would fail half-way.
func TestUpTableMissingAtVersion(t *testing.T) {
	ctx, _, db, m := setup(t)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, ctx, db, "DROP TABLE service_election")
	for name, run := range map[string]func() error{
		"up":    func() error { return m.Up(ctx) },
		"down":  func() error { return m.Down(ctx) },
		"steps": func() error { return m.Steps(ctx, -1) },
	} {
		if err := run(); !errors.Is(err, schema.ErrTableMissing) || !strings.Contains(err.Error(), "migrate force -1") {
			t.Fatalf("%s = %v, want ErrTableMissing saying to force -1", name, err)
		}
	}
	if v := version(t, m); v != schema.Latest() {
		t.Fatalf("version %d after refusals", v)
	}
	if err := m.Force(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNewerSchema: a database migrated by a newer sqlelect is left alone.
func TestNewerSchema(t *testing.T) {
	ctx, _, db, m := setup(t)
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	newer := int(schema.Latest()) + 1
	if err := m.Force(ctx, newer); err != nil {
		t.Fatal(err)
	}
	before := showCreate(t, ctx, db)
	for name, run := range map[string]func() error{
		"up":      func() error { return m.Up(ctx) },
		"down":    func() error { return m.Down(ctx) },
		"steps":   func() error { return m.Steps(ctx, -1) },
		"adopt":   func() error { _, err := m.Adopt(ctx, schema.AdoptOptions{}); return err },
		"unadopt": func() error { return m.Unadopt(ctx) },
	} {
		err := run()
		want := fmt.Sprintf("version %d, this binary's latest is %d", newer, schema.Latest())
		if !errors.Is(err, schema.ErrSchemaNewer) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %v, want ErrSchemaNewer saying %q", name, err, want)
		}
	}
	if v := version(t, m); v != uint(newer) || showCreate(t, ctx, db) != before {
		t.Errorf("version %d after refusals, or the table changed", v)
	}
}

// TestAdopt converts the recipe's table (with and without the version 1 an
// older sqlelect's migrate up recorded over it), keeps the holder and its
// lease, gives the same table as the migrations, keeps the recipe's
// statement working, and reverts.
func TestAdopt(t *testing.T) {
	for _, recorded := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1-recorded=%v", recorded), func(t *testing.T) {
			ctx, _, db, m := setup(t)
			exec(t, ctx, db, recipeDDL)
			inserted := time.Now()
			exec(t, ctx, db, "INSERT INTO service_election VALUES (1, 'host-a', NOW() - INTERVAL 5 SECOND), (7, 'host-b', NOW() - INTERVAL 60 SECOND)")
			if recorded {
				if err := m.Force(ctx, 1); err != nil {
					t.Fatal(err)
				}
			}
			hs, err := m.Adopt(ctx, schema.AdoptOptions{RecipeTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if len(hs) != 2 || hs[0].Election != "1" || hs[0].ID != "host-a" || hs[1].Election != "7" || hs[1].ID != "host-b" {
				t.Fatalf("Adopt kept %+v", hs)
			}
			// Lease 30 s + 1 s (the recipe's NOW() has whole seconds) from a
			// renewal 5 s before the INSERT by that NOW(): 25 to 26 s left,
			// less the time the INSERT and Adopt took (a second or more on
			// a busy machine with MySQL's DDL); the other expired 29 s ago.
			took := time.Since(inserted)
			if l := hs[0].LeaseLeft; l < 25*time.Second-took || l > 26*time.Second {
				t.Errorf("lease left %v, want 25-26s less the %v since the INSERT", l, took)
			}
			if l := hs[1].LeaseLeft; l > -28*time.Second {
				t.Errorf("expired lease left %v, want about -30s", l)
			}
			// The adopted elections have existed: each has its term floor.
			var floors int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM service_election e
JOIN service_election_floor f ON f.anchor = e.anchor AND f.term_floor = e.term`).Scan(&floors); err != nil || floors != 2 {
				t.Errorf("after Adopt %d elections have their term floor (%v), want 2", floors, err)
			}
			if v := version(t, m); v != schema.Latest() {
				t.Errorf("version %d after Adopt, want %d", v, schema.Latest())
			}
			var released, lease int
			if err := db.QueryRowContext(ctx, "SELECT released, lease_ms FROM service_election WHERE anchor = '1'").Scan(&released, &lease); err != nil {
				t.Fatal(err)
			}
			if released != 0 || lease != 31000 {
				t.Errorf("adopted row released=%d lease_ms=%d, want 0, 31000", released, lease)
			}
			// The adoption period: rows written later without lease_ms get
			// the adopted lease, through every migration.
			if lease, ok, err := m.Adoption(ctx); err != nil || !ok || lease != 31*time.Second {
				t.Errorf("Adoption() = %v, %v, %v; want 31s, true", lease, ok, err)
			}
			if def := leaseDefault(t, ctx, db); def != "31000" {
				t.Errorf("lease_ms default %s after Adopt, want 31000", def)
			}
			// The same table as the migrations make, but for lease_ms's
			// default and comment, until the adoption period ends.
			adopted := showCreate(t, ctx, db)
			_, _, fdb, fm := setup(t)
			if err := fm.Up(ctx); err != nil {
				t.Fatal(err)
			}
			fresh := showCreate(t, ctx, fdb)
			if a, f := stripLease(adopted), stripLease(fresh); a != f {
				t.Errorf("adopted table\n%s\nmigrated table\n%s", adopted, fresh)
			}
			if _, ok, err := fm.Adoption(ctx); err != nil || ok {
				t.Errorf("Adoption() of a migrated table = %v, %v; want false", ok, err)
			}
			// The recipe's statement still works: another node changes
			// nothing, the holder renews.
			var seen1, seen2, seen3 time.Time
			read := func(dst *time.Time) string {
				var id string
				if err := db.QueryRowContext(ctx, "SELECT service_id, last_seen_active FROM service_election WHERE anchor = 1").Scan(&id, dst); err != nil {
					t.Fatal(err)
				}
				return id
			}
			read(&seen1)
			exec(t, ctx, db, recipeODKU, "host-c")
			if id := read(&seen2); id != "host-a" || !seen2.Equal(seen1) {
				t.Errorf("after another node's statement: %s at %v, want host-a at %v", id, seen2, seen1)
			}
			exec(t, ctx, db, recipeODKU, "host-a")
			if id := read(&seen3); id != "host-a" || !seen3.After(seen1) {
				t.Errorf("after the holder's statement: %s at %v, want host-a renewed after %v", id, seen3, seen1)
			}
			if _, err := m.Adopt(ctx, schema.AdoptOptions{}); !errors.Is(err, schema.ErrNoChange) {
				t.Errorf("second Adopt = %v, want ErrNoChange", err)
			}
			if !recorded {
				// Ending the period restores migration 3's default: the
				// table is then the migrations' exactly.
				if err := m.EndAdoption(ctx); err != nil {
					t.Fatal(err)
				}
				if a := showCreate(t, ctx, db); a != fresh {
					t.Errorf("table after EndAdoption\n%s\nmigrated table\n%s", a, fresh)
				}
				if err := m.EndAdoption(ctx); !errors.Is(err, schema.ErrNoChange) {
					t.Errorf("second EndAdoption = %v, want ErrNoChange", err)
				}
			}

			if err := m.Unadopt(ctx); err != nil {
				t.Fatal(err)
			}
			if v := version(t, m); v != 0 {
				t.Errorf("version %d after Unadopt, want none", v)
			}
			var id string
			var seen4 time.Time
			if err := db.QueryRowContext(ctx, "SELECT service_id, last_seen_active FROM service_election WHERE anchor = 1").Scan(&id, &seen4); err != nil {
				t.Fatal(err)
			}
			if id != "host-a" || !seen4.Equal(seen3) {
				t.Errorf("after Unadopt: %s at %v, want host-a at %v", id, seen4, seen3)
			}
			// Back to the recipe's layout: migrate up refuses it again.
			if err := m.Up(ctx); !errors.Is(err, schema.ErrRecipeTable) {
				t.Errorf("Up after Unadopt = %v, want ErrRecipeTable", err)
			}
		})
	}
}

// stripLease drops the lease_ms line of SHOW CREATE TABLE's output.
func stripLease(ddl string) string {
	var keep []string
	for _, l := range strings.Split(ddl, "\n") {
		if !strings.Contains(l, "`lease_ms`") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestAdoptionPeriodSurvivesMigrations: the adopted default of lease_ms
// stays through every order of migrations golang-migrate may run after
// Adopt (down to version 1 and up again, one step at a time), and through
// Unadopt; EndAdoption at any version restores that version's default.
func TestAdoptionPeriodSurvivesMigrations(t *testing.T) {
	ctx, _, db, m := setup(t)
	exec(t, ctx, db, recipeDDL)
	if _, err := m.Adopt(ctx, schema.AdoptOptions{RecipeTimeout: 25 * time.Second}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want string) {
		t.Helper()
		if def := leaseDefault(t, ctx, db); def != want {
			t.Errorf("lease_ms default %s %s, want %s", def, when, want)
		}
	}
	for v := schema.Latest(); v > 1; v-- {
		if err := m.Steps(ctx, -1); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("at version %d, down from %d", v-1, v), "26000")
	}
	for v := uint(2); v <= schema.Latest(); v++ {
		if err := m.Steps(ctx, 1); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("at version %d, up again", v), "26000")
	}
	// A row written without lease_ms, as the recipe's INSERT.
	exec(t, ctx, db, recipeODKU, "host-a")
	var lease int
	if err := db.QueryRowContext(ctx, "SELECT lease_ms FROM service_election WHERE anchor = '1'").Scan(&lease); err != nil {
		t.Fatal(err)
	}
	if lease != 26000 {
		t.Errorf("the recipe's INSERT got lease_ms %d, want 26000", lease)
	}
	if err := m.Steps(ctx, -int(schema.Latest()-2)); err != nil { // version 2: below migration 3
		t.Fatal(err)
	}
	if err := m.EndAdoption(ctx); err != nil {
		t.Fatal(err)
	}
	check("after EndAdoption at version 2", "20000")
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	check("after EndAdoption and Up", "15000")
	if _, ok, err := m.Adoption(ctx); err != nil || ok {
		t.Errorf("Adoption() after EndAdoption = %v, %v; want false", ok, err)
	}
	if err := m.EndAdoption(ctx); !errors.Is(err, schema.ErrNoChange) {
		t.Errorf("EndAdoption out of a period = %v, want ErrNoChange", err)
	}
}

// TestAdoptRefuses: what Adopt and Unadopt will not do leaves everything
// as it was.
func TestAdoptRefuses(t *testing.T) {
	ctx, _, db, m := setup(t)
	if _, err := m.Adopt(ctx, schema.AdoptOptions{}); !errors.Is(err, schema.ErrTableMissing) || !strings.Contains(err.Error(), "migrate up") {
		t.Errorf("Adopt with no table = %v, want ErrTableMissing", err)
	}
	for _, d := range []time.Duration{time.Millisecond, 1500 * time.Millisecond, -time.Second} {
		if _, err := m.Adopt(ctx, schema.AdoptOptions{RecipeTimeout: d}); err == nil || !strings.Contains(err.Error(), "whole seconds") {
			t.Errorf("Adopt with timeout %v = %v", d, err)
		}
	}
	exec(t, ctx, db, `CREATE TABLE service_election (id INT PRIMARY KEY)`)
	if _, err := m.Adopt(ctx, schema.AdoptOptions{}); !errors.Is(err, schema.ErrForeignTable) || !strings.Contains(err.Error(), "id int") {
		t.Errorf("Adopt of a foreign table = %v, want ErrForeignTable", err)
	}
	exec(t, ctx, db, "DROP TABLE service_election")
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Adopt(ctx, schema.AdoptOptions{}); !errors.Is(err, schema.ErrNoChange) {
		t.Errorf("Adopt of sqlelect's table = %v, want ErrNoChange", err)
	}
	for _, row := range []string{"('orders', 'n1')", "('300', 'n1')", "('2', REPEAT('x', 129))"} {
		exec(t, ctx, db, "DELETE FROM service_election")
		exec(t, ctx, db, "INSERT INTO service_election (anchor, service_id) VALUES "+row)
		if err := m.Unadopt(ctx); err == nil || !strings.Contains(err.Error(), "nothing done") {
			t.Errorf("Unadopt with row %s = %v, want a refusal", row, err)
		}
		if v := version(t, m); v != schema.Latest() {
			t.Errorf("version %d after a refused Unadopt", v)
		}
	}
}
