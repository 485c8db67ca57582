package election_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/history"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestMain tears down the shared test server of package testdb. Tests that
// need no database do not start one.
func TestMain(m *testing.M) { testdb.Main(m) }

// Short timings for the lock backend's tests.
const (
	tLease         = time.Second
	tRenewDeadline = 600 * time.Millisecond
	tRenewInterval = 100 * time.Millisecond
	tRetryInterval = 100 * time.Millisecond
	tQueryTimeout  = 500 * time.Millisecond
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lockEnv is one election on a fresh database with the election table.
type lockEnv struct {
	t     *testing.T
	ctx   context.Context
	dsn   string
	admin *sql.DB
	name  string
	rec   *leaderships

	mu    sync.Mutex
	cands []*lockCand
}

type lockCand struct {
	id     string
	db     *sql.DB
	e      election.Election
	cancel context.CancelFunc
	done   chan error
	err    error
	exited atomic.Bool // read by the sampler
}

// newLockEnv gives the test at most timeout, and checks in t.Cleanup that
// no two candidates ever led at the same time.
func newLockEnv(t *testing.T, timeout time.Duration) *lockEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	e := &lockEnv{t: t, ctx: ctx, dsn: dsn, admin: testdb.Open(t, dsn), name: "lock-" + randHex(4), rec: &leaderships{}}
	stop := e.rec.sample(e.leaders)
	t.Cleanup(func() {
		e.stopAll()
		stop()
		e.rec.check(t)
		if t.Failed() {
			e.logTerms()
		}
	})
	return e
}

// logTerms logs the election's terms from its history table: who took each
// term, how, and how it ended, by the database clock.
func (e *lockEnv) logTerms() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	terms, err := history.List(ctx, e.admin, "", e.name, time.Time{})
	if err != nil {
		e.t.Logf("the election's terms: %v", err)
	}
	for _, tm := range terms {
		e.t.Logf("term %d: %s (%s) from %s to %s (%s)", tm.Term, tm.Holder, tm.Began,
			tm.Started.Format("15:04:05.000000"), tm.Ended.Format("15:04:05.000000"), tm.End)
	}
}

func (e *lockEnv) config(id string) election.Config {
	return election.Config{
		Name: e.name, ID: id, LeaseDuration: tLease, Tuning: election.TuningConfig{RenewDeadline: tRenewDeadline, RenewInterval: tRenewInterval, RetryInterval: tRetryInterval, QueryTimeout: tQueryTimeout},
		Value: "value-of-" + id, Callbacks: e.rec.callbacks(id),
	}
}

// start runs a lock-backend candidate on a *sql.DB of its own, as another
// process would.
func (e *lockEnv) start(id string, mod func(*election.Config)) *lockCand {
	e.t.Helper()
	return e.startOn(id, e.dsn, mod)
}

// startOn is start with the candidate's *sql.DB opened on dsn.
func (e *lockEnv) startOn(id, dsn string, mod func(*election.Config)) *lockCand {
	e.t.Helper()
	db := testdb.Open(e.t, dsn)
	cfg := e.config(id)
	if mod != nil {
		mod(&cfg)
	}
	el, err := election.NewLock(db, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	c := &lockCand{id: id, db: db, e: el, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- el.Run(ctx) }()
	e.mu.Lock()
	e.cands = append(e.cands, c)
	e.mu.Unlock()
	return c
}

// stop cancels a candidate's Run and waits for it to return.
func (e *lockEnv) stop(c *lockCand) error {
	if c.exited.Load() {
		return c.err
	}
	c.cancel()
	select {
	case c.err = <-c.done:
	case <-time.After(10 * time.Second):
		e.t.Errorf("%s: Run did not return within 10s of cancel", c.id)
	}
	c.exited.Store(true)
	return c.err
}

func (e *lockEnv) stopAll() {
	e.mu.Lock()
	cs := append([]*lockCand(nil), e.cands...)
	e.mu.Unlock()
	for _, c := range cs {
		if err := e.stop(c); err != nil {
			e.t.Errorf("%s: Run returned %v", c.id, err)
		}
	}
}

func (e *lockEnv) leaders() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, c := range e.cands {
		if !c.exited.Load() && c.e.IsLeader() {
			out = append(out, c.id)
		}
	}
	return out
}

// waitLeader waits until exactly one candidate other than except leads and
// returns it with the instant it was seen.
func (e *lockEnv) waitLeader(within time.Duration, except *lockCand) (*lockCand, time.Time) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		var ls []*lockCand
		for _, c := range e.cands {
			if !c.exited.Load() && c.e.IsLeader() {
				ls = append(ls, c)
			}
		}
		e.mu.Unlock()
		if len(ls) == 1 && ls[0] != except {
			return ls[0], time.Now()
		}
		time.Sleep(500 * time.Microsecond)
	}
	var not string
	if except != nil {
		not = " other than " + except.id
	}
	e.t.Fatalf("no single leader%s within %v; leaders: %v", not, within, e.leaders())
	return nil, time.Time{}
}

// status reads the election's row as an operator would.
func (e *lockEnv) status() election.Record {
	e.t.Helper()
	rec, err := ops(e.admin).Status(e.ctx, e.name)
	if err != nil {
		e.t.Fatalf("Status: %v", err)
	}
	return rec
}

// lockName is the election's GET_LOCK name: its database is the DSN's.
func (e *lockEnv) lockName() string {
	e.t.Helper()
	cfg, err := mysql.ParseDSN(e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	return getlock.Name(cfg.DBName, election.DefaultTable, e.name)
}

// lockOwner returns IS_USED_LOCK of the election's lock: the connection that
// holds it, or 0 when it is free.
func (e *lockEnv) lockOwner() uint64 {
	e.t.Helper()
	var id sql.NullInt64
	if err := e.admin.QueryRowContext(e.ctx, "SELECT IS_USED_LOCK(?)", e.lockName()).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return uint64(id.Int64)
}

// leaderships records every leadership from the callbacks and samples
// IsLeader, to check that two candidates never lead at once.
type leaderships struct {
	mu         sync.Mutex
	ivs        []*leadership
	violations []string
}

type leadership struct {
	id         string
	term       uint64
	start, end time.Time
	reason     election.Reason
}

func (r *leaderships) callbacks(id string) election.Callbacks {
	return election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) {
			term := l.Term
			r.mu.Lock()
			r.ivs = append(r.ivs, &leadership{id: id, term: term, start: time.Now()})
			r.mu.Unlock()
			<-ctx.Done()
		},
		OnDemoted: func(d election.Demotion) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, iv := range r.ivs {
				if iv.id == id && iv.end.IsZero() {
					iv.end, iv.reason = d.Until, d.Reason
					if iv.term != d.Term {
						r.violations = append(r.violations, fmt.Sprintf("%s: demoted term %d, elected %d", id, d.Term, iv.term))
					}
					return
				}
			}
			r.violations = append(r.violations, fmt.Sprintf("%s: OnDemoted(term %d) without OnElected", id, d.Term))
		},
	}
}

// sample polls leaders until the returned stop is called.
func (r *leaderships) sample(leaders func() []string) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(200 * time.Microsecond):
			}
			if ls := leaders(); len(ls) > 1 {
				r.mu.Lock()
				r.violations = append(r.violations, fmt.Sprintf("IsLeader true on %v at once", ls))
				r.mu.Unlock()
			}
		}
	}()
	return func() { close(quit); <-done }
}

func (r *leaderships) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range r.ivs {
		if a.end.IsZero() {
			t.Errorf("%s: term %d never demoted", a.id, a.term)
			continue
		}
		if i > 0 && a.term <= r.ivs[i-1].term {
			t.Errorf("term did not increase: %s term %d after %s term %d", a.id, a.term, r.ivs[i-1].id, r.ivs[i-1].term)
		}
		for _, b := range r.ivs[i+1:] {
			if b.start.Before(a.end) {
				t.Errorf("two leaders: %s (term %d) until %s, %s (term %d) from %s", a.id, a.term,
					a.end.Format("15:04:05.000000"), b.id, b.term, b.start.Format("15:04:05.000000"))
			}
		}
	}
	for _, v := range r.violations {
		t.Error(v)
	}
}

// TestLockHolderPublishesItself: the holder's connection holds the lock and
// the row names it, with backend 'lock' and that connection's id, even for
// an election whose lock name is hashed.
func TestLockHolderPublishesItself(t *testing.T) {
	e := newLockEnv(t, 60*time.Second)
	e.name = "Lock-Long/" + strings.Repeat("n", 100) + randHex(4)
	e.start("a", nil)
	e.start("b", nil)
	l, _ := e.waitLeader(3*tLease, nil)
	rec, err := l.e.Leader(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec.ID != l.id || rec.Term != l.e.Term() || rec.Backend != "lock" || rec.ConnectionID == 0 ||
		rec.Value != "value-of-"+l.id || !rec.Live() {
		t.Fatalf("Leader() = %+v; leader %s term %d", rec, l.id, l.e.Term())
	}
	if owner := e.lockOwner(); owner != rec.ConnectionID {
		t.Fatalf("IS_USED_LOCK(%q) = %d, the row says connection %d", e.lockName(), owner, rec.ConnectionID)
	}
	t.Logf("%s holds %q on connection %d, term %d (acquired %s)", rec.ID, e.lockName(), rec.ConnectionID, rec.Term, rec.Acquired)
}

// TestLockKilledConnection: when the server kills the holder's connection,
// the lock goes at once to a waiting candidate, which leads once what was
// left of the old lease has passed; the old holder stands down by then.
func TestLockKilledConnection(t *testing.T) {
	e := newLockEnv(t, 60*time.Second)
	e.start("a", nil)
	e.start("b", nil)
	e.start("c", nil)
	old, _ := e.waitLeader(3*tLease, nil)
	time.Sleep(3 * tRenewInterval) // a few renewals
	rec := e.status()
	if rec.ID != old.id || rec.ConnectionID == 0 {
		t.Fatalf("row %+v, leader %s", rec, old.id)
	}
	killed := time.Now()
	if _, err := e.admin.ExecContext(e.ctx, fmt.Sprintf("KILL CONNECTION %d", rec.ConnectionID)); err != nil {
		t.Fatal(err)
	}
	for old.e.IsLeader() && time.Since(killed) < 10*tLease {
		// Still leading a lease after the kill: the old holder's one retry
		// on a fresh connection got the lock back before any waiter took
		// it (a loaded machine delays the waiters): it keeps its term, and
		// the lock is its new connection's, once the row says so (looked
		// at until then: a CI run's load kept the row from saying so at
		// the first look). doc.go allows this; the takeover is then not
		// tested by this run.
		if time.Since(killed) >= tLease {
			if now := e.status(); now.ID == old.id && now.ConnectionID != rec.ConnectionID && e.lockOwner() == now.ConnectionID {
				t.Logf("the old leader %s got the lock back on connection %d before a waiter did", old.id, now.ConnectionID)
				return
			}
		}
		time.Sleep(500 * time.Microsecond)
	}
	stoodDown := time.Since(killed)
	// The bound (what was left of the lease, then a waiter's next look) is
	// measured by the chaos suite and the benchmarks; here a generous one
	// only catches a takeover that never comes.
	nl, at := e.waitLeader(10*tLease, old)
	now := e.status()
	if now.ID != nl.id || now.ConnectionID == rec.ConnectionID || e.lockOwner() != now.ConnectionID {
		t.Fatalf("after the kill the row says %+v, the lock is held by %d; leader %s", now, e.lockOwner(), nl.id)
	}
	t.Logf("killed connection %d of leader %s (lease left %v at the kill): it stood down after %v; %s took the lock (acquired %q) and leads %v after the kill",
		rec.ConnectionID, old.id, rec.LeaseLeft.Round(time.Millisecond), stoodDown.Round(time.Millisecond), nl.id, now.Acquired, at.Sub(killed).Round(time.Millisecond))
}

// TestLockSilentHolderDroppedByServer: a holder that stops talking (here its
// Run goroutine is stuck in a callback) is dropped by the server after the
// session wait_timeout (the lease, in whole seconds), which frees the lock.
func TestLockSilentHolderDroppedByServer(t *testing.T) {
	e := newLockEnv(t, 60*time.Second)
	acquired := make(chan time.Time, 1)
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	var once sync.Once
	a := e.start("a", func(cfg *election.Config) {
		cfg.Callbacks.OnLeaderChanged = func(r election.Record) {
			if r.ID != "a" {
				return
			}
			once.Do(func() {
				acquired <- time.Now()
				select { // hang, as a stuck process would, without talking to the server
				case <-unblock:
				case <-time.After(4 * tLease):
				}
			})
		}
	})
	var at time.Time
	select {
	case at = <-acquired:
	case <-e.ctx.Done():
		t.Fatal("a never got the lock")
	}
	e.start("b", nil)
	b, led := e.waitLeader(3*tLease, nil)
	if b.id != "b" {
		t.Fatalf("%s leads, want b", b.id)
	}
	if a.e.IsLeader() {
		t.Fatal("a leads")
	}
	after := led.Sub(at)
	if after > 2*tLease+500*time.Millisecond {
		t.Errorf("b led %v after a went silent; want about the wait_timeout of %v", after, tLease)
	}
	t.Logf("a went silent holding the lock; the server dropped it and b leads %v later (acquired %q)", after.Round(time.Millisecond), e.status().Acquired)
}

// TestLockConnectionNotReturnedToPool: the connection that held the lock is
// closed when Run returns, never handed back to the caller's pool (where its
// lock and its session wait_timeout would leak).
func TestLockConnectionNotReturnedToPool(t *testing.T) {
	e := newLockEnv(t, 60*time.Second)
	a := e.start("a", nil)
	a.db.SetMaxIdleConns(10)
	e.waitLeader(3*tLease, nil)
	for i := 0; i < 3; i++ { // use the pool alongside
		if _, err := a.e.Leader(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	lockConn := e.status().ConnectionID
	if lockConn == 0 || e.lockOwner() != lockConn {
		t.Fatalf("lock held by %d, row says %d", e.lockOwner(), lockConn)
	}
	if err := e.stop(a); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if owner := e.lockOwner(); owner != 0 {
		t.Fatalf("lock still held by connection %d after Run returned", owner)
	}
	if rec, err := ops(e.admin).Status(e.ctx, e.name); !errors.Is(err, election.ErrNoLeader) || !rec.Released {
		t.Fatalf("row after Run returned: %+v, %v; want released", rec, err)
	}
	// The connection is closed, not idle in a's pool.
	deadline := time.Now().Add(2 * time.Second)
	for {
		var n int
		if err := e.admin.QueryRowContext(e.ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", lockConn).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock connection %d still open after Run returned", lockConn)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var global int
	if err := e.admin.QueryRowContext(e.ctx, "SELECT @@global.wait_timeout").Scan(&global); err != nil {
		t.Fatal(err)
	}
	idle := a.db.Stats().Idle
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < idle+1; i++ { // every idle connection, and one more
		c, err := a.db.Conn(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var id uint64
		var wt int
		if err := c.QueryRowContext(e.ctx, "SELECT CONNECTION_ID(), @@session.wait_timeout").Scan(&id, &wt); err != nil {
			t.Fatal(err)
		}
		if id == lockConn || wt != global {
			t.Fatalf("pool connection %d has wait_timeout %d (global %d); the lock connection was %d", id, wt, global, lockConn)
		}
	}
	t.Logf("lock connection %d closed; %d idle pool connections keep wait_timeout=%d", lockConn, idle, global)
}

// TestLockResignHandsOverFast: a clean resignation marks the row released
// and releases the lock; a candidate blocked in GET_LOCK takes over at once,
// without a lock delay. So does the end of the leader's Run.
func TestLockResignHandsOverFast(t *testing.T) {
	e := newLockEnv(t, 60*time.Second)
	e.start("a", nil)
	e.start("b", nil)
	e.start("c", nil)
	old, _ := e.waitLeader(3*tLease, nil)
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := old.e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	nl, at := e.waitLeader(tLease/2, old)
	resign := at.Sub(start)
	if got := e.status().Acquired; got != "released" {
		t.Errorf("new term acquired %q, want released", got)
	}

	start = time.Now()
	if err := e.stop(nl); err != nil {
		t.Fatal(err)
	}
	_, at = e.waitLeader(tLease/2, nl)
	shutdown := at.Sub(start)
	t.Logf("handover after Resign: %v; after the leader's Run was cancelled: %v (lease %v)",
		resign.Round(time.Microsecond), shutdown.Round(time.Microsecond), tLease)
}

// TestLockOperatorReplaceNamingAbsentCandidate: candidates that get the lock
// let it go while an operator's row names someone else; when that one never
// comes, its lease expires and the election goes on.
func TestLockOperatorReplaceNamingAbsentCandidate(t *testing.T) {
	e := newLockEnv(t, 60*time.Second)
	e.start("a", nil)
	e.start("b", nil)
	old, _ := e.waitLeader(3*tLease, nil)
	oldTerm := old.e.Term()
	if _, err := ops(e.admin).Assume(e.ctx, e.name, "ghost"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deadline := start.Add(tRenewDeadline)
	for old.e.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still leads after the REPLACE", old.id)
		}
		time.Sleep(time.Millisecond)
	}
	// The row names ghost for what is left of the lease Assume kept (a
	// lease from the REPLACE, by the database clock): nobody leads
	// meanwhile. Watch up to half a lease, but only while ghost's lease
	// still runs: the stand-down above may have taken most of it on a
	// loaded machine, and past it the election goes on (checked below).
	rec := e.status()
	if rec.ID != "ghost" {
		t.Fatalf("row names %q, want ghost", rec.ID)
	}
	for end := time.Now().Add(min(tLease/2, rec.LeaseLeft-50*time.Millisecond)); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if ls := e.leaders(); len(ls) != 0 {
			t.Fatalf("leaders %v while the row names ghost", ls)
		}
	}
	nl, at := e.waitLeader(2*tLease, nil)
	if nl.e.Term() <= oldTerm {
		t.Fatalf("term %d after %d", nl.e.Term(), oldTerm)
	}
	t.Logf("%s leads %v after the REPLACE naming an absent candidate (acquired %q)", nl.id, at.Sub(start).Round(time.Millisecond), e.status().Acquired)
}

// TestLockRefusesGalera: on a two-node Galera cluster a client on each node
// gets the same GET_LOCK, so the lock backend must refuse to run there, and
// points to the table backend.
func TestLockRefusesGalera(t *testing.T) {
	// A two-node cluster of its own on the host's MariaDB (skipped on the
	// other servers): it waits on the nodes' start and state transfer more
	// than it computes, so beside the package's other waiting tests.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n1, n2 := startGalera2(t, ctx, nil, nil)
	db1 := testdb.Open(t, n1.DSN(""))
	db2 := testdb.Open(t, n2.DSN("sqlelect"))

	// Why: one lock name, granted on both nodes at once.
	lock := getlock.Name("sqlelect", election.DefaultTable, "jobs")
	for i, db := range []*sql.DB{db1, db2} {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var got sql.NullInt64
		if err := c.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", lock).Scan(&got); err != nil {
			t.Fatal(err)
		}
		t.Logf("node %d: GET_LOCK(%q, 0) = %v", i+1, lock, got.Int64)
		if got.Int64 != 1 {
			t.Logf("node %d does not grant the lock held on the other node: Galera made GET_LOCK cluster-wide?", i+1)
		}
	}

	for i, db := range []*sql.DB{testdb.Open(t, n1.DSN("sqlelect")), db2} {
		el, err := election.NewLock(db, election.Config{Name: "jobs", ID: fmt.Sprintf("node-%d", i+1),
			LeaseDuration: tLease, Tuning: election.TuningConfig{RenewDeadline: tRenewDeadline, RenewInterval: tRenewInterval, RetryInterval: tRetryInterval, QueryTimeout: tQueryTimeout}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		err = el.Run(rctx)
		rcancel()
		if !errors.Is(err, election.ErrUnsupportedTopology) || !strings.Contains(err.Error(), "NewTable") {
			t.Fatalf("Run on Galera node %d: %v; want ErrUnsupportedTopology pointing to NewTable", i+1, err)
		}
		if el.IsLeader() {
			t.Fatal("leads on Galera")
		}
		t.Logf("node %d: %v", i+1, err)
	}
}
