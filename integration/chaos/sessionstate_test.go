//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// Fault kinds of TestChaosSessionState: application session state on the
// pool (issue 20, item 2). A candidate process, acting as application code
// that shares its *sql.DB, leaves session state on every idle connection of
// its pool and returns them to it (candidate/sessionstate.go), where the
// library's next statements run; the state is cleared (the connections
// KILLed) sessionStateFor later.
const (
	// kindSessionTSLeader: the leader's pool, SET @@timestamp 10 s behind:
	// its renewals used to write the lease 10 s in the past.
	kindSessionTSLeader = "session_ts_leader"
	// kindSessionTSFollowers: every follower's pool, SET @@timestamp 10 s
	// ahead: they used to read the leader's live lease as expired.
	kindSessionTSFollowers = "session_ts_followers"
	// kindSessionTZ: every candidate's pool, a time_zone with daylight
	// saving time that springs forward every other second (see
	// loadChaosZone): right after each spring-forward, a lease renewed just
	// before reads an hour old.
	kindSessionTZ = "session_tz"
	// kindSessionNoCommit: the leader's pool, autocommit=0 (issue 31): its
	// renewals used to stay uncommitted, and the KILL that clears the
	// state rolled them back under a leader that still believed.
	kindSessionNoCommit = "session_no_commit"
	// kindSessionChain: the leader's pool, a transaction left open by
	// COMMIT AND CHAIN (completion_type=CHAIN), likewise.
	kindSessionChain = "session_chain"
	// kindSessionReadCommitted: every candidate's pool, READ COMMITTED:
	// no gap locks, and each read sees what committed before it, where
	// the floor's transaction was written for REPEATABLE READ.
	kindSessionReadCommitted = "session_read_committed"
	// kindSessionReadUncommitted: every candidate's pool, READ
	// UNCOMMITTED: a read may see another transaction's uncommitted row
	// (a take, a release, an operator's write) that it then rolls back.
	kindSessionReadUncommitted = "session_read_uncommitted"
	// kindSessionSerializable: every candidate's pool, SERIALIZABLE: every
	// read in a transaction locks what it reads (shared).
	kindSessionSerializable = "session_serializable"
)

// sessionStateFor is how long a fault's state stays on the pool.
const sessionStateFor = 2 * time.Second

// TestChaosSessionState runs the session-state faults against three
// candidates of each backend at once, in two databases of one server, the
// checker judging each as in the other chaos tests: never two leaders, a
// leader within the bound after each fault. About 40 s.
func TestChaosSessionState(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite takes minutes; skipped under -short")
	}
	rounds := rounds(t)
	// A server of its own, and it waits on leases more than it computes:
	// beside the suite's other short tests once TestChaos and the cluster
	// tests (run one at a time before them) have ended.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	srv := startServer(t, ctx)
	root, err := sql.Open("mysql", srv.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	zone := loadChaosZone(t, ctx, root, 3*time.Minute)
	for _, backend := range []string{"table", "lock"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			chaosSessionState(t, ctx, srv, backend, zone, rounds)
		})
	}
}

func chaosSessionState(t *testing.T, ctx context.Context, srv *mysqld.Server, backend, zone string, rounds int) {
	tm := defaultTimings
	tm.FencedEvery = 0 // chaos_writes.at is NOW(6), which the faults move
	db := "chaos_" + backend
	admin, _ := setupDatabaseNamed(t, ctx, srv.DSN(""), db)
	file := filepath.Join(t.TempDir(), "session-state.sql")
	leave := func(c *cluster, targets []*slot, stmts ...string) (string, error) {
		if err := os.WriteFile(file, []byte(strings.Join(stmts, "\n")+"\n"), 0o644); err != nil {
			return "", err
		}
		var ids []string
		for _, s := range targets {
			if err := c.signal(s, syscall.SIGUSR2); err != nil {
				return "", err
			}
			ids = append(ids, s.proc.id)
		}
		c.pause(sessionStateFor + 500*time.Millisecond) // cleared by then
		return strings.Join(ids, ","), nil
	}
	others := func(c *cluster, l *slot) []*slot {
		var out []*slot
		for _, s := range c.slots {
			if s != l && s.proc != nil && s.proc.running() {
				out = append(out, s)
			}
		}
		return out
	}
	faults := selectFaults(t, []fault{
		{kind: kindSessionTSLeader, inject: func(c *cluster, l *slot) (string, error) {
			return leave(c, []*slot{l}, "SET @@timestamp = UNIX_TIMESTAMP() - 10")
		}},
		{kind: kindSessionTSFollowers, inject: func(c *cluster, l *slot) (string, error) {
			return leave(c, others(c, l), "SET @@timestamp = UNIX_TIMESTAMP() + 10")
		}},
		{kind: kindSessionTZ, inject: func(c *cluster, l *slot) (string, error) {
			return leave(c, append(others(c, l), l), fmt.Sprintf("SET time_zone = '%s'", zone))
		}},
		{kind: kindSessionNoCommit, inject: func(c *cluster, l *slot) (string, error) {
			return leave(c, []*slot{l}, "SET autocommit = 0")
		}},
		{kind: kindSessionChain, inject: func(c *cluster, l *slot) (string, error) {
			return leave(c, []*slot{l}, "SET completion_type = 'CHAIN'", "BEGIN", "COMMIT")
		}},
		{kind: kindSessionReadCommitted, inject: func(c *cluster, l *slot) (string, error) {
			return leave(c, append(others(c, l), l), "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
		}},
		{kind: kindSessionReadUncommitted, inject: func(c *cluster, l *slot) (string, error) {
			return leave(c, append(others(c, l), l), "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
		}},
		{kind: kindSessionSerializable, inject: func(c *cluster, l *slot) (string, error) {
			return leave(c, append(others(c, l), l), "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")
		}},
	})
	c := newCluster(t, ctx, "session-"+backend, backend, tm)
	c.extraArgs = []string{"--session-state-file", file, "--session-state-for", sessionStateFor.String()}
	for i := 1; i <= candidatesPerServer; i++ {
		user := fmt.Sprintf("%c%d", backend[0], i)
		c.start(c.addSlot(user, createUserOn(t, ctx, admin, db, user, srv.Addr), 0, nil, nil))
	}
	c.campaign(faults, rounds)
	c.finish(admin)
}

// loadChaosZone loads into the server's time zone tables a made-up zone
// whose offset flips between +00:00 and +01:00 every second from now for
// span, and then keeps a plain DST rule (+01:00 from 2030's spring to its
// autumn, which the library's check of a zone looks at). It returns its
// name.
func loadChaosZone(t *testing.T, ctx context.Context, root *sql.DB, span time.Duration) string {
	t.Helper()
	conn, err := root.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string, args ...any) sql.Result {
		t.Helper()
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return res
	}
	id, err := exec(`INSERT INTO mysql.time_zone (Use_leap_seconds) VALUES ('N')`).LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	const name = "Chaos/Flapping"
	exec(`INSERT INTO mysql.time_zone_name (Name, Time_zone_id) VALUES (?, ?)`, name, id)
	exec(`INSERT INTO mysql.time_zone_transition_type (Time_zone_id, Transition_type_id, `+"`Offset`"+`, Is_DST, Abbreviation)
VALUES (?, 0, 0, 0, 'STD'), (?, 1, 3600, 1, 'DST')`, id, id)
	var now int64
	if err := conn.QueryRowContext(ctx, `SELECT UNIX_TIMESTAMP()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	var values []string
	n := int64(span / time.Second)
	n += n % 2 // ends with +00:00 until 2030
	for k := int64(1); k <= n; k++ {
		values = append(values, fmt.Sprintf("(%d, %d, %d)", id, now+k, k%2))
	}
	spring, autumn := time.Date(2030, 3, 31, 1, 0, 0, 0, time.UTC), time.Date(2030, 10, 27, 1, 0, 0, 0, time.UTC)
	values = append(values, fmt.Sprintf("(%d, %d, 1)", id, spring.Unix()), fmt.Sprintf("(%d, %d, 0)", id, autumn.Unix()))
	exec(`INSERT INTO mysql.time_zone_transition (Time_zone_id, Transition_time, Transition_type_id) VALUES ` +
		strings.Join(values, ", "))
	return name
}
