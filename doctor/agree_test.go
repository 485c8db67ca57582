package doctor_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestDoctorAgreesWithRun (issue 31): every session and schema that Run's
// preflight refuses, the doctor fails, through the same checks
// (preflightChecks), and what the doctor passes, Run campaigns on: for each
// setup and backend, the doctor's verdict and what Run does. (A server
// started with --sysdate-is-now: TestDoctorAgreesWithRunSysdateIsNow.)
func TestDoctorAgreesWithRun(t *testing.T) {
	t.Parallel()
	admin := testdb.Open(t, testdb.AdminDSN(t))
	var version string
	if err := admin.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		params map[string]string
		setup  func(t *testing.T, dsn string) string // returns the DSN to run with
		prop   string                                // the doctor's fail ("" for safe)
		want   error                                 // Run's error (nil: elected)
	}{
		{name: "plain"},
		{name: "autocommit=0", params: map[string]string{"autocommit": "0"}, prop: doctor.PropAutocommit, want: election.ErrNoAutocommit},
		{name: "completion_type=1", params: map[string]string{"completion_type": "1"}, prop: doctor.PropAutocommit, want: election.ErrNoAutocommit},
		{name: "sql_select_limit=1000", params: map[string]string{"sql_select_limit": "1000"}, prop: doctor.PropSelectLimit, want: election.ErrSelectLimit},
		{name: "DST time zone", params: map[string]string{"time_zone": "'" + testdb.DSTZone(t, admin) + "'"},
			prop: doctor.PropTimeZone, want: election.ErrUnsafeTimeZone},
		{name: "floor table dropped", setup: func(t *testing.T, dsn string) string {
			if _, err := testdb.Open(t, dsn).Exec("DROP TABLE service_election_floor"); err != nil {
				t.Fatal(err)
			}
			return dsn
		}, prop: doctor.PropFloorTable, want: election.ErrSchemaMismatch},
		{name: "history table dropped", setup: func(t *testing.T, dsn string) string {
			if _, err := testdb.Open(t, dsn).Exec("DROP TABLE service_election_history"); err != nil {
				t.Fatal(err)
			}
			return dsn
		}, prop: doctor.PropFloorTable, want: election.ErrSchemaMismatch},
		{name: "no privileges on the floor table", setup: func(t *testing.T, dsn string) string {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			user := "nofloor" + randHex(4)
			for _, s := range grantAll(user, "GRANT SELECT, INSERT, UPDATE, DELETE ON `"+cfg.DBName+"`.`service_election`") {
				if _, err := admin.Exec(s); err != nil {
					t.Fatal(err)
				}
			}
			for _, h := range userHosts {
				if _, err := admin.Exec("GRANT SELECT ON `" + cfg.DBName + "`.`service_election_floor` TO '" + user + "'@'" + h + "'"); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() {
				for _, h := range userHosts {
					_, _ = admin.Exec("DROP USER '" + user + "'@'" + h + "'")
				}
			})
			cfg.User, cfg.Passwd = user, "pw"
			return cfg.FormatDSN()
		}, prop: doctor.PropFloorTable, want: election.ErrAccessDenied},
		{name: "SIMULTANEOUS_ASSIGNMENT", params: map[string]string{"sql_mode": "'STRICT_TRANS_TABLES,SIMULTANEOUS_ASSIGNMENT'"},
			prop: doctor.PropAssignmentOrder, want: election.ErrSimultaneousAssignment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a database of its own
			if tc.prop == doctor.PropAssignmentOrder && !strings.Contains(strings.ToLower(version), "mariadb") {
				t.Skipf("SIMULTANEOUS_ASSIGNMENT is MariaDB's; server is %s", version)
			}
			dsn, _ := checkDB(t, tc.params)
			if tc.setup != nil {
				dsn = tc.setup(t, dsn)
			}
			db := testdb.Open(t, dsn)
			r := runCheck(t, db, election.Config{})
			for _, backend := range []string{doctor.BackendTable, doctor.BackendLock} {
				want := tc.want
				if tc.prop == doctor.PropAssignmentOrder && backend == doctor.BackendLock {
					want = nil // the lock backend's statements do not depend on the order
				}
				failed := r.Failed(backend)
				if want == nil && len(failed) != 0 || want != nil && !slices.Contains(failed, tc.prop) {
					t.Errorf("%s backend: the doctor fails %v, want %q", backend, failed, tc.prop)
				}
				wantRun(t, db, backend, want)
			}
		})
	}
}

// TestDoctorAgreesWithRunSysdateIsNow: on a server started with
// --sysdate-is-now, SYSDATE() is NOW(), which a session's SET @@timestamp
// moves, so the clock every statement writes and judges leases by
// (SYSDATE(6)) would move with a session clock left on the pool (see
// election's TestSessionTimestampOnPool) again. The doctor fails it (issue
// 31: it said safe), and Run refuses such a server at preflight with
// ErrSysdateIsNow, on both backends, instead of campaigning. The server is
// a dedicated one, of the kind $SQLELECT_TEST_SERVER picks.
func TestDoctorAgreesWithRunSysdateIsNow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, dsn := testdb.OwnServer(t, ctx, "--sysdate-is-now", "--innodb-buffer-pool-size=64M")
	db := testdb.Open(t, dsn)
	r := runCheck(t, db, election.Config{})
	for _, b := range []string{doctor.BackendTable, doctor.BackendLock} {
		if f, _ := r.Find(doctor.PropSysdate); f.StatusFor(b) != doctor.CheckFail || r.Safe(b) {
			t.Errorf("doctor, %s backend: %s is %s", b, doctor.PropSysdate, f.StatusFor(b))
		}
		wantRun(t, db, b, election.ErrSysdateIsNow)
	}
}

// wantRun runs a candidate of backend on db, and fails t unless Run stops
// at once with an error wrapping want, or, for want nil, the candidate is
// elected.
func wantRun(t *testing.T, db *sql.DB, backend string, want error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := election.Config{Name: "agree-" + randHex(4), ID: "A", LeaseDuration: time.Second,
		Tuning: election.TuningConfig{RenewDeadline: 600 * time.Millisecond, RenewInterval: 100 * time.Millisecond,
			RetryInterval: 100 * time.Millisecond, QueryTimeout: 500 * time.Millisecond, DisableFastHandover: true, DisableLockDelay: true}}
	elected := make(chan struct{})
	var once sync.Once
	cfg.Callbacks.OnElected = func(context.Context, election.Leadership) { once.Do(func() { close(elected) }) }
	newElection := election.NewTable
	if backend == doctor.BackendLock {
		newElection = election.NewLock
	}
	e, err := newElection(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	select {
	case <-elected:
		if want != nil {
			t.Errorf("%s backend: elected, want Run to fail with %v", backend, want)
		}
		cancel()
		<-done
	case err := <-done:
		if want == nil || !errors.Is(err, want) || ctx.Err() != nil {
			t.Errorf("%s backend: Run = %v (context: %v), want %v", backend, err, ctx.Err(), want)
		}
	}
}
