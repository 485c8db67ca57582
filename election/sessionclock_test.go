package election_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// Application session state on the caller's pool (issue 20, item 2): the
// caller owns the *sql.DB, and its own code may leave a session clock on a
// pooled connection (SET @@timestamp, SET time_zone) that a candidate's next
// statement then runs on. sqlelect does not trust session state it did not
// set: these tests leave such state on the only connection of a candidate's
// pool (SetMaxOpenConns(1)), so that every statement of that candidate runs
// on it, and check that no two candidates lead at one instant.

// sessionClockConfig is the configuration of the tests' candidates: short
// timings, and no fast handover (it would need a second connection).
func sessionClockConfig(name, id string) election.Config {
	return election.Config{Name: name, ID: id, LeaseDuration: tLease, Tuning: election.TuningConfig{RenewDeadline: tRenewDeadline, RenewInterval: tRenewInterval, RetryInterval: tRetryInterval, QueryTimeout: tQueryTimeout, DisableFastHandover: true}}
}

// onePool opens dsn as a pool of one connection and runs set on that
// connection, which then goes back to the pool with the session state set
// left on it, as application code would leave it.
func onePool(t *testing.T, ctx context.Context, dsn string, set ...string) *sql.DB {
	t.Helper()
	db := oneConn(testdb.Open(t, dsn))
	tamper(t, ctx, db, set...)
	return db
}

// oneConn limits db to one connection, kept for good, and returns it.
func oneConn(db *sql.DB) *sql.DB {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db
}

// tamper runs set on the single connection of db's pool and returns it to
// the pool.
func tamper(t *testing.T, ctx context.Context, db *sql.DB, set ...string) {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, s := range set {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// overlapWatch records, when a candidate is elected, whether another one
// still believed it led at that instant.
type overlapWatch struct {
	mu       sync.Mutex
	overlaps []string
	elected  chan string // each election, by ID
}

func newOverlapWatch() *overlapWatch { return &overlapWatch{elected: make(chan string, 100)} }

// callbacks are candidate id's callbacks; others are the candidates it must
// never overlap with, read when it is elected.
func (w *overlapWatch) callbacks(id string, others func() []election.Election) election.Callbacks {
	return election.Callbacks{OnElected: func(context.Context, election.Leadership) {
		for _, o := range others() {
			if o.IsLeader() {
				w.mu.Lock()
				w.overlaps = append(w.overlaps, fmt.Sprintf("%s elected while %s leads (term %d)", id, o.ID(), o.Term()))
				w.mu.Unlock()
			}
		}
		select {
		case w.elected <- id:
		default:
		}
	}}
}

func (w *overlapWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.overlaps {
		t.Error("two leaders: " + o)
	}
}

// runElection runs e until the test ends, or until the stop it returns is
// called: Run then returns, and its candidate gives the row up for good (a
// Resign only sits out two retry intervals: a follower that does not look
// within them, on a loaded machine, loses the row back to it).
func runElection(t *testing.T, ctx context.Context, e election.Election) (stop func()) {
	t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run(%s): %v", e.ID(), err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// waitElected waits until id is elected.
func (w *overlapWatch) waitElected(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	for w.next(t, ctx, id) != id {
	}
}

// next waits for the next election and returns its candidate's ID; the
// test fails, naming want, if none comes before ctx ends.
func (w *overlapWatch) next(t *testing.T, ctx context.Context, want string) string {
	t.Helper()
	select {
	case got := <-w.elected:
		return got
	case <-ctx.Done():
		t.Fatalf("%s not elected: %v", want, ctx.Err())
		return ""
	}
}

// holdsFor waits until a clean session sees leader's row live and
// renewed for span by the database clock after it first looked, or until
// another candidate is elected (returned).
func (w *overlapWatch) holdsFor(t *testing.T, ctx context.Context, clean *sql.DB, name, leader string, span time.Duration) (other string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var start time.Time
	for {
		select {
		case id := <-w.elected:
			if id != leader {
				return id
			}
		case <-ctx.Done():
			t.Fatalf("waiting for %s to hold %s for %v: %v", leader, name, span, ctx.Err())
		case <-tick.C:
			rec, err := ops(clean).Status(ctx, name)
			if err != nil && !errors.Is(err, election.ErrNoLeader) {
				t.Fatal(err)
			}
			// The database's clock now, as the record reports it.
			now := rec.LastRenewal.Add(rec.Lease - rec.LeaseLeft)
			if start.IsZero() {
				start = now
			}
			if rec.ID == leader && rec.Live() && rec.LastRenewal.Sub(start) >= span {
				return ""
			}
		}
	}
}

// TestSessionTimestampOnPool: application code leaves SET @@timestamp on a
// connection of a candidate's pool.
//
//   - The leader's pool, 10 s back: its renewals used to write
//     last_seen_active 10 s in the past and still report 2 affected rows, so
//     it went on leading while every other session saw an expired row, and a
//     follower took it (two leaders until the old leader's next renewal).
//   - A follower's pool, 10 s ahead: it used to see the leader's live row as
//     expired and take it.
//
// Both must leave the leader alone: the other candidate is not elected
// while the leader renews, for two leases by the database clock. And
// neither stops a candidate from leading: once the leader resigns, the
// follower is elected on its own pool, tampered or not.
func TestSessionTimestampOnPool(t *testing.T) {
	t.Parallel() // waits on leases, on a database and an election of its own
	for _, tc := range []struct {
		name         string
		leader, foll []string
	}{
		{"leader/behind", []string{"SET @@timestamp = UNIX_TIMESTAMP() - 10"}, nil},
		{"follower/ahead", nil, []string{"SET @@timestamp = UNIX_TIMESTAMP() + 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dsn := testdb.DSN(t)
			testdb.Migrate(t, dsn)
			clean := testdb.Open(t, dsn)
			name := "session-ts-" + randHex(4)
			lpool := onePool(t, ctx, dsn)
			fpool := onePool(t, ctx, dsn, tc.foll...)
			w := newOverlapWatch()
			var l, f election.Election
			lc, fc := sessionClockConfig(name, "L"), sessionClockConfig(name, "F")
			lc.Callbacks = w.callbacks("L", func() []election.Election { return []election.Election{f} })
			fc.Callbacks = w.callbacks("F", func() []election.Election { return []election.Election{l} })
			var err error
			if l, err = election.NewTable(lpool, lc); err != nil {
				t.Fatal(err)
			}
			if f, err = election.NewTable(fpool, fc); err != nil {
				t.Fatal(err)
			}
			stopL := runElection(t, ctx, l)
			w.waitElected(t, ctx, "L")
			// Tampered once L leads: its renewals land on this connection.
			tamper(t, ctx, lpool, tc.leader...)
			runElection(t, ctx, f)
			// Reads on either pool report the lease left by the server's
			// clock, as the heartbeat judges it (by the session's NOW(6),
			// 10 s off, the lease would read as expired, or as longer than
			// a lease).
			for _, pool := range []*sql.DB{lpool, fpool} {
				rec, err := ops(pool).Status(ctx, name)
				if err != nil || rec.ID != "L" || rec.LeaseLeft <= 0 || rec.LeaseLeft > rec.Lease {
					t.Errorf("Status on a candidate's pool: %+v, %v; want L's live lease, at most a lease left", rec, err)
				}
			}
			if other := w.holdsFor(t, ctx, clean, name, "L", 2*tLease); other != "" {
				t.Errorf("%s was elected while L renewed", other)
			}
			// The session clock is not refused either, only ignored: once
			// L gives the row up, F takes it on its tampered session (a
			// session 10 s ahead used to fail every heartbeat with
			// ErrUnsafeSession, and never led).
			stopL() // gives the row up for good: F takes it
			w.waitElected(t, ctx, "F")
			w.check(t)
		})
	}
}

// TestSessionTimestampOnLockPool: the lock backend takes its dedicated
// connection from the caller's pool, so it inherits whatever session clock
// the application left there. When the holder's connection dies (here
// KILLed; a crash or a network cut alike), the next lock holder reads the
// row and, while the old holder's lease is still live, waits out what is
// left of it: the old holder stands down by its own clock before then. A
// connection whose clock is behind (the holder's: its renewals wrote the
// lease 10 s in the past) or ahead (the follower's: it reads the live lease
// as expired) used to let the follower take the row at once, and lead
// while the old holder still did.
func TestSessionTimestampOnLockPool(t *testing.T) {
	t.Parallel() // waits on leases, on a database and an election of its own
	for _, tc := range []struct {
		name         string
		leader, foll []string
	}{
		{"leader/behind", []string{"SET @@timestamp = UNIX_TIMESTAMP() - 10"}, nil},
		{"follower/ahead", nil, []string{"SET @@timestamp = UNIX_TIMESTAMP() + 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dsn := testdb.DSN(t)
			testdb.Migrate(t, dsn)
			clean := testdb.Open(t, dsn)
			name := "session-lock-" + randHex(4)
			lpool := onePool(t, ctx, dsn, tc.leader...)
			fpool := onePool(t, ctx, dsn, tc.foll...)
			w := newOverlapWatch()
			var l, f election.Election
			lc, fc := sessionClockConfig(name, "L"), sessionClockConfig(name, "F")
			lc.Callbacks = w.callbacks("L", func() []election.Election { return []election.Election{f} })
			fc.Callbacks = w.callbacks("F", func() []election.Election { return []election.Election{l} })
			var err error
			if l, err = election.NewLock(lpool, lc); err != nil {
				t.Fatal(err)
			}
			if f, err = election.NewLock(fpool, fc); err != nil {
				t.Fatal(err)
			}
			runElection(t, ctx, l)
			w.waitElected(t, ctx, "L")
			runElection(t, ctx, f)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			// Once L's connection is gone, L and F both ask for the lock,
			// and L may win it back (CI, MySQL 9.7, the package's tests six
			// at once): then its new connection is killed too, until F,
			// which waits out L's lease, is the one elected.
			for {
				waitLockWaiter(t, ctx, clean, getlock.Name(cfg.DBName, election.DefaultTable, name))
				// (The row's lease may read as expired: that is the bug.)
				rec, err := ops(clean).Status(ctx, name)
				if err != nil && !errors.Is(err, election.ErrNoLiveLease) || rec.ID != "L" || rec.ConnectionID == 0 {
					t.Fatalf("Status: %+v, %v", rec, err)
				}
				if _, err := clean.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", rec.ConnectionID)); err != nil {
					t.Fatal(err)
				}
				if w.next(t, ctx, "F") == "F" {
					break
				}
			}
			w.check(t)
		})
	}
}

// waitLockWaiter waits until another connection waits in GET_LOCK for lock.
func waitLockWaiter(t *testing.T, ctx context.Context, db *sql.DB, lock string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE ID <> CONNECTION_ID() AND INFO LIKE CONCAT('%GET_LOCK(%', ?, '%')`, lock).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("nobody waits for lock %s: %v", lock, ctx.Err())
		}
	}
}
