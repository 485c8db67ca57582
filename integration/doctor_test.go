package integration

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/election"
)

// gmsTable is the election table as go-mysql-server takes it (the
// migrations' prepared statements and expression defaults are MySQL's).
const gmsTable = `CREATE TABLE service_election (
  anchor VARCHAR(128) NOT NULL,
  service_id VARCHAR(255) NOT NULL,
  last_seen_active TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  term BIGINT UNSIGNED NOT NULL DEFAULT 0,
  term_started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  lease_ms INT UNSIGNED NOT NULL DEFAULT 15000,
  released TINYINT UNSIGNED NOT NULL DEFAULT 0,
  acquired VARCHAR(16) NOT NULL DEFAULT 'operator',
  value VARCHAR(1024) NOT NULL DEFAULT '',
  backend VARCHAR(16) NOT NULL DEFAULT 'table',
  connection_id BIGINT UNSIGNED NULL DEFAULT NULL,
  transfer_to VARCHAR(255) NULL DEFAULT NULL,
  priority INT UNSIGNED NOT NULL DEFAULT 0,
  decision ENUM('renewed', 'expired', 'claimed', 'released', 'transferred') NULL DEFAULT NULL,
  PRIMARY KEY (anchor),
  CONSTRAINT service_election_decision CHECK (decision IS NULL)
)`

// gmsFloorTable is the term floor table (migrations 6, 8 and 10) as
// go-mysql-server takes it.
const gmsFloorTable = `CREATE TABLE service_election_floor (
  anchor VARCHAR(128) NOT NULL,
  term_floor BIGINT UNSIGNED NOT NULL,
  marked_at BIGINT UNSIGNED NULL DEFAULT NULL,
  terms BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (anchor)
)`

// gmsHistoryTable is the history table (migration 10) as go-mysql-server
// takes it.
const gmsHistoryTable = `CREATE TABLE service_election_history (
  anchor VARCHAR(128) NOT NULL,
  slot SMALLINT UNSIGNED NOT NULL,
  term BIGINT UNSIGNED NOT NULL,
  holder VARCHAR(255) NOT NULL,
  began VARCHAR(16) NOT NULL,
  started_at BIGINT UNSIGNED NOT NULL,
  ended_at BIGINT UNSIGNED NULL DEFAULT NULL,
  ended VARCHAR(16) NULL DEFAULT NULL,
  PRIMARY KEY (anchor, slot)
)`

// startGMS starts dolthub/go-mysql-server (an in-memory database named
// sqlelect, with the election table) on a free loopback port, and returns
// a pool on it.
func startGMS(t *testing.T, ctx context.Context) *sql.DB {
	t.Helper()
	mdb := memory.NewDatabase("sqlelect")
	mdb.BaseDatabase.EnablePrimaryKeyIndexes()
	pro := memory.NewDBProvider(mdb)
	engine := sqle.NewDefault(pro)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := server.NewServer(server.Config{Protocol: "tcp", Address: addr}, engine, gmssql.NewContext, memory.NewSessionBuilder(pro), nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Start() }()
	t.Cleanup(func() { _ = s.Close() })
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", addr, "sqlelect"
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	for {
		err := db.PingContext(ctx)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("go-mysql-server at %s: %v", addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := db.ExecContext(ctx, gmsTable); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{gmsFloorTable, gmsHistoryTable} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestDoctorGoMySQLServer: doctor's verdict on dolthub/go-mysql-server, a
// server that speaks MySQL's protocol but not all of its semantics: the
// heartbeat cannot write a new term (its GREATEST takes no DECIMAL; before
// the term floor, only the takeover of an expired row failed so)
// (affected_rows fails: the table backend is unsafe), the topology variables are unknown to it (the
// lock backend is unsafe), and its SKIP LOCKED and FOR UPDATE lock nothing
// (warnings: a Batcher's, and the statement bounds).
func TestDoctorGoMySQLServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	db := startGMS(t, ctx)
	r, err := doctor.Check(ctx, db, election.Config{})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	t.Logf("server %s", r.Server)
	for _, f := range r.Findings {
		t.Logf("%-17s %-4s %v %s", f.Property, f.Status, f.Backends, f.Detail)
	}
	want := map[string][]string{
		doctor.BackendTable: {doctor.PropAffectedRows},
		doctor.BackendLock:  {doctor.PropTopology},
	}
	for b, props := range want {
		if got := r.Failed(b); strings.Join(got, ",") != strings.Join(props, ",") {
			t.Errorf("%s backend fails %v, want %v", b, got, props)
		}
	}
	// Its GREATEST takes no DECIMAL (FLOOR's): it refuses the heartbeat's
	// term, above the floor since migration 6 (the insert, step 1), and
	// above the row's (the takeover, step 5).
	if f, _ := r.Find(doctor.PropAffectedRows); !strings.Contains(f.Detail, "unsupported type for greatest") {
		t.Errorf("affected_rows: %s", f.Detail)
	}
	for _, p := range []string{doctor.PropSkipLocked, doctor.PropStatementBounds} {
		if f, _ := r.Find(p); f.StatusFor(doctor.BackendTable) != doctor.CheckWarn {
			t.Errorf("%s: %s %s", p, f.Status, f.Detail)
		}
	}
}

// TestPreflightRefusesGoMySQLServer: Run's preflight sends the heartbeat
// probe, and stops with ErrUnsafeServer on go-mysql-server, which refuses
// the heartbeat's new terms: a candidate would otherwise campaign on a
// server where nobody is ever elected. The lock backend's topology check
// comes after the probe (go-mysql-server answers its variable reads with an
// error that is no refusal, which Run would retry for ever).
func TestPreflightRefusesGoMySQLServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := startGMS(t, ctx)
	for _, tc := range []struct {
		backend string
		new     func(*sql.DB, election.Config) (*election.Candidate, error)
	}{{"table", election.NewTable}, {"lock", election.NewLock}} {
		t.Run(tc.backend, func(t *testing.T) {
			e, err := tc.new(db, election.Config{Name: "gms-" + tc.backend, LeaseDuration: time.Second, Tuning: election.TuningConfig{DisableFastHandover: true}})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			err = e.Run(runCtx)
			if !errors.Is(err, election.ErrUnsafeServer) || !strings.Contains(err.Error(), "unsupported type for greatest") {
				t.Fatalf("Run on go-mysql-server: %v (after the run's context: %v), want ErrUnsafeServer", err, runCtx.Err())
			}
			t.Logf("Run: %v", err)
		})
	}
}
