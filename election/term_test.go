package election_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/schema"
)

// termBackends are the two backends, built on db.
func termBackends(db *sql.DB) []struct {
	name string
	new  func(election.Config) (election.Election, error)
} {
	return []struct {
		name string
		new  func(election.Config) (election.Election, error)
	}{
		{"table", func(c election.Config) (election.Election, error) { return election.NewTable(db, c) }},
		{"lock", func(c election.Config) (election.Election, error) { return election.NewLock(db, c) }},
	}
}

// leadTerm runs the candidate newElection builds from cfg until it leads,
// stops it (it resigns, releasing the row), and returns the term it led
// with, as OnElected gave it.
func leadTerm(t *testing.T, ctx context.Context, newElection func(election.Config) (election.Election, error), cfg election.Config) uint64 {
	t.Helper()
	elected := make(chan uint64, 1)
	cfg.Callbacks.OnElected = func(_ context.Context, l election.Leadership) {
		term := l.Term
		select {
		case elected <- term:
		default:
		}
	}
	e, err := newElection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	defer func() { rcancel(); <-done }()
	select {
	case term := <-elected:
		return term
	case err := <-done:
		t.Fatalf("%s: Run returned %v before it led", cfg.ID, err)
	case <-ctx.Done():
		t.Fatalf("%s did not lead: %v", cfg.ID, ctx.Err())
	}
	return 0
}

// TestTermsIncreaseAcrossOperators: every leadership's term is above every
// earlier one's, across a DELETE (Reelect), a plain-SQL REPLACE, and
// Assume, even when the database clock is far behind the terms issued
// (the term floor, migration 6). The clock is behind because the library
// issued a term an hour ahead of it: the row's term is moved an hour ahead
// with plain SQL, Assume issues the next term above it, and the named
// candidate leads with a term above that, as after a database clock
// stepped back by an hour.
func TestTermsIncreaseAcrossOperators(t *testing.T) {
	t.Parallel() // terms only, on a database of its own: no window to keep
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	const hour = uint64(time.Hour / time.Microsecond)
	for _, bk := range termBackends(db) {
		t.Run(bk.name, func(t *testing.T) {
			name := "terms-" + bk.name + "-" + randHex(4)
			lead := func(id string) uint64 { return leadTerm(t, ctx, bk.new, sessionClockConfig(name, id)) }
			check := func(what string, got, last uint64) {
				t.Helper()
				if got <= last {
					t.Errorf("%s: a leadership with term %d after one with %d; want higher", what, got, last)
					return
				}
				t.Logf("%s: term %d after %d (+%d µs)", what, got, last, got-last)
			}
			last := lead("a")

			// The clock an hour behind the terms issued.
			if _, err := db.ExecContext(ctx, `UPDATE service_election SET term = term + ? WHERE anchor = ?`, hour, name); err != nil {
				t.Fatal(err)
			}
			rec, err := ops(db).Assume(ctx, name, "b")
			if err != nil {
				t.Fatal(err)
			}
			check("Assume", rec.Term, last+hour)
			last = max(last, rec.Term)
			got := lead("b")
			check("the claim after Assume", got, last)
			last = max(last, got)

			// A DELETE (Reelect): the next row is inserted with a term
			// above the floor, not the clock's.
			if _, err := ops(db).Reelect(ctx, name); err != nil {
				t.Fatal(err)
			}
			got = lead("c")
			check("a new row after Reelect", got, last)
			last = max(last, got)

			// A plain-SQL DELETE, a plain-SQL REPLACE naming d: its row's
			// term is the clock's (lower), but d leads only once it
			// claimed the row with a term above the floor.
			if _, err := db.ExecContext(ctx, `DELETE FROM service_election WHERE anchor = ?`, name); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `REPLACE INTO service_election (anchor, service_id, last_seen_active) VALUES (?, 'd', NOW(6))`, name); err != nil {
				t.Fatal(err)
			}
			var replaced uint64
			if err := db.QueryRowContext(ctx, `SELECT term FROM service_election WHERE anchor = ?`, name).Scan(&replaced); err != nil {
				t.Fatal(err)
			}
			if replaced >= last {
				t.Fatalf("the REPLACE's term %d is not below the last leadership's %d: the clock is not behind", replaced, last)
			}
			got = lead("d")
			check("the claim after a plain REPLACE", got, last)
			last = max(last, got)

			// Assume over a plain REPLACE's lower term.
			if _, err := db.ExecContext(ctx, `REPLACE INTO service_election (anchor, service_id, last_seen_active) VALUES (?, 'x', NOW(6))`, name); err != nil {
				t.Fatal(err)
			}
			rec, err = ops(db).Assume(ctx, name, "e")
			if err != nil {
				t.Fatal(err)
			}
			check("Assume after a plain REPLACE", rec.Term, last)
			last = max(last, rec.Term)
			got = lead("e")
			check("the claim after Assume", got, last)
		})
	}
}

// TestTermAfterClockStepBack: a DELETE followed by a campaign, on a
// database clock set back 2 s, gives a higher term (issue 21). The server is
// a dedicated one whose clock libfaketime sets back: after candidate A led
// with term T, the clock is stepped back to 2 s before T; the election's row
// is deleted (Reelect) and candidate B's new row gets a term above T (the
// term floor) instead of the clock's. libfaketime runs with the host's
// server only (the others run in a Debian root of their own).
func TestTermAfterClockStepBack(t *testing.T) {
	lib := libfaketime()
	switch {
	case testing.Short():
		t.Skip("starts a server of its own")
	case lib == "":
		t.Skip("libfaketime is not installed (apt-get install -y libfaketime; make deps does): cannot set the server's clock back")
	case os.Getenv("SQLELECT_TEST_SERVER") != "" && os.Getenv("SQLELECT_TEST_SERVER") != mysqld.ServerHost:
		t.Skipf("libfaketime runs with the host's server only, not %s", os.Getenv("SQLELECT_TEST_SERVER"))
	}
	t.Parallel() // terms only, on a server of its own: no window to keep
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "sqlelect-faketime-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // read by user mysql
		t.Fatal(err)
	}
	offsetFile := filepath.Join(dir, "offset")
	setOffset := func(d time.Duration) {
		t.Helper()
		if err := os.WriteFile(offsetFile, []byte(fmt.Sprintf("%+.6f\n", d.Seconds())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setOffset(0)
	srv, err := mysqld.Start(ctx, mysqld.Options{
		Server:    mysqld.ServerHost,
		ExtraArgs: []string{"--innodb-buffer-pool-size=64M"},
		Env: []string{"LD_PRELOAD=" + lib, "FAKETIME_TIMESTAMP_FILE=" + offsetFile, "FAKETIME_NO_CACHE=1",
			"FAKETIME_DONT_FAKE_MONOTONIC=1"},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	admin := testdb.Open(t, srv.DSN(""))
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE sqlelect"); err != nil {
		t.Fatal(err)
	}
	dsn := srv.DSN("sqlelect")
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	clock := func() (us uint64, host time.Time) {
		t.Helper()
		if err := db.QueryRowContext(ctx, "SELECT FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000)").Scan(&us); err != nil {
			t.Fatal(err)
		}
		return us, time.Now()
	}
	for _, bk := range termBackends(db) {
		t.Run(bk.name, func(t *testing.T) {
			setOffset(0)
			name := "stepback-" + bk.name + "-" + randHex(4)
			before := leadTerm(t, ctx, bk.new, sessionClockConfig(name, "A"))

			// Step the clock back to 2 s before A's term, and wait until
			// the server reads it.
			now, _ := clock()
			back := time.Duration(now-before)*time.Microsecond + 2*time.Second
			setOffset(-back)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				if now, _ := clock(); now < before {
					t.Logf("database clock %v behind A's term", time.Duration(before-now)*time.Microsecond)
					break
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
					t.Fatalf("the server's clock was not set back: %v", ctx.Err())
				}
			}
			if _, err := ops(db).Reelect(ctx, name); err != nil {
				t.Fatal(err)
			}
			after := leadTerm(t, ctx, bk.new, sessionClockConfig(name, "B"))
			if now, _ := clock(); now >= before {
				t.Fatalf("the database clock caught up with A's term during the test: nothing shown")
			}
			if after <= before {
				t.Fatalf("a DELETE, then a campaign on a clock set back: term %d after %d; want higher", after, before)
			}
			t.Logf("term %d after %d (+%d µs) on a clock set back", after, before, after-before)
		})
	}
}

// TestFirstElectionSkipsLockDelay: the first campaign of an election that
// never existed, with the default durations (a lock delay of a whole lease,
// 15 s), leads at once: within a deadline well below the lock delay, with
// the row saying acquired = 'first'. Once the row is deleted (Reelect) the
// election has existed: the next insert is acquired = 'insert' and waits its
// lock delay out (it holds the row but does not lead). On both backends.
func TestFirstElectionSkipsLockDelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	for _, bk := range termBackends(db) {
		t.Run(bk.name, func(t *testing.T) {
			name := "first-" + bk.name + "-" + randHex(4)
			leadsFirst(t, ctx, db, bk.new, name)
			// After a DELETE: an insert, which waits out the lock delay.
			if _, err := ops(db).Reelect(ctx, name); err != nil {
				t.Fatal(err)
			}
			insertWaits(t, ctx, db, bk.new, name)
		})
	}
}

// TestFirstElectionAfterFloorTampering: an election's first insert skips
// the lock delay only while the floor table keeps its history (issue 31).
// After a TRUNCATE of the floor table, a DELETE of the election's floor
// row, or of another election's, then a DELETE of the row (Reelect), whose
// leader may still believe it leads, the next insert is acquired =
// 'insert' and waits its lock delay out. On both backends.
func TestFirstElectionAfterFloorTampering(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tamper := range []struct{ what, sql, of string }{ // of: whose floor row
		{"TRUNCATE", "TRUNCATE service_election_floor", ""},
		{"DELETE its floor row", "DELETE FROM service_election_floor WHERE anchor = ?", "its"},
		{"DELETE another's floor row", "DELETE FROM service_election_floor WHERE anchor = ?", "another's"},
	} {
		t.Run(tamper.what, func(t *testing.T) {
			for _, bk := range []string{"table", "lock"} {
				t.Run(bk, func(t *testing.T) {
					// A database each: a tampered table's marker, written
					// again, keeps first elections off for a lock delay.
					dsn := testdb.DSN(t)
					testdb.Migrate(t, dsn)
					db := testdb.Open(t, dsn)
					newElection := termBackend(db, bk)
					name, other := "tamper-"+randHex(4), "other-"+randHex(4)
					leadsFirst(t, ctx, db, newElection, other)
					leadsFirst(t, ctx, db, newElection, name)
					var args []any
					switch tamper.of {
					case "its":
						args = []any{name}
					case "another's":
						args = []any{other}
					}
					if _, err := db.ExecContext(ctx, tamper.sql, args...); err != nil {
						t.Fatal(err)
					}
					if _, err := ops(db).Reelect(ctx, name); err != nil {
						t.Fatal(err)
					}
					insertWaits(t, ctx, db, newElection, name)
				})
			}
		})
	}
}

// TestFirstElectionAfterUpgrade: an upgrade from a version without the
// term floor (schema version 5), where the operator deleted the row of an
// election whose leader still runs just before running the migrations: the
// next insert is acquired = 'insert' and waits its lock delay out, as the
// migration's marker is younger than the lock delay (issue 31). The marker
// sums the floor rows the migration created.
func TestFirstElectionAfterUpgrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, bk := range []string{"table", "lock"} {
		t.Run(bk, func(t *testing.T) {
			dsn := testdb.DSN(t)
			db := testdb.Open(t, dsn)
			m := schema.New(db)
			if err := m.Steps(ctx, 5); err != nil {
				t.Fatal(err)
			}
			name, kept := "upgrade-"+randHex(4), "kept-"+randHex(4)
			for _, n := range []string{name, kept} { // two leaders of the old version
				if _, err := db.ExecContext(ctx, "INSERT INTO service_election (anchor, service_id) VALUES (?, 'old')", n); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.ExecContext(ctx, "DELETE FROM service_election WHERE anchor = ?", name); err != nil {
				t.Fatal(err)
			}
			if err := m.Up(ctx); err != nil {
				t.Fatal(err)
			}
			var sum, floors uint64
			var young bool
			if err := db.QueryRowContext(ctx, `SELECT m.term_floor, m.marked_at > FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000) - 60000000,
  (SELECT SUM(CRC32(anchor)) FROM service_election_floor WHERE anchor <> '')
FROM service_election_floor m WHERE m.anchor = ''`).Scan(&sum, &young, &floors); err != nil {
				t.Fatalf("the marker: %v", err)
			}
			if sum != floors || !young {
				t.Errorf("the marker sums %d, written within the last minute %v; want %d (the floor row of %s), true", sum, young, floors, kept)
			}
			insertWaits(t, ctx, db, termBackend(db, bk), name)
		})
	}
}

// termBackend is termBackends' backend called name.
func termBackend(db *sql.DB, name string) func(election.Config) (election.Election, error) {
	for _, bk := range termBackends(db) {
		if bk.name == name {
			return bk.new
		}
	}
	return nil
}

// rowAcquired reads who holds election name's row, how its term began, and
// whether the holder renewed it since.
func rowAcquired(t *testing.T, ctx context.Context, db *sql.DB, name string) (id, how string, renewed bool) {
	t.Helper()
	err := db.QueryRowContext(ctx, `SELECT service_id, acquired, last_seen_active > term_started_at
FROM service_election WHERE anchor = ?`, name).Scan(&id, &how, &renewed)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return id, how, renewed
}

// leadsFirst runs a candidate of election name, which never existed, with
// the default durations (a lock delay of a whole lease, 15 s): it must lead
// within a deadline well below the lock delay, the row saying acquired =
// 'first'. It resigns, releasing the row.
func leadsFirst(t *testing.T, ctx context.Context, db *sql.DB, newElection func(election.Config) (election.Election, error), name string) {
	t.Helper()
	// 5 s is a third of the lock delay, and room for a loaded CI machine.
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	start := time.Now()
	leadTerm(t, fctx, newElection, election.Config{Name: name, ID: "first"})
	took := time.Since(start)
	fcancel()
	t.Logf("first election of %s led %v after Run began (default lock delay %v)", name, took, election.DefaultLeaseDuration)
	// leadTerm stopped it: the row is released, and still says how its
	// term began.
	if id, how, _ := rowAcquired(t, ctx, db, name); id != "first" || how != "first" {
		t.Errorf("after the first election the row says (%s, acquired %q); want (first, first)", id, how)
	}
}

// insertWaits runs a candidate of election name, whose row is missing, with
// a lock delay longer than the test: once it renewed the row it inserted,
// the row must say acquired = 'insert' and the candidate must not lead.
func insertWaits(t *testing.T, ctx context.Context, db *sql.DB, newElection func(election.Config) (election.Election, error), name string) {
	t.Helper()
	cfg := sessionClockConfig(name, "second")
	cfg.Tuning.LockDelay = time.Minute // longer than the test: it must hold without leading
	e, err := newElection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runElection(t, ctx, e)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, how, renewed := rowAcquired(t, ctx, db, name); id == "second" && renewed {
			if how != "insert" {
				t.Fatalf("after a DELETE the new row says acquired %q; want insert", how)
			}
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the second candidate did not insert a row: %v", ctx.Err())
		}
	}
	if e.IsLeader() {
		t.Fatalf("the insert after a DELETE leads at once; want it to wait out its lock delay (%v)", cfg.Tuning.LockDelay)
	}
}
