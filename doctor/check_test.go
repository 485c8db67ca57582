package doctor_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestMain tears down the shared test server of package testdb.
func TestMain(m *testing.M) { testdb.Main(m) }

// checkDB returns a migrated database on the shared server, its DSN with
// params added, and the pool.
func checkDB(t *testing.T, params map[string]string) (string, *sql.DB) {
	t.Helper()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		if k == "clientFoundRows" {
			cfg.ClientFoundRows = v == "true"
			continue
		}
		cfg.Params[k] = v
	}
	dsn = cfg.FormatDSN()
	return dsn, testdb.Open(t, dsn)
}

// runCheck runs Check with a deadline and logs the report.
func runCheck(t *testing.T, db *sql.DB, cfg election.Config) doctor.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := doctor.Check(ctx, db, cfg)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	logReport(t, r)
	return r
}

func logReport(t *testing.T, r doctor.Report) {
	t.Helper()
	t.Logf("server %s", r.Server)
	for _, f := range r.Findings {
		t.Logf("%-17s %-4s %v %s", f.Property, f.Status, f.Backends, f.Detail)
	}
}

// wantStatuses fails t unless each property has the status given, for
// backend, and every other property passes.
func wantStatuses(t *testing.T, r doctor.Report, backend string, want map[string]doctor.CheckStatus) {
	t.Helper()
	for _, f := range r.For(backend) {
		w, ok := want[f.Property]
		if !ok {
			w = doctor.CheckPass
		}
		if f.Status != w {
			t.Errorf("%s backend: %s is %s, want %s: %s", backend, f.Property, f.Status, w, f.Detail)
		}
	}
}

// serverWarnings are the warnings the docs announce for the server under
// test: on MySQL, writes on pooled connections wait for a row lock up to
// innodb_lock_wait_timeout (50 s by default; doc.go).
func serverWarnings(r doctor.Report) map[string]doctor.CheckStatus {
	if strings.Contains(strings.ToLower(r.Server), "mariadb") {
		return map[string]doctor.CheckStatus{}
	}
	return map[string]doctor.CheckStatus{doctor.PropStatementBounds: doctor.CheckWarn}
}

// TestCheckCIServer: the server CI runs (SQLELECT_TEST_SERVER) passes every
// property for both backends, but for the warnings the docs announce, with
// and without clientFoundRows, and the scratch rows are gone afterwards.
func TestCheckCIServer(t *testing.T) {
	for _, foundRows := range []string{"false", "true"} {
		t.Run("clientFoundRows="+foundRows, func(t *testing.T) {
			_, db := checkDB(t, map[string]string{"clientFoundRows": foundRows})
			r := runCheck(t, db, election.Config{})
			want := serverWarnings(r)
			wantStatuses(t, r, doctor.BackendTable, want)
			wantStatuses(t, r, doctor.BackendLock, want)
			if !r.Safe(doctor.BackendTable) || !r.Safe(doctor.BackendLock) {
				t.Errorf("not safe: table fails %v, lock fails %v", r.Failed(doctor.BackendTable), r.Failed(doctor.BackendLock))
			}
			f, _ := r.Find(doctor.PropAffectedRows)
			if got := strings.Contains(f.Detail, "CLIENT_FOUND_ROWS"); got != (foundRows == "true") {
				t.Errorf("affected rows with clientFoundRows=%s: %s", foundRows, f.Detail)
			}
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM service_election`).Scan(&n); err != nil || n != 0 {
				t.Errorf("rows left in the table: %d (%v)", n, err)
			}
		})
	}
}

// TestCheckDSTTimeZone: a session time zone with daylight saving time
// fails time_zone for both backends.
func TestCheckDSTTimeZone(t *testing.T) {
	zone := testdb.DSTZone(t, testdb.Open(t, testdb.AdminDSN(t)))
	_, db := checkDB(t, map[string]string{"time_zone": "'" + zone + "'"})
	r := runCheck(t, db, election.Config{})
	wantFailed(t, r, doctor.PropTimeZone)
}

// TestCheckSimultaneousAssignment: MariaDB's SIMULTANEOUS_ASSIGNMENT
// sql_mode fails assignment_order for the table backend only.
func TestCheckSimultaneousAssignment(t *testing.T) {
	_, admin := checkDB(t, nil)
	var version string
	if err := admin.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		t.Skipf("SIMULTANEOUS_ASSIGNMENT is MariaDB's; server is %s", version)
	}
	_, db := checkDB(t, map[string]string{"sql_mode": "'STRICT_TRANS_TABLES,SIMULTANEOUS_ASSIGNMENT'"})
	r := runCheck(t, db, election.Config{})
	if got := r.Failed(doctor.BackendTable); len(got) != 1 || got[0] != doctor.PropAssignmentOrder {
		t.Errorf("table backend fails %v, want [%s]", got, doctor.PropAssignmentOrder)
	}
	if got := r.Failed(doctor.BackendLock); len(got) != 0 {
		t.Errorf("lock backend fails %v, want none (its statements do not depend on the order)", got)
	}
}

// TestCheckMissingGrant: a user with SELECT only fails privileges, and
// Check writes nothing.
func TestCheckMissingGrant(t *testing.T) {
	dsn, admin := checkDB(t, nil)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	user := "doctor_" + randHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range grantAll(user, "GRANT SELECT ON `"+cfg.DBName+"`.*") {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, h := range userHosts {
			_, _ = admin.ExecContext(ctx, "DROP USER '"+user+"'@'"+h+"'")
		}
	})
	cfg.User, cfg.Passwd = user, "pw"
	db := testdb.Open(t, cfg.FormatDSN())
	r := runCheck(t, db, election.Config{})
	f, _ := r.Find(doctor.PropPrivileges)
	if f.Status != doctor.CheckFail || !strings.Contains(f.Detail, "INSERT, UPDATE, DELETE") {
		t.Errorf("privileges: %s %s", f.Status, f.Detail)
	}
	// The floor table too (SELECT on the database only): Run refuses both.
	for _, b := range []string{doctor.BackendTable, doctor.BackendLock} {
		if got := r.Failed(b); !slices.Equal(got, []string{doctor.PropPrivileges, doctor.PropFloorTable}) {
			t.Errorf("%s backend fails %v, want [%s %s]", b, got, doctor.PropPrivileges, doctor.PropFloorTable)
		}
	}
}

// TestCheckReadOnly: a read-only server (read_only=ON, a user without
// SUPER) fails read_only.
func TestCheckReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startServer(t, ctx)
	root := testdb.Open(t, srv.DSN(""))
	user := "doctor_" + randHex(6)
	for _, q := range append([]string{"CREATE DATABASE sqlelect"}, grantAll(user, "GRANT SELECT, INSERT, UPDATE, DELETE ON sqlelect.*")...) {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	testdb.Migrate(t, srv.DSN("sqlelect"))
	if _, err := root.ExecContext(ctx, "SET GLOBAL read_only = ON"); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(srv.DSN("sqlelect"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = user, "pw"
	db := testdb.Open(t, cfg.FormatDSN())
	r := runCheck(t, db, election.Config{})
	f, _ := r.Find(doctor.PropReadOnly)
	if f.Status != doctor.CheckFail || !strings.Contains(f.Detail, "read_only=ON") {
		t.Errorf("read_only: %s %s", f.Status, f.Detail)
	}
	wantFailed(t, r, doctor.PropReadOnly)
}

// TestCheckStatementBinlog (issue 31, item 5): a server that writes its
// binary log as statements fails binlog_format for both backends (a
// replica evaluates the heartbeat by its own clock).
func TestCheckStatementBinlog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, dsn := testdb.OwnServer(t, ctx, "--log-bin=binlog", "--binlog-format=STATEMENT", "--server-id=1", "--innodb-buffer-pool-size=64M")
	r := runCheck(t, testdb.Open(t, dsn), election.Config{})
	wantFailed(t, r, doctor.PropBinlogFormat)
}

// TestNames: the doctor spells the backends and the properties of Run's
// preflight checks as internal/probe does.
func TestNames(t *testing.T) {
	for _, tc := range []struct{ doctor, probe string }{
		{doctor.BackendTable, probe.Table},
		{doctor.BackendLock, probe.Lock},
		{doctor.PropFloorTable, probe.FloorTable},
		{doctor.PropTimeZone, probe.TimeZone},
		{doctor.PropAutocommit, probe.Autocommit},
		{doctor.PropAssignmentOrder, probe.AssignmentOrder},
		{doctor.PropSysdate, probe.Sysdate},
		{doctor.PropSelectLimit, probe.SelectLimit},
		{doctor.PropTopology, probe.Topology},
	} {
		if tc.doctor != tc.probe {
			t.Errorf("doctor says %q, probe %q", tc.doctor, tc.probe)
		}
	}
}

// TestCheckNilDB: no pool, no check.
func TestCheckNilDB(t *testing.T) {
	if _, err := doctor.Check(context.Background(), nil, election.Config{}); !errors.Is(err, election.ErrNilDB) {
		t.Errorf("err = %v", err)
	}
}

// startServer starts a throwaway server of the kind the tests run on
// (SQLELECT_TEST_SERVER), for a test that changes its global settings.
func startServer(t *testing.T, ctx context.Context) *mysqld.Server {
	t.Helper()
	srv, err := mysqld.Start(ctx, mysqld.Options{ExtraArgs: []string{"--character-set-server=utf8mb4"}, Logf: t.Logf})
	if errors.Is(err, mysqld.ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// userHosts are the hosts a test user is created for: '%' alone loses to
// MariaDB's anonymous ”@'localhost' for a client on 127.0.0.1.
var userHosts = []string{"%", "localhost", "127.0.0.1"}

// grantAll returns the statements that create user (password pw) for
// userHosts and give it grant ("GRANT … ON …") on each.
func grantAll(user, grant string) []string {
	var out []string
	for _, h := range userHosts {
		out = append(out, "CREATE USER '"+user+"'@'"+h+"' IDENTIFIED BY 'pw'", grant+" TO '"+user+"'@'"+h+"'")
	}
	return out
}

// wantFailed fails t unless property is the only one that fails, for both
// backends (neither is then safe).
func wantFailed(t *testing.T, r doctor.Report, property string) {
	t.Helper()
	for _, b := range []string{doctor.BackendTable, doctor.BackendLock} {
		if got := r.Failed(b); len(got) != 1 || got[0] != property || r.Safe(b) {
			t.Errorf("%s backend fails %v, want [%s]", b, got, property)
		}
	}
}
