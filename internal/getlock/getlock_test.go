package getlock

import (
	"strings"
	"testing"

	"github.com/sqlelect/sqlelect/internal/ident"
)

// The names of the lock backend's lock and of the handover lock (moved
// from election's TestLockName with the functions it tested).
func TestNames(t *testing.T) {
	const prefix, hashPrefix = "sqlelect:", "sqlelect#"
	const db, tbl = "app", "service_election"
	scope := prefix + db + "." + tbl + ":"
	if got := Name(db, tbl, "jobs"); got != scope+"jobs" {
		t.Errorf("Name(app, service_election, jobs) = %q", got)
	}
	if got := Name("other", db+"."+tbl, "jobs"); got != scope+"jobs" {
		t.Errorf("Name(other, app.service_election, jobs) = %q, want the qualifier as the database", got)
	}
	// 64 characters: still plain; one more and it is hashed.
	fits := strings.Repeat("a", MaxNameLen-len(scope))
	if got := Name(db, tbl, fits); got != scope+fits {
		t.Errorf("Name(%d chars) = %q, want the name as it is", len(fits), got)
	}
	type lock struct{ db, tbl, name string }
	locks := []lock{
		{db, tbl, fits + "b"}, {db, tbl, fits + "c"}, // too long: hashed, not truncated into one
		{db, tbl, strings.Repeat("x", 128)},
		{db, tbl, "Jobs"}, {db, tbl, "JOBS"}, {db, tbl, "jobs.Eu"}, // upper case: MySQL folds lock names to lower case
		{"App", tbl, "jobs"}, {"APP", tbl, "jobs"}, {db, "Service_election", "jobs"}, // so do databases and tables
		{"my-app", tbl, "jobs"}, {"", tbl, "jobs"}, // not plain identifiers
		{strings.Repeat("d", 64), tbl, "jobs"}, {db, strings.Repeat("t", 64), "jobs"},
	}
	seen := map[string]lock{}
	for _, l := range []lock{{db, tbl, "jobs"}, {db, tbl, fits}, {"other", tbl, "jobs"}, {db, "t2", "jobs"}, {db, tbl, "x.service_election:jobs"}} {
		got := Name(l.db, l.tbl, l.name)
		if !strings.HasPrefix(got, prefix) || len(got) > MaxNameLen {
			t.Errorf("Name(%q, %q, %q) = %q, want it readable", l.db, l.tbl, l.name, got)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("Name%v = Name%v = %q", l, prev, got)
		}
		seen[got] = l
	}
	for _, l := range locks {
		got := Name(l.db, l.tbl, l.name)
		if len(got) != MaxNameLen || !strings.HasPrefix(got, hashPrefix) {
			t.Errorf("Name(%q, %q, %q) = %q: want %q and hex, %d characters", l.db, l.tbl, l.name, got, hashPrefix, MaxNameLen)
		}
		if strings.ToLower(got) != got {
			t.Errorf("Name(%q, %q, %q) = %q is not lower case", l.db, l.tbl, l.name, got)
		}
		if again := Name(l.db, l.tbl, l.name); again != got {
			t.Errorf("Name(%q, %q, %q) not deterministic: %q then %q", l.db, l.tbl, l.name, got, again)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("Name%v = Name%v = %q", l, prev, got)
		}
		seen[got] = l
	}
	for _, n := range []string{"a", "svc-1.prod:eu/west@x_y"} {
		if err := ident.Name(n); err != nil {
			t.Fatal(err)
		}
		if got := Name(db, tbl, n); got != scope+n {
			t.Errorf("Name(%q) = %q, want it readable", n, got)
		}
	}
	// The handover lock of the table backend: hashed, distinct per
	// database, table and name, and never a lock backend's name.
	wake := map[string]lock{}
	for _, l := range []lock{{db, tbl, "jobs"}, {"other", tbl, "jobs"}, {db, "t2", "jobs"}, {db, tbl, "jobs2"}, {"App", tbl, "jobs"}} {
		got := WakeName(l.db, l.tbl, l.name)
		if len(got) != MaxNameLen || strings.ToLower(got) != got || got == Name(l.db, l.tbl, l.name) {
			t.Errorf("WakeName(%q, %q, %q) = %q", l.db, l.tbl, l.name, got)
		}
		if prev, dup := wake[got]; dup {
			t.Errorf("WakeName%v = WakeName%v = %q", l, prev, got)
		}
		wake[got] = l
	}
	if a, b := WakeName(db, tbl, "jobs"), WakeName("x", db+"."+tbl, "jobs"); a != b {
		t.Errorf("WakeName with a qualified table: %q, want %q", b, a)
	}
}

// The bell's name in SQL: the session's default database unless the table
// is qualified, folded where the server folds table names (the servers
// compute it: election's behaviour suite, RungRequestsActedOnAtOnce, runs
// the plain-SQL form docs/operations.md gives against it).
func TestBellSQL(t *testing.T) {
	for _, tc := range []struct{ table, want string }{
		{"service_election", "CONCAT(IF(@@lower_case_table_names = 0, DATABASE(), LOWER(DATABASE())), CHAR(0), IF(@@lower_case_table_names = 0, 'service_election', LOWER('service_election')), CHAR(0), 'jobs')"},
		{"app.t", "CONCAT(IF(@@lower_case_table_names = 0, 'app', LOWER('app')), CHAR(0), IF(@@lower_case_table_names = 0, 't', LOWER('t')), CHAR(0), 'jobs')"},
	} {
		got := BellSQL(tc.table, "jobs")
		if want := "CONCAT('sqlelect.bell#', LEFT(SHA2(" + tc.want + ", 256), 50))"; got != want {
			t.Errorf("BellSQL(%q, jobs) =\n%s\nwant\n%s", tc.table, got, want)
		}
	}
}
