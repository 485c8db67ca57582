package election_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/takeset"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// loadFlappingZone loads into the server's time zone tables a made-up zone,
// named after the test, with daylight saving time as fast as the tables
// allow: from the server's clock now, its offset flips between +00:00 and
// +01:00 every period, for span; after that it keeps a plain DST rule (+00:00
// in winter, +01:00 in summer; 2030 is what the library's check looks at).
// A spring-forward (+00:00 to +01:00) moves every local time an hour ahead,
// so that a lease written just before it reads, in that zone, as an hour
// older than it is. It returns the zone's name; the rows are deleted when t
// ends (the server may keep the zone cached, under a name no one uses again).
func loadFlappingZone(t *testing.T, ctx context.Context, period, span time.Duration) string {
	t.Helper()
	admin := testdb.Open(t, testdb.AdminDSN(t))
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	name := "Sqlelect/Dst" + randHex(4)
	res, err := conn.ExecContext(ctx, `INSERT INTO mysql.time_zone (Use_leap_seconds) VALUES ('N')`)
	if err != nil {
		t.Fatalf("loading a time zone (the test needs an administrative user): %v", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, tbl := range []string{"time_zone_transition", "time_zone_transition_type", "time_zone_name", "time_zone"} {
			if _, err := admin.ExecContext(ctx, `DELETE FROM mysql.`+tbl+` WHERE Time_zone_id = ?`, id); err != nil {
				t.Errorf("deleting zone %s from mysql.%s: %v", name, tbl, err)
			}
		}
	})
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO mysql.time_zone_name (Name, Time_zone_id) VALUES (?, ?)`, name, id)
	exec(`INSERT INTO mysql.time_zone_transition_type (Time_zone_id, Transition_type_id, `+"`Offset`"+`, Is_DST, Abbreviation)
VALUES (?, 0, 0, 0, 'STD'), (?, 1, 3600, 1, 'DST')`, id, id)
	var now int64
	if err := conn.QueryRowContext(ctx, `SELECT UNIX_TIMESTAMP()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	step := int64(period / time.Second)
	var at []int64
	var typ []int
	for k := int64(1); k <= int64(span/period); k++ {
		at, typ = append(at, now+k*step), append(typ, int(k%2))
	}
	if typ[len(typ)-1] == 1 { // winter until 2030's spring
		at, typ = append(at, at[len(at)-1]+step), append(typ, 0)
	}
	spring, autumn := time.Date(2030, 3, 31, 1, 0, 0, 0, time.UTC), time.Date(2030, 10, 27, 1, 0, 0, 0, time.UTC)
	at, typ = append(at, spring.Unix(), autumn.Unix()), append(typ, 1, 0)
	for i := range at {
		exec(`INSERT INTO mysql.time_zone_transition (Time_zone_id, Transition_time, Transition_type_id) VALUES (?, ?, ?)`,
			id, at[i], typ[i])
	}
	return name
}

// errorLog is a slog handler that counts the logged errors matching target.
type errorLog struct {
	target error
	n      atomic.Int64
}

func (h *errorLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *errorLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *errorLog) WithGroup(string) slog.Handler            { return h }
func (h *errorLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, h.target) {
			h.n.Add(1)
		}
		return true
	})
	return nil
}

// TestSessionDSTZoneOnPool: application code leaves a time_zone with
// daylight saving time on a connection of a candidate's pool, and on every
// one the pool opens after (zonePool), after Run checked the zone at
// preflight, so ErrUnsafeTimeZone cannot catch it.
// The zone springs forward every other second (see loadFlappingZone).
//
//   - On a follower's pool: right after a spring-forward, a lease its
//     holder renewed just before reads an hour old, and the follower used
//     to take the row while the holder still led (it renews every 450 ms:
//     the gap is most of that). Its heartbeats must fail with
//     ErrUnsafeSession instead, and it is not elected while the leader
//     renews.
//   - On the leader's pool: its renewals must fail with ErrUnsafeSession;
//     it loses its lease by its own clock, and the follower is never
//     elected while it still leads.
func TestSessionDSTZoneOnPool(t *testing.T) {
	t.Parallel() // waits on leases, on a database and an election of its own
	for _, tc := range []struct {
		name     string
		onLeader bool
	}{
		{"follower", false},
		{"leader", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dsn := testdb.DSN(t)
			testdb.Migrate(t, dsn)
			clean := testdb.Open(t, dsn)
			zone := loadFlappingZone(t, ctx, time.Second, 50*time.Second)
			name := "session-dst-" + randHex(4)
			lpool, setL := zonePool(t, ctx, dsn)
			fpool, setF := zonePool(t, ctx, dsn)
			w := newOverlapWatch()
			var l, f election.Election
			lc, fc := sessionClockConfig(name, "L"), sessionClockConfig(name, "F")
			lc.Tuning.RenewInterval = 450 * time.Millisecond
			lc.Callbacks = w.callbacks("L", func() []election.Election { return []election.Election{f} })
			fc.Callbacks = w.callbacks("F", func() []election.Election { return []election.Election{l} })
			sawL := make(chan struct{})
			var once atomic.Bool
			fc.Callbacks.OnLeaderChanged = func(r election.Record) {
				if r.ID == "L" && once.CompareAndSwap(false, true) {
					close(sawL)
				}
			}
			unsafe := &errorLog{target: election.ErrUnsafeSession}
			if tc.onLeader {
				lc.Tuning.Logger = slog.New(unsafe)
			} else {
				fc.Tuning.Logger = slog.New(unsafe)
			}
			var err error
			if l, err = election.NewTable(lpool, lc); err != nil {
				t.Fatal(err)
			}
			if f, err = election.NewTable(fpool, fc); err != nil {
				t.Fatal(err)
			}
			runElection(t, ctx, l)
			w.waitElected(t, ctx, "L")
			runElection(t, ctx, f)
			select { // F's preflight is done: it follows L
			case <-sawL:
			case <-ctx.Done():
				t.Fatal("F never saw L lead")
			}
			if tc.onLeader {
				setL(zone)
				// L's renewals are refused: F takes over once L's lease
				// runs out, and never while L leads.
				w.waitElected(t, ctx, "F")
			} else {
				setF(zone)
				// Six spring-forwards by the database clock.
				if other := w.holdsFor(t, ctx, clean, name, "L", 12*time.Second); other != "" {
					t.Errorf("%s was elected while L renewed", other)
				}
			}
			w.check(t)
			if unsafe.n.Load() == 0 {
				t.Errorf("no statement failed with %v", election.ErrUnsafeSession)
			}
		})
	}
}

// zonePool is onePool whose sessions, once set is called, all run in
// zone: the connection it holds then (set runs SET time_zone on it) and
// any it opens later (the driver sets time_zone as it connects). The
// library discards a connection whose statement outlived its deadline, so
// a tamper of one connection alone may be undone: in CI (2026-12-02) the
// leader then renewed on a fresh, clean session and kept leading, and the
// follower waited in vain to take over.
func zonePool(t *testing.T, ctx context.Context, dsn string) (*sql.DB, func(zone string)) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var zone atomic.Pointer[string]
	if err := cfg.Apply(mysql.BeforeConnect(func(_ context.Context, c *mysql.Config) error {
		if z := zone.Load(); z != nil {
			c.Params = maps.Clone(c.Params)
			if c.Params == nil {
				c.Params = map[string]string{}
			}
			c.Params["time_zone"] = "'" + *z + "'"
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := oneConn(sql.OpenDB(conn))
	t.Cleanup(func() { db.Close() })
	return db, func(z string) {
		t.Helper()
		zone.Store(&z)
		tamper(t, ctx, db, fmt.Sprintf("SET time_zone = '%s'", z))
	}
}

// TestSessionDSTZoneOnBatchedPool: a Batcher's takes of many elections go
// in one heartbeat statement (Batcher.takeSet), where an untrusted
// session's NULL anchor does not stop the statement as it stops a single
// heartbeat's. On a session whose time zone has daylight saving time,
// such a batch must take none of its expired rows and fail (each
// election then sends its heartbeat alone, which reports ErrUnsafeSession);
// on a clean session the same batch takes them all.
func TestSessionDSTZoneOnBatchedPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	clean := testdb.Open(t, dsn)
	zone := loadFlappingZone(t, ctx, time.Second, 10*time.Second)
	name := "session-dst-batched-" + randHex(4)
	names := []string{name + "-0", name + "-1"}
	for _, n := range names { // expired rows of L's
		if _, err := clean.ExecContext(ctx, `INSERT INTO service_election (anchor, service_id, term, term_started_at, last_seen_active, lease_ms)
VALUES (?, 'L', 7, NOW(6) - INTERVAL 5 SECOND, NOW(6) - INTERVAL 5 SECOND, 1)`, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		what string
		set  []string
		want int64 // each heartbeat's affected rows
	}{
		{"daylight saving time", []string{"SET time_zone = '" + zone + "'", "SET sql_mode = ''"}, 0},
		{"clean", nil, 2},
	} {
		b, err := election.NewBatcher(onePool(t, ctx, dsn, tc.set...), election.BatcherOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, errs, err := election.TakeBatch(ctx, b, "F", 10*time.Second, names)
		if tc.want == 0 && !errors.Is(err, takeset.ErrUntrusted) {
			t.Errorf("%s: the batch's error is %v, want %v", tc.what, err, takeset.ErrUntrusted)
		}
		if tc.want != 0 && (err != nil || errs[0] != nil || errs[1] != nil) {
			t.Errorf("%s: the batch's error is %v, the heartbeats' %v", tc.what, err, errs)
		}
		var took int
		if err := clean.QueryRowContext(ctx, `SELECT COUNT(*) FROM service_election WHERE anchor IN (?, ?) AND service_id = 'F'`, names[0], names[1]).Scan(&took); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 2}[tc.want != 0]; took != want || n[0] != tc.want || n[1] != tc.want {
			t.Errorf("%s: F took %d rows, its heartbeats' affected rows %v: want %d, and %d each", tc.what, took, n, want, tc.want)
		}
	}
}

// TestRunRefusesUnknownTimeZone: a DSN whose time_zone the server has no
// tables for fails every connection (1298), which no retry fixes: Run ends
// at once with ErrUnknownTimeZone on both backends (it used to retry until
// its context ended, then return nil).
func TestRunRefusesUnknownTimeZone(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db, err := sql.Open("mysql", testdb.WithParams(t, dsn, map[string]string{"time_zone": "'Nowhere/Nothing'"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, tc := range []struct {
		name string
		new  func(*sql.DB, election.Config) (*election.Candidate, error)
	}{
		{"table", election.NewTable},
		{"lock", election.NewLock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.Cleanup(cancel)
			e, err := tc.new(db, sessionClockConfig("unknown-tz-"+randHex(4), "A"))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Run(ctx); !errors.Is(err, election.ErrUnknownTimeZone) || ctx.Err() != nil {
				t.Errorf("Run = %v (context: %v), want %v before the context ends", err, ctx.Err(), election.ErrUnknownTimeZone)
			}
		})
	}
}

// TestSysdateProbeAcrossFallBack: the --sysdate-is-now probe, which a
// statement refused by the session check runs, read SYSDATE(6) twice around
// a 2 ms sleep and refused the server when the second read was not later.
// In a session time zone with daylight saving time, a fall-back between the
// reads makes the second an hour earlier, and a leader whose connection had
// such a zone stopped with ErrSysdateIsNow instead of standing down and
// retrying (TestSessionDSTZoneOnPool in CI). Probed without pause on such a
// session across three fall-backs, it never refuses the server.
func TestSysdateProbeAcrossFallBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	clean := testdb.Open(t, dsn)
	zone := loadFlappingZone(t, ctx, time.Second, 10*time.Second)
	db := onePool(t, ctx, dsn, fmt.Sprintf("SET time_zone = '%s'", zone))
	now := func() (s int64) {
		if err := clean.QueryRowContext(ctx, `SELECT UNIX_TIMESTAMP()`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The zone falls back 2, 4 and 6 s after it was loaded.
	for n, start, at := 0, now(), int64(0); at < start+7; n++ {
		if err := probe.CheckSysdate(ctx, db); err != nil {
			t.Fatalf("probe %d: %v", n, err)
		}
		if n%50 == 0 {
			at = now()
		}
	}
}
