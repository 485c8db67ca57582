// Package electiontest is the behaviour suite every election backend must
// pass, on a real MySQL-compatible server. It checks safety (never two
// leaders at the same instant, terms strictly increasing) while it drives
// elections through elections, deaths, killed connections, stalls, clean
// resignations and operators' REPLACE and DELETE.
//
// Use it from a test with a function that returns a DSN to a fresh, empty
// database (internal/testdb.DSN does):
//
//	func TestTable(t *testing.T) {
//		electiontest.Run(t, electiontest.Suite{New: election.NewTable, DSN: testdb.DSN})
//	}
package electiontest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/spans"
	"github.com/sqlelect/sqlelect/schema"
)

// Suite describes the backend under test.
type Suite struct {
	// New creates a candidate of the backend on db.
	New func(db *sql.DB, cfg election.Config) (*election.Candidate, error)
	// DSN returns a go-sql-driver DSN to a fresh, empty database whose user
	// may create users and kill connections; it is dropped by the caller.
	DSN func(t testing.TB) string
	// Name names the suite's tests, when Run runs more than one suite.
	Name string
	// NoWakeup says followers are not woken when the leader resigns (the
	// table backend with DisableFastHandover or a Batcher): the test that
	// needs it is skipped.
	NoWakeup bool
}

// Timings used by the suite: short, so that it runs in seconds.
const (
	Lease         = time.Second
	RenewDeadline = 600 * time.Millisecond
	RenewInterval = 100 * time.Millisecond
	RetryInterval = 100 * time.Millisecond
)

// Run runs every behaviour test against the backend of each suite, in
// parallel subtests, each on its own database: as "NAME/TEST" where a
// suite has a Name, else as "TEST". The tests that measure a backend
// against windows of a renew interval or less (the slow health checks'
// 100 ms transfer window, a 50 ms margin) run first, one at a time, every
// suite's, so that they are not measured against the others' load too: go
// test -parallel (10 in make test) then runs the rest of every suite
// together (in the integration module, the three backends' suites took 38
// s each one after another, 83 s at once: see INTEGRATION_PARALLEL in the
// Makefile).
func Run(t *testing.T, suites ...Suite) {
	alone := map[string]bool{
		"SlowHealthCheckTransfersReachTarget": true,
		"SlowHealthCheckPreferredLeads":       true,
		"SlowHealthCheckSameForLeader":        true,
	}
	tests := behaviours()
	for _, first := range []bool{true, false} {
		for _, s := range suites {
			for _, tc := range tests {
				if alone[tc.name] != first {
					continue
				}
				t.Run(path.Join(s.Name, tc.name), func(t *testing.T) {
					if !first {
						t.Parallel() // after Run returned: after every suite's first tests
					}
					tc.f(t, s)
				})
			}
		}
	}
}

// behaviour is one of Run's tests.
type behaviour struct {
	name string
	f    func(t *testing.T, s Suite)
}

// behaviours are Run's tests, in order.
func behaviours() []behaviour {
	return []behaviour{
		{"OneLeaderAmongManyNoFlapping", testOneLeaderNoFlapping},
		{"TakeoverAfterLeaderDies", testTakeoverAfterDeath},
		{"TakeoverAfterServerKillsLeaderConnections", testKillConnections},
		{"CleanResignHandsOverFast", testResignHandsOver},
		{"ShutdownHandsOverFast", testShutdownHandsOver},
		{"ResignWakesSlowFollowers", testResignWakesFollowers},
		{"StallPastLeaseStandsDownFirst", testStall},
		{"OperatorReplaceForcesLeader", testOperatorReplace},
		{"OperatorDeleteForcesReelection", testOperatorDelete},
		{"LeaderRecord", testLeaderRecord},
		{"FrozenLeaderFencedWritesRejected", testFrozenFenced},
		{"TakeoverWaitsForFencedTransaction", testTakeoverWaitsForFenced},
		{"SilentFencedTransactionDoesNotStallTakeover", testIdleFenced},
		{"LeadershipFencedEndsWithLeadership", testLeadershipFenced},
		{"FencedWithSqlx", testFencedSqlx},
		{"CutOffLeaderThenOperatorThenHolderLetsGo", testCompound},
		{"ClientFoundRowsNoFalseLeader", testClientFoundRows},
		{"MissingTable", testMissingTable},
		{"NoPrivileges", testNoPrivileges},
		{"SameNameInTwoDatabases", testSameNameTwoDatabases},
		{"TransferToLiveTarget", testTransferToLiveTarget},
		{"TransferToDeadTargetFallsBack", testTransferToDeadTarget},
		{"TransferByNonLeader", testTransferByNonLeader},
		{"ResignDropsPendingRequest", testResignDropsPendingRequest},
		{"OperatorTransferAndStepDown", testOperatorRequests},
		{"OperatorRequestWithoutLeader", testOperatorRequestWithoutLeader},
		{"RungRequestsActedOnAtOnce", testRungRequests},
		{"ProclaimSeenByFollower", testProclaim},
		{"SchemaWithoutTransferRefused", testSchemaWithoutTransfer},
		{"PreferredRestartRegainsOnce", testPreferredRestartRegainsOnce},
		{"EqualPrioritiesNeverPingPong", testEqualPrioritiesNeverPingPong},
		{"PreferenceOutlastsOperatorTransfer", testPreferenceOutlastsOperator},
		{"SchemaWithoutPriorityRefused", testSchemaWithoutPriority},
		{"CallbackContract", func(t *testing.T, s Suite) { RunContract(t, s.driver) }},
		{"UnhealthyLeaderHandsOver", testUnhealthyHandsOver},
		{"FlappingHealthCheckOneLeader", testFlappingHealth},
		{"WedgedElectorReported", testWedgedReported},
		{"SlowHealthCheckTransfersReachTarget", testSlowHealthCheckTransfers},
		{"SlowHealthCheckPreferredLeads", testSlowHealthCheckPreference},
		{"SlowHealthCheckSameForLeader", testSlowHealthCheckSameForLeader},
		{"FlappingPreferredHeldDown", testFlappingPreferredHoldDown},
	}
}

// cluster is one election with its candidates, a recorder of their
// leaderships and a sampler of IsLeader.
type cluster struct {
	t      *testing.T
	s      Suite
	ctx    context.Context
	dsn    string
	name   string
	admin  *sql.DB
	rec    *recorder
	mu     sync.Mutex
	member []*member
	stopS  chan struct{}
	sDone  chan struct{}
	pDone  chan struct{}
	stalls stalls
	logs   logs
}

type member struct {
	id     string
	user   string
	db     *sql.DB
	e      election.Election
	cancel context.CancelFunc
	done   chan error
	err    error
	exited bool
	clock  *FreezableClock // set when started frozen-capable; the sampler skips frozen members
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newCluster makes a database with the election table, and an election
// name. It checks safety in t.Cleanup.
func newCluster(t *testing.T, s Suite, migrate bool) *cluster {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	c := &cluster{t: t, s: s, ctx: ctx, dsn: s.DSN(t), name: "e-" + randHex(4), rec: &recorder{},
		stopS: make(chan struct{}), sDone: make(chan struct{}), pDone: make(chan struct{})}
	admin, err := sql.Open("mysql", c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	c.admin = admin
	t.Cleanup(func() { admin.Close() })
	if migrate {
		if err := schema.New(admin).Up(ctx); err != nil {
			t.Fatal(err)
		}
	}
	go c.sample()
	go c.ping()
	t.Cleanup(func() { c.logs.print(t) }) // after finish (cleanups run last first), which may fail t
	t.Cleanup(c.finish)
	return c
}

// cfg is the suite's configuration for candidate id.
func (c *cluster) cfg(id string) election.Config {
	log := c.logs.logger()
	return election.Config{
		Name: c.name, ID: id, LeaseDuration: Lease, Metrics: slowBeats{log.With("id", id)},
		Tuning: election.TuningConfig{RenewDeadline: RenewDeadline, RenewInterval: RenewInterval, RetryInterval: RetryInterval,
			QueryTimeout: 500 * time.Millisecond, Logger: log},
		Value: "value-of-" + id,
	}
}

// userDSN creates a database user of its own for a candidate, so that its
// connections can be found and killed, and returns its DSN.
func (c *cluster) userDSN(user string, mod func(*mysql.Config)) string {
	cfg, err := mysql.ParseDSN(c.dsn)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, host := range []string{"%", "localhost"} {
		for _, q := range []string{
			fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY 'pw'", user, host),
			fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%s'", cfg.DBName, user, host),
		} {
			if _, err := c.admin.ExecContext(c.ctx, q); err != nil {
				c.t.Fatalf("%s: %v", q, err)
			}
		}
	}
	c.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, host := range []string{"%", "localhost"} {
			_, _ = c.admin.ExecContext(ctx, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", user, host))
		}
	})
	cfg.User, cfg.Passwd = user, "pw"
	if mod != nil {
		mod(cfg)
	}
	return cfg.FormatDSN()
}

// start starts a candidate with its own user and *sql.DB, as a separate
// process would have.
func (c *cluster) start(id string, mod func(*election.Config), dsnMod func(*mysql.Config)) *member {
	m := c.candidate(id, func(cfg *election.Config) {
		cfg.Callbacks = c.rec.callbacks(id)
		if mod != nil {
			mod(cfg)
		}
	}, dsnMod)
	ctx, cancel := context.WithCancel(c.ctx)
	m.cancel = cancel
	go func() { m.done <- m.e.Run(ctx) }()
	c.mu.Lock()
	c.member = append(c.member, m)
	c.mu.Unlock()
	return m
}

// candidate creates a candidate with its own user and *sql.DB, not running.
func (c *cluster) candidate(id string, mod func(*election.Config), dsnMod func(*mysql.Config)) *member {
	user := "u" + randHex(5)
	db, err := sql.Open("mysql", c.userDSN(user, dsnMod))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { db.Close() })
	cfg := c.cfg(id)
	clock := NewFreezableClock()
	cfg.Tuning.Clock = clock
	if mod != nil {
		mod(&cfg)
	}
	e, err := c.s.New(db, cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return &member{id: id, user: user, db: db, e: e, done: make(chan error, 1), clock: clock}
}

func (c *cluster) startN(n int) []*member {
	ms := make([]*member, n)
	for i := range ms {
		ms[i] = c.start(fmt.Sprintf("node-%d", i+1), nil, nil)
	}
	return ms
}

// stop cancels a candidate's Run and waits for it to return.
func (c *cluster) stop(m *member) error {
	if m.exited {
		return m.err
	}
	m.cancel()
	select {
	case m.err = <-m.done:
	case <-time.After(10 * time.Second):
		c.t.Errorf("%s: Run did not return within 10s of cancel", m.id)
	}
	m.exited = true
	return m.err
}

// crash makes a candidate vanish as a killed process would: its database
// handle is closed and the server kills its connections, so that it can
// neither renew nor release, then its Run is stopped. From the database's
// view, it died.
func (c *cluster) crash(m *member) {
	m.db.Close()         // no new statements from this candidate
	c.killConnections(m) // and the ones it holds (a lock connection) die with it
	_ = c.stop(m)
}

// killConnections kills every connection of the candidate's user.
func (c *cluster) killConnections(m *member) int {
	rows, err := c.admin.QueryContext(c.ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", m.user)
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			c.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		_, _ = c.admin.ExecContext(c.ctx, fmt.Sprintf("KILL CONNECTION %d", id))
	}
	return len(ids)
}

// leaders returns the members that lead now.
func (c *cluster) leaders() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*member
	for _, m := range c.member {
		if !m.exited && !m.clock.isFrozen() && m.e.IsLeader() {
			out = append(out, m)
		}
	}
	return out
}

// waitLeader waits until exactly one member other than except leads, and
// returns it with the time it was seen.
func (c *cluster) waitLeader(within time.Duration, except *member) (*member, time.Time) {
	c.t.Helper()
	return c.waitFor(within, func(m *member) bool { return m != except }, "other than "+idOf(except))
}

// waitFor waits until exactly one member leads and ok accepts it, within
// a bound of time that ran (see stalls).
func (c *cluster) waitFor(within time.Duration, ok func(*member) bool, what string) (*member, time.Time) {
	c.t.Helper()
	var l *member
	found := func() bool {
		ls := c.leaders()
		if len(ls) == 1 && ok(ls[0]) {
			l = ls[0]
		}
		return l != nil
	}
	start := time.Now()
	for d := within; ; {
		if poll(d, time.Millisecond, found) {
			return l, time.Now()
		}
		stalled := c.stalls.within(start, time.Now())
		if d = time.Until(start.Add(within + stalled)); d <= 0 || stalled > maxStalled {
			c.t.Fatalf("no single leader (%s) within %v (and %v stalled); leaders now: %v", what, within, stalled, ids(c.leaders()))
			return nil, time.Time{}
		}
	}
}

// poll calls cond at once and then every interval until it returns true,
// and reports whether it did within d. It is the suite's one way to wait
// for a state it is not told of (IsLeader, the row, the recorder, the
// server's processlist): the test waits for the state, the deadline only
// bounds the wait.
func poll(d, every time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
			if cond() {
				return true
			}
		}
	}
}

// rowState is what the suite reads of the election's row: the holder, its
// term, its last renewal, and whether its lease has run out by the
// database clock. A consistent read: it does not wait for a row lock.
type rowState struct {
	id          string
	term        uint64
	lastRenewal string // last_seen_active as the server prints it
	expired     bool
}

func (c *cluster) row() (rowState, bool) {
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	var r rowState
	err := c.admin.QueryRowContext(ctx, `SELECT service_id, COALESCE(term, 0), CAST(last_seen_active AS CHAR),
  NOW(6) >= last_seen_active + INTERVAL lease_ms * 1000 MICROSECOND FROM service_election WHERE anchor = ?`, c.name).
		Scan(&r.id, &r.term, &r.lastRenewal, &r.expired)
	return r, err == nil
}

// awaitRenewals waits until the election's row has been renewed n times
// (each renewal writes last_seen_active) by whoever holds it, and returns
// the last state read. Windows in which nothing may happen (no flapping,
// no request, a value kept) are counted in the holder's renewals, not in
// time: what the test checks after it is what the contract promises over
// those renewals.
func (c *cluster) awaitRenewals(n int) rowState {
	c.t.Helper()
	last, _ := c.row()
	seen := 0
	within := time.Duration(3*n)*RenewInterval + takeoverBound
	if !poll(within, RenewInterval/5, func() bool {
		if r, ok := c.row(); ok && r.lastRenewal != last.lastRenewal {
			last = r
			seen++
		}
		return seen >= n
	}) {
		c.t.Fatalf("%d renewals of the row within %v, want %d; row now: %+v", seen, within, n, last)
	}
	return last
}

// awaitLeaseOver waits until the row's lease has run out by the database
// clock.
func (c *cluster) awaitLeaseOver(within time.Duration) {
	c.t.Helper()
	if !poll(within, 5*time.Millisecond, func() bool { r, ok := c.row(); return ok && r.expired }) {
		r, _ := c.row()
		c.t.Fatalf("the row's lease not over by the database clock within %v: %+v", within, r)
	}
}

// awaitStatement waits until each of ms has a statement on the server
// whose text contains what (a follower waiting in GET_LOCK between looks,
// a heartbeat blocked on the row's lock), read from the processlist.
func (c *cluster) awaitStatement(what string, within time.Duration, ms ...*member) {
	c.t.Helper()
	for _, m := range ms {
		if !poll(within, 5*time.Millisecond, func() bool {
			var n int
			err := c.admin.QueryRowContext(c.ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
  WHERE USER = ? AND COMMAND <> 'Sleep' AND INFO LIKE CONCAT('%', ?, '%')`, m.user, what).Scan(&n)
			return err == nil && n > 0
		}) {
			c.t.Fatalf("%s has no statement with %q on the server within %v", m.id, what, within)
		}
	}
}

func idOf(m *member) string {
	if m == nil {
		return "none"
	}
	return m.id
}

func ids(ms []*member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.id)
	}
	return out
}

// sample polls IsLeader of every member and records an overlap when two
// lead at the same instant: A, then B, then A again all true. A tick
// later than stallMin is a stall of the test process (see stalls).
func (c *cluster) sample() {
	defer close(c.sDone)
	t := time.NewTicker(200 * time.Microsecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-c.stopS:
			return
		case <-t.C:
		}
		if now := time.Now(); now.Sub(last) > stallMin {
			c.stalls.add(last, now)
		}
		last = time.Now()
		c.mu.Lock()
		ms := append([]*member(nil), c.member...)
		c.mu.Unlock()
		var first *member
		for _, m := range ms {
			if m.clock != nil && m.clock.isFrozen() {
				continue // a frozen process runs no code: nobody can ask it
			}
			if !m.e.IsLeader() {
				continue
			}
			if first == nil {
				first = m
				continue
			}
			if first.e.IsLeader() {
				c.rec.violation(fmt.Sprintf("IsLeader true on %s and %s at the same instant", first.id, m.id))
			}
		}
	}
}

// finish stops every candidate and checks the records.
func (c *cluster) finish() {
	c.mu.Lock()
	ms := append([]*member(nil), c.member...)
	c.mu.Unlock()
	for _, m := range ms {
		if err := c.stop(m); err != nil && !errors.Is(err, context.Canceled) {
			c.t.Logf("%s: Run returned %v", m.id, err)
		}
	}
	close(c.stopS)
	<-c.sDone
	<-c.pDone
	c.rec.check(c.t)
}

// recorder keeps every leadership interval from the callbacks.
type recorder struct {
	mu         sync.Mutex
	intervals  []*interval
	violations []string
	changes    []election.Record
	changedFor []string // the candidate whose OnLeaderChanged saw changes[i]
}

type interval struct {
	id         string
	term       uint64
	start, end time.Time
	returned   bool
	reason     election.Reason
}

func (r *recorder) violation(s string) {
	r.mu.Lock()
	r.violations = append(r.violations, s)
	r.mu.Unlock()
}

func (r *recorder) callbacks(id string) election.Callbacks {
	return election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) {
			term := l.Term
			iv := &interval{id: id, term: term, start: time.Now()}
			r.mu.Lock()
			for _, o := range r.intervals {
				if o.id == id && o.end.IsZero() {
					r.violations = append(r.violations, fmt.Sprintf("%s: OnElected(term %d) while term %d not demoted", id, term, o.term))
				}
			}
			r.intervals = append(r.intervals, iv)
			r.mu.Unlock()
			<-ctx.Done()
			r.mu.Lock()
			iv.returned = true
			r.mu.Unlock()
		},
		OnDemoted: func(d election.Demotion) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, o := range r.intervals {
				if o.id == id && o.end.IsZero() {
					if o.term != d.Term {
						r.violations = append(r.violations, fmt.Sprintf("%s: demoted term %d, elected %d", id, d.Term, o.term))
					}
					if !o.returned {
						r.violations = append(r.violations, fmt.Sprintf("%s: OnDemoted before OnElected returned", id))
					}
					o.end, o.reason = d.Until, d.Reason
					return
				}
			}
			r.violations = append(r.violations, fmt.Sprintf("%s: OnDemoted(term %d) without OnElected", id, d.Term))
		},
		OnLeaderChanged: func(rec election.Record) {
			r.mu.Lock()
			r.changes = append(r.changes, rec)
			r.changedFor = append(r.changedFor, id)
			r.mu.Unlock()
		},
	}
}

// sawValue reports whether candidate by's OnLeaderChanged saw leader
// publish value.
func (r *recorder) sawValue(by, leader, value string) bool {
	return r.saw(by, func(rec election.Record) bool { return rec.ID == leader && rec.Value == value })
}

// saw reports whether candidate by's OnLeaderChanged saw a record that ok
// accepts.
func (r *recorder) saw(by string, ok func(election.Record) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, rec := range r.changes {
		if r.changedFor[i] == by && ok(rec) {
			return true
		}
	}
	return false
}

// elections returns a copy of the intervals, by start.
func (r *recorder) elections() []interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]interval, len(r.intervals))
	for i, iv := range r.intervals {
		out[i] = *iv
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// check fails t on overlapping leaderships, terms that do not increase
// (but for the same candidate's, see below), leaderships never demoted,
// and sampler or callback-order violations.
func (r *recorder) check(t *testing.T) {
	t.Helper()
	ivs := r.elections()
	for i, a := range ivs {
		if a.end.IsZero() {
			t.Errorf("%s: term %d never demoted (OnDemoted must be called before Run returns)", a.id, a.term)
			continue
		}
		// A renewal that lands after the deadline begins a new
		// leadership of the same term (the Callbacks contract): only
		// when the same candidate led last.
		if i > 0 {
			if p := ivs[i-1]; a.term < p.term || a.term == p.term && a.id != p.id {
				t.Errorf("term did not increase: %s term %d after %s term %d", a.id, a.term, p.id, p.term)
			}
		}
		for _, b := range ivs[i+1:] {
			if b.start.Before(a.end) {
				t.Errorf("two leaders: %s led (term %d) %s..%s and %s (term %d) from %s",
					a.id, a.term, a.start.Format("15:04:05.000000"), a.end.Format("15:04:05.000000"),
					b.id, b.term, b.start.Format("15:04:05.000000"))
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.violations {
		t.Error(v)
	}
	var lines []string
	for _, a := range ivs {
		lines = append(lines, fmt.Sprintf("%s term %d %s..%s (%s)", a.id, a.term,
			a.start.Format("15:04:05.000"), a.end.Format("15:04:05.000"), a.reason))
	}
	t.Logf("leaderships:\n  %s", strings.Join(lines, "\n  "))
}

// stalls are the spans in which the test process or the database stopped
// answering for longer than stallMin: the sampler's tick (every 200 µs)
// late, or a ping of the database slow (see ping). A shared 2-core
// machine (a virtual one, or a CI run's other legs) stalls now and then
// for most of a second, longer than the suite's renew deadline. Within
// such a span the contract promises no bound: a wait for a state is
// extended by the stalls within it (waitFor), and a lease lost during
// stalls that took half the renew deadline or more is not a flap
// (flaps).
type stalls struct {
	mu    sync.Mutex
	spans [][2]time.Time
}

// stallMin is the shortest stall recorded; maxStalled is the most that
// stalls may extend one wait.
const (
	stallMin   = RenewInterval
	maxStalled = 10 * time.Second
)

func (s *stalls) add(from, to time.Time) {
	s.mu.Lock()
	s.spans = append(s.spans, [2]time.Time{from, to})
	s.mu.Unlock()
}

// within returns how much of [from, to] the stalls took: their union
// (the sampler and the ping see one stall twice).
func (s *stalls) within(from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return spans.Within(s.spans, from, to)
}

// ping commits a write to the database (a row of a table of its own,
// electiontest_ping) every RenewInterval until the cluster finishes, and
// records each that took longer than stallMin as a stall (see stalls). A
// write, not a SELECT 1: a renewal is a commit, and a commit waits on the
// disk (the test servers flush the log at each commit), which on a shared
// virtual machine stalls too, unseen by a read (2026-12-01: a leader lost
// its lease, and no stall was seen). Should the table not be made, it
// sends SELECT 1.
func (c *cluster) ping() {
	defer close(c.pDone)
	q := "SELECT 1"
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	if _, err := c.admin.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS electiontest_ping (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB"); err == nil {
		q = "INSERT INTO electiontest_ping (id, n) VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1"
	}
	cancel()
	t := time.NewTicker(RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stopS:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		start := time.Now()
		_, err := c.admin.ExecContext(ctx, q)
		cancel()
		if end := time.Now(); err == nil && end.Sub(start) > stallMin {
			c.stalls.add(start, end)
		}
	}
}

// lostInStall reports whether leadership iv ended in a lease lost while
// the test process or the database stalled for half the renew deadline
// or more before it (see stalls).
func (c *cluster) lostInStall(iv interval) bool {
	return iv.reason == election.ReasonLeaseLost && !iv.end.IsZero() &&
		c.stalls.within(iv.end.Add(-RenewDeadline), iv.end) >= RenewDeadline/2
}

// flaps returns how many times the leadership changed in ivs (an
// election after the first), but for the elections that followed a lease
// lost while the test process or the database stalled for half the renew
// deadline or more before it (see stalls): the contract lets a leader
// whose renewals get no answer within the deadline stand down.
func (c *cluster) flaps(ivs []interval) int {
	n := len(ivs) - 1
	for _, iv := range ivs {
		if c.lostInStall(iv) {
			c.t.Logf("%s lost its lease (term %d) while the machine or the database stalled for %v of the renew deadline before: not a flap",
				iv.id, iv.term, c.stalls.within(iv.end.Add(-RenewDeadline), iv.end))
			n--
		}
	}
	return max(n, 0)
}
