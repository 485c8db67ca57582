package members_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/members"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// backends are the two candidate constructors: Run is the same for both.
var backends = []struct {
	name string
	new  func(*sql.DB, election.Config) (*election.Candidate, error)
}{
	{"table", election.NewTable},
	{"lock", election.NewLock},
}

// setup returns a context with the test's deadline and a migrated
// database of the test's own.
func setup(t *testing.T) (context.Context, *sql.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	return ctx, testdb.Open(t, dsn)
}

func randName(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return t.Name()[:min(len(t.Name()), 40)] + "-" + hex.EncodeToString(b[:])
}

// config is a short-lease election of candidate id.
func config(name, id string) election.Config {
	return election.Config{Name: name, ID: id, LeaseDuration: time.Second,
		Tuning: election.TuningConfig{RenewInterval: 100 * time.Millisecond, RetryInterval: 100 * time.Millisecond, QueryTimeout: 500 * time.Millisecond}}
}

// start runs a member of candidate cfg through members.Run until the test
// ends or stop is called; stop returns Run's error.
func start(t *testing.T, ctx context.Context, db *sql.DB, newC func(*sql.DB, election.Config) (*election.Candidate, error), cfg election.Config, o members.Options) (c *election.Candidate, stop func() error) {
	t.Helper()
	c, err := newC(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- members.Run(rctx, db, c, cfg, o) }()
	var result error
	var stopped bool
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return c, stop
}

// waitMembers polls List until cond holds for the members of election
// name, and returns them.
func waitMembers(t *testing.T, ctx context.Context, db *sql.DB, name, what string, cond func([]members.Member) bool) []members.Member {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ms, err := members.List(ctx, db, "", name)
		if err != nil {
			t.Fatal(err)
		}
		if cond(ms) {
			return ms
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: members %+v", what, ms)
		}
	}
}

// TestRunRegistersAndRemoves: a member is listed, live, with its version,
// host and priority, while its candidate runs, and its refreshes move
// last_seen on; a clean exit removes it at once. On both backends.
func TestRunRegistersAndRemoves(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx, db := setup(t)
			name := randName(t)
			cfg := config(name, "a")
			cfg.Preference.Priority = 7
			_, stop := start(t, ctx, db, b.new, cfg, members.Options{Version: "1.2.3", Host: "host-a"})
			cfgB := config(name, "b")
			_, _ = start(t, ctx, db, b.new, cfgB, members.Options{Version: "1.2.4", Host: "host-b"})
			// Healthy once each candidate campaigns (its first step).
			ms := waitMembers(t, ctx, db, name, "a and b live and campaigning", func(ms []members.Member) bool {
				return len(ms) == 2 && ms[0].Live && ms[1].Live && ms[0].Healthy && ms[1].Healthy
			})
			a := ms[0]
			if a.ID != "a" || a.Version != "1.2.3" || a.Host != "host-a" || a.Priority != 7 || !a.Healthy || a.Lease != time.Second ||
				a.Election != name || len(a.Incarnation) != 16 || a.Started.IsZero() || a.LastSeen.Before(a.Started) {
				t.Fatalf("member a: %+v", a)
			}
			waitMembers(t, ctx, db, name, "a refreshed", func(ms []members.Member) bool {
				return len(ms) == 2 && ms[0].LastSeen.After(a.LastSeen)
			})
			// docs/operations.md's query agrees with List.
			var live []string
			rows, err := db.QueryContext(ctx, strings.ReplaceAll(opsQuery(t), "'orders-scheduler'", "?"), name)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id, version, host string
				var healthy, isLive bool
				if err := rows.Scan(&id, &version, &host, &healthy, &isLive); err != nil {
					t.Fatal(err)
				}
				if isLive {
					live = append(live, id)
				}
			}
			if err := rows.Close(); err != nil || strings.Join(live, ",") != "a,b" {
				t.Fatalf("docs/operations.md's query: live %v (%v); want a,b", live, err)
			}
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			ms, err = members.List(ctx, db, "", name)
			if err != nil || len(ms) != 1 || ms[0].ID != "b" {
				t.Fatalf("after a's Run returned: %+v, %v; want b alone", ms, err)
			}
		})
	}
}

// opsQuery is docs/operations.md's query of the members table.
func opsQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, s, _ := strings.Cut(string(b), "\nRead them with")
	_, s, _ = strings.Cut(s, "```sql\n")
	s, _, _ = strings.Cut(s, "```")
	return strings.TrimSuffix(strings.TrimSpace(s), ";")
}

// TestDuplicateIDRefused: a second process with the ID of a live member
// does not campaign: Run returns a DuplicateError naming the first's host,
// and the first keeps its place (and its leadership).
func TestDuplicateIDRefused(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx, db := setup(t)
			name := randName(t)
			elected := make(chan struct{})
			cfg := config(name, "same")
			cfg.Callbacks.OnElected = func(context.Context, election.Leadership) { close(elected) }
			first, _ := start(t, ctx, db, b.new, cfg, members.Options{Host: "first-host"})
			select {
			case <-elected:
			case <-ctx.Done():
				t.Fatal("the first process never led")
			}
			second, err := b.new(db, config(name, "same"))
			if err != nil {
				t.Fatal(err)
			}
			err = members.Run(ctx, db, second, config(name, "same"), members.Options{Host: "second-host"})
			var dup *members.DuplicateError
			if !errors.As(err, &dup) || !errors.Is(err, members.ErrDuplicateID) || dup.Other.Host != "first-host" {
				t.Fatalf("second Run: %v; want a DuplicateError naming first-host", err)
			}
			if second.Progress().Running || !first.IsLeader() {
				t.Fatalf("after the refusal: second ran %v, first leads %v", second.Progress().Running, first.IsLeader())
			}
			ms, err := members.List(ctx, db, "", name)
			if err != nil || len(ms) != 1 || ms[0].Host != "first-host" || !ms[0].Live {
				t.Fatalf("members %+v, %v; want the first alone", ms, err)
			}
		})
	}
}

// TestExpiredMemberReplaced: the row of a member that stopped refreshing
// (a process killed) no longer holds its ID once its lease ran out: a new
// process with that ID registers in its place.
func TestExpiredMemberReplaced(t *testing.T) {
	t.Parallel()
	ctx, db := setup(t)
	name := randName(t)
	_, err := db.ExecContext(ctx, `INSERT INTO service_election_members
  (anchor, member_id, incarnation, host, started_at, last_seen, lease_ms)
  VALUES (?, 'x', 'deadbeefdeadbeef', 'killed', 1, 1000, 1000)`, name)
	if err != nil {
		t.Fatal(err)
	}
	start(t, ctx, db, election.NewTable, config(name, "x"), members.Options{Host: "new"})
	waitMembers(t, ctx, db, name, "the new x", func(ms []members.Member) bool {
		return len(ms) == 1 && ms[0].Host == "new" && ms[0].Live
	})
}

// TestUntrustedSessionRegistersNothing: on a session whose time zone has
// daylight saving time (the database clock in local time jumps by an hour),
// registration changes nothing, not even an expired row of its ID (the
// DELETE checks dbclock.Trusted, as the INSERT does), and Run fails with
// the refusal of Run's preflight (election.ErrUnsafeTimeZone) before
// campaigning, instead of retrying.
func TestUntrustedSessionRegistersNothing(t *testing.T) {
	t.Parallel()
	ctx, db := setup(t)
	name := randName(t)
	if _, err := db.ExecContext(ctx, `INSERT INTO service_election_members
  (anchor, member_id, incarnation, host, started_at, last_seen, lease_ms)
  VALUES (?, 'x', 'deadbeefdeadbeef', 'killed', 1, 1000, 1000)`, name); err != nil {
		t.Fatal(err)
	}
	var dsn string
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dsn); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(testdb.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName, cfg.Params = dsn, map[string]string{"time_zone": "'" + testdb.DSTZone(t, db) + "'"}
	dst := testdb.Open(t, cfg.FormatDSN())
	ccfg := config(name, "x")
	c, err := election.NewTable(dst, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := members.Run(ctx, dst, c, ccfg, members.Options{Host: "new"}); !errors.Is(err, election.ErrUnsafeTimeZone) || c.Progress().Running {
		t.Fatalf("Run on a DST session: %v; want ErrUnsafeTimeZone before campaigning", err)
	}
	ms, err := members.List(ctx, db, "", name)
	if err != nil || len(ms) != 1 || ms[0].Host != "killed" {
		t.Fatalf("members %+v, %v: want the expired row left as it was", ms, err)
	}
}

// TestLostToAnotherIncarnation: when another process holds the ID by the
// time a member refreshes (its row expired during a stall and another
// registered), the member's candidate stops and Run returns the
// DuplicateError: the live one keeps its place.
func TestLostToAnotherIncarnation(t *testing.T) {
	t.Parallel()
	ctx, db := setup(t)
	name := randName(t)
	c, stop := start(t, ctx, db, election.NewTable, config(name, "y"), members.Options{Host: "stalled"})
	waitMembers(t, ctx, db, name, "y live and campaigning", func(ms []members.Member) bool { return len(ms) == 1 && ms[0].Live && ms[0].Healthy })
	// What another process's registration leaves after this one's row
	// expired.
	if _, err := db.ExecContext(ctx, `UPDATE service_election_members SET incarnation = 'feedfacefeedface', host = 'other'
WHERE anchor = ?`, name); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, ctx, c)
	var dup *members.DuplicateError
	if err := stop(); !errors.As(err, &dup) || dup.Other.Host != "other" {
		t.Fatalf("Run: %v; want a DuplicateError naming host other", err)
	}
	ms, err := members.List(ctx, db, "", name)
	if err != nil || len(ms) != 1 || ms[0].Host != "other" {
		t.Fatalf("members %+v, %v: want the other process's row kept", ms, err)
	}
}

// waitStopped waits until c's Run returned, as when its ID went to another
// process.
func waitStopped(t *testing.T, ctx context.Context, c *election.Candidate) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.Progress().Running {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the candidate still runs after its ID went to another process")
		}
	}
}

// TestMissingTable: a database without migration 9 is refused with
// election.ErrTableMissing, naming the migration to run, before the
// candidate campaigns.
func TestMissingTable(t *testing.T) {
	t.Parallel()
	ctx, db := setup(t)
	if _, err := db.ExecContext(ctx, "DROP TABLE service_election_members"); err != nil {
		t.Fatal(err)
	}
	cfg := config(randName(t), "z")
	c, err := election.NewTable(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = members.Run(ctx, db, c, cfg, members.Options{})
	if !errors.Is(err, election.ErrTableMissing) || c.Progress().Running {
		t.Fatalf("Run: %v; want ErrTableMissing before campaigning", err)
	}
	if _, err := members.List(ctx, db, "", "z"); !errors.Is(err, election.ErrTableMissing) {
		t.Fatalf("List: %v; want ErrTableMissing", err)
	}
}

// TestRestartOnSameHost: a process restarted on the same host after a
// crash (its row still live, its PID gone, or its own PID again in a new
// container) takes the row over at once instead of waiting out the lease;
// a live process of that host with another PID is a duplicate.
func TestRestartOnSameHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		dup  bool
	}{
		{"its process is gone", 1 << 30, false},
		{"its PID is this process's", os.Getpid(), false},
		{"its process runs", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, db := setup(t)
			name := randName(t)
			_, err := db.ExecContext(ctx, `INSERT INTO service_election_members
  (anchor, member_id, incarnation, host, pid, started_at, last_seen, lease_ms)
  VALUES (?, 'r', 'deadbeefdeadbeef', 'h', ?, 1, FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000), 60000)`, name, tc.pid)
			if err != nil {
				t.Fatal(err)
			}
			cfg := config(name, "r")
			if tc.dup {
				c, err := election.NewTable(db, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := members.Run(ctx, db, c, cfg, members.Options{Host: "h"}); !errors.Is(err, members.ErrDuplicateID) {
					t.Fatalf("Run: %v; want ErrDuplicateID", err)
				}
				return
			}
			start(t, ctx, db, election.NewTable, cfg, members.Options{Host: "h"})
			waitMembers(t, ctx, db, name, "the restarted r", func(ms []members.Member) bool {
				return len(ms) == 1 && ms[0].Incarnation != "deadbeefdeadbeef" && ms[0].PID == os.Getpid()
			})
		})
	}
}

// TestLeadershipFollowsVersion: with Options.Follow, the leader hands over
// by a transfer to the member whose version should lead once it has run
// for the hold-down: the newest (an upgraded replica takes over), or the
// oldest (leadership pinned to the old version). One change of leader,
// on both backends.
func TestLeadershipFollowsVersion(t *testing.T) {
	for _, b := range backends {
		for _, tc := range []struct {
			follow         members.Follow
			first, joining string
		}{
			{members.FollowNewest, "1.4.2", "1.5.0"},
			{members.FollowOldest, "2.0.0", "1.9.9"},
		} {
			t.Run(b.name+"/"+tc.joining, func(t *testing.T) {
				t.Parallel()
				ctx, db := setup(t)
				name := randName(t)
				elected := make(chan string, 10)
				run := func(id, version string) {
					cfg := config(name, id)
					cfg.Callbacks.OnElected = func(context.Context, election.Leadership) { elected <- id }
					start(t, ctx, db, b.new, cfg, members.Options{Version: version, Follow: tc.follow, HoldDown: 200 * time.Millisecond})
				}
				wait := func(want string) {
					t.Helper()
					select {
					case got := <-elected:
						if got != want {
							t.Fatalf("%s elected, want %s", got, want)
						}
					case <-ctx.Done():
						t.Fatalf("%s never elected", want)
					}
				}
				run("old-1", tc.first)
				wait("old-1")
				run("old-2", tc.first)
				run("new", tc.joining)
				wait("new")
			})
		}
	}
}

// TestRollingUpgrade (issue 35, item 4): three replicas of version 1.0.0
// with FollowNewest are restarted one at a time as 2.0.0, each after the
// one before is live and healthy again. The leader changes at most twice
// (a leader restarted hands over to an old member, which hands over to the
// first new one; restarts of followers move nothing), and it ends on a new
// member. It logs the longest time without a leader, between one's
// OnDemoted and the next one's OnElected (BENCHMARKS.md, "Members: a
// rolling upgrade": go test -run TestRollingUpgrade -v ./members/). On
// both backends.
func TestRollingUpgrade(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx, db := setup(t)
			name := randName(t)
			type event struct {
				id      string
				elected bool
				at      time.Time
			}
			events := make(chan event, 100)
			stops := map[string]func() error{}
			run := func(id, version string) {
				cfg := config(name, id)
				cfg.Callbacks.OnElected = func(context.Context, election.Leadership) { events <- event{id, true, time.Now()} }
				cfg.Callbacks.OnDemoted = func(d election.Demotion) { events <- event{id, false, d.Until} }
				_, stops[id] = start(t, ctx, db, b.new, cfg, members.Options{Version: version, Follow: members.FollowNewest, HoldDown: 200 * time.Millisecond})
			}
			ids := []string{"r1", "r2", "r3"}
			for _, id := range ids {
				run(id, "1.0.0")
			}
			waitMembers(t, ctx, db, name, "three live members", func(ms []members.Member) bool {
				return len(ms) == 3 && ms[0].Live && ms[1].Live && ms[2].Live
			})
			settled := func(id string) func([]members.Member) bool {
				return func(ms []members.Member) bool {
					for _, m := range ms {
						if m.ID == id && m.Version == "2.0.0" && m.Live && m.Healthy && m.LastSeen.Sub(m.Started) >= 200*time.Millisecond {
							return true
						}
					}
					return false
				}
			}
			for _, id := range ids {
				if err := stops[id](); err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				run(id, "2.0.0")
				waitMembers(t, ctx, db, name, id+" live as 2.0.0", settled(id))
			}
			// Every replica runs 2.0.0: read the events so far, and wait
			// for a leader if there is none at the moment.
			var leader string
			var elected []event
			var gap time.Duration
			var demoted time.Time
			for pending := true; pending || leader == ""; {
				select {
				case e := <-events:
					if !e.elected {
						demoted, leader = e.at, ""
						continue
					}
					if !demoted.IsZero() {
						gap = max(gap, e.at.Sub(demoted))
					}
					leader, demoted = e.id, time.Time{}
					elected = append(elected, e)
				case <-ctx.Done():
					t.Fatalf("no leader after the upgrade (elected %v)", elected)
				default:
					if pending = false; leader == "" {
						select { // block for the next event
						case e := <-events:
							events <- e
						case <-ctx.Done():
						}
					}
				}
			}
			if len(elected) > 3 {
				t.Errorf("leadership changed %d times over the upgrade (%v); want at most 2", len(elected)-1, elected)
			}
			t.Logf("%s: %d changes of leader, longest without a leader %v", b.name, len(elected)-1, gap)
		})
	}
}
