//go:build linux

package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionprom"
	"github.com/sqlelect/sqlelect/integration/chaos"
	"github.com/sqlelect/sqlelect/integration/internal/groupconn"
	"github.com/sqlelect/sqlelect/integration/testdb"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/schema"
)

// Group Replication (MySQL's own distributed engine, InnoDB Cluster's) on a
// 3-member group on loopback, from the MySQL 9.7 Debian root
// (internal/mysqld.StartGroup).

// grTimings are the candidates' timings on a group: a commit waits for the
// group's certification (a round trip among the members), so a little
// longer than the chaos suite's.
var grTimings = election.Config{
	LeaseDuration: 2 * time.Second,
	Tuning:        election.TuningConfig{RenewDeadline: 1500 * time.Millisecond, RenewInterval: 250 * time.Millisecond, RetryInterval: 250 * time.Millisecond, QueryTimeout: time.Second, LockDelay: 2 * time.Second},
}

// startGroup starts a group for t, creates database sqlelect with the
// election table and user elect (password pw) on it, and waits until every
// member has applied that. It skips t when the MySQL root cannot be built
// for want of root privileges; any other failure fails t.
// serverStarts lets the parallel tests that start servers of their own
// (the two groups, TestHeldRowLockLeavesServerUsable's) start them one at a
// time: a MySQL 9.7 start is mostly CPU, and seven at once on a busy
// 2-core machine outlasted the start timeout. What follows the starts
// still runs side by side.
var serverStarts sync.Mutex

func startGroup(t *testing.T, ctx context.Context, multi bool) *mysqld.Group {
	t.Helper()
	if ok, why := mysqld.GroupSelected(); !ok {
		t.Skip(why)
	}
	serverStarts.Lock()
	g, err := mysqld.StartGroup(ctx, mysqld.GroupOptions{MultiPrimary: multi, Logf: t.Logf})
	serverStarts.Unlock()
	if errors.Is(err, mysqld.ErrNeedRoot) {
		t.Skipf("Group Replication runs MySQL 9.7 from a Debian root built with debootstrap: %v", err)
	}
	if err != nil {
		t.Fatalf("starting a Group Replication group: %v", err)
	}
	t.Cleanup(func() { _ = g.Stop() })
	t.Logf("group %s (multi-primary %v): %s", g.Name, multi, g.Nodes[0].Version())
	root := openQuiet(t, g.Nodes[0].DSN(""))
	for _, q := range []string{
		"CREATE DATABASE sqlelect",
		"CREATE USER 'elect'@'%' IDENTIFIED BY 'pw'",
		"GRANT ALL ON sqlelect.* TO 'elect'@'%'",
	} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if multi {
		// golang-migrate records the version in a SERIALIZABLE
		// transaction, which a multi-primary group with
		// update-everywhere checks refuses (error 3098): create the
		// table from schema.DDL, as a user with migrations of their own
		// would.
		err := schema.New(openQuiet(t, g.Nodes[0].DSN("sqlelect"))).Up(ctx)
		t.Logf("schema.Up on a multi-primary group: %v", err)
		ddl := openQuiet(t, g.Nodes[0].DSN("sqlelect")+"&multiStatements=true")
		if _, err := ddl.ExecContext(ctx, schema.DDL("")); err != nil {
			t.Fatalf("schema.DDL: %v", err)
		}
	} else {
		testdb.Migrate(t, g.Nodes[0].DSN("sqlelect"))
	}
	for i, n := range g.Nodes {
		db := openQuiet(t, n.DSN("sqlelect"))
		for {
			var one int
			err := db.QueryRowContext(ctx, "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sqlelect' AND TABLE_NAME = 'service_election'").Scan(&one)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("member %d: the election table did not replicate: %v", i+1, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return g
}

// openQuiet opens dsn and closes it in t.Cleanup, ignoring the errors of
// closing connections to members the test killed.
func openQuiet(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// errorNumbers is a slog.Handler that counts the MySQL error numbers of
// the candidates' logged errors (attribute err; failed heartbeats are
// "follow failed" and "renewal failed" at debug level): which errors the
// metrics' kinds sum up. beats counts those of failed heartbeats only,
// each also counted once in the metrics, with 1180 "Got error 149" (a
// transaction a remote write set aborted) as "1180/149".
type errorNumbers struct {
	mu    *sync.Mutex
	n     map[string]int
	beats map[string]int
}

func (h errorNumbers) Enabled(context.Context, slog.Level) bool { return true }
func (h errorNumbers) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h errorNumbers) WithGroup(string) slog.Handler            { return h }
func (h errorNumbers) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" {
			return true
		}
		key, beat := "other", "other"
		var me *mysql.MySQLError
		if err, ok := a.Value.Any().(error); ok && errors.As(err, &me) {
			key, beat = fmt.Sprintf("%d", me.Number), fmt.Sprintf("%d", me.Number)
			if me.Number == 1180 && strings.HasPrefix(me.Message, "Got error 149 ") {
				beat = "1180/149"
			}
		}
		h.mu.Lock()
		h.n[key]++
		if r.Message == "follow failed" || r.Message == "renewal failed" {
			h.beats[beat]++
		}
		h.mu.Unlock()
		return false
	})
	return nil
}

// memberConfig is the go-sql-driver configuration of user elect on member
// i. On MySQL a write's wait for a row lock cannot be bounded per
// statement, so, as docs/servers.md advises, innodb_lock_wait_timeout is set
// near QueryTimeout in the DSN.
func memberConfig(g *mysqld.Group, i int) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = "elect", "pw", "tcp", g.Nodes[i].Addr, "sqlelect"
	cfg.ParseTime = true
	cfg.Timeout = time.Second
	cfg.InterpolateParams = true
	cfg.Params = map[string]string{"time_zone": "'+00:00'", "innodb_lock_wait_timeout": "1"}
	return cfg
}

// grRun is the candidates of one election and what they recorded, in the
// records of the chaos suite's checker.
type grRun struct {
	t       *testing.T
	backend string
	name    string
	mu      sync.Mutex
	recs    []chaos.Record
	regs    map[string]*prometheus.Registry
	errNums errorNumbers
	es      map[string]election.Election
	wg      sync.WaitGroup
	runErrs []error
}

func (r *grRun) record(rec chaos.Record) {
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	rec.Time = rec.Time.Round(0)
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

// start runs candidate id on db until ctx ends.
func (r *grRun) start(ctx context.Context, db *sql.DB, id string) {
	r.t.Helper()
	cfg := grTimings
	cfg.Name, cfg.ID = r.name, id
	m := electionprom.NewMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	cfg.Metrics = m
	r.mu.Lock()
	if r.errNums.n == nil {
		r.errNums = errorNumbers{mu: new(sync.Mutex), n: map[string]int{}, beats: map[string]int{}}
	}
	cfg.Tuning.Logger = slog.New(r.errNums)
	r.mu.Unlock()
	cfg.Callbacks = election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) {
			term := l.Term
			r.record(chaos.Record{Event: "elected", ID: id, Term: term})
			<-ctx.Done()
		},
		OnDemoted: func(d election.Demotion) {
			r.record(chaos.Record{Event: "demoted", ID: id, Term: d.Term, Until: d.Until, Reason: string(d.Reason)})
		},
	}
	newElection := election.NewTable
	if r.backend == "lock" {
		newElection = election.NewLock
	}
	e, err := newElection(db, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	if r.regs == nil {
		r.regs = map[string]*prometheus.Registry{}
	}
	r.regs[id] = reg
	if r.es == nil {
		r.es = map[string]election.Election{}
	}
	r.es[id] = e
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := e.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			r.mu.Lock()
			r.runErrs = append(r.runErrs, fmt.Errorf("%s: Run: %w", id, err))
			r.mu.Unlock()
		}
	}()
}

// leader returns the candidate that leads now by the records, or "".
func (r *grRun) leader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	lead := map[string]bool{}
	for _, rec := range r.recs {
		switch rec.Event {
		case "elected":
			lead[rec.ID] = true
		case "demoted":
			delete(lead, rec.ID)
		}
	}
	if len(lead) != 1 {
		return ""
	}
	for id := range lead {
		return id
	}
	return ""
}

func (r *grRun) waitLeader(ctx context.Context, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		if id := r.leader(); id != "" {
			return id, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("%s: no single leader within %v", r.name, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// errorCounts sums the candidates' heartbeat errors by kind.
func (r *grRun) errorCounts() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]float64{}
	for _, reg := range r.regs {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != "sqlelect_heartbeat_errors_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" {
						out[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return out
}

// check waits for the candidates to end (their ctx must be done), runs the
// chaos suite's checker on the records and fails t on any violation; it
// returns the checker's result.
func (r *grRun) check() chaos.Result {
	r.t.Helper()
	r.wg.Wait()
	r.mu.Lock()
	recs := append([]chaos.Record(nil), r.recs...)
	errs := r.runErrs
	r.mu.Unlock()
	for _, err := range errs {
		r.t.Errorf("%s: %v", r.name, err)
	}
	recs = append(recs, chaos.Record{Event: "run_end", Time: time.Now()})
	tm := grTimings
	bound := chaos.Bound(tm.LeaseDuration, tm.Tuning.LockDelay, tm.Tuning.RenewInterval, tm.Tuning.RetryInterval, tm.Tuning.QueryTimeout,
		0.2 /* the default Tuning.JitterFactor */, time.Second)
	res := chaos.Check(chaos.Config{RenewDeadline: tm.Tuning.RenewDeadline, Bound: bound, StuckAfter: time.Hour}, recs, nil)
	for _, v := range res.Violations {
		r.t.Errorf("%s: %s", r.name, v)
	}
	var lines []string
	for _, iv := range res.Intervals {
		lines = append(lines, iv.String())
	}
	r.errNums.mu.Lock()
	nums := fmt.Sprint(r.errNums.n)
	r.errNums.mu.Unlock()
	r.t.Logf("%s (%s backend): %d leaderships, heartbeat errors %v (by MySQL error number: %s):\n\t%s",
		r.name, r.backend, len(res.Intervals), r.errorCounts(), nums, strings.Join(lines, "\n\t"))
	r.t.Logf("%s: closest to the liveness bound: a leader %v after %s (bound %v)",
		r.name, res.Margins.NextLeader.Round(time.Millisecond), res.Margins.NextLeaderAfter, bound)
	return res
}

// gaps returns, for each fault, how long nobody led: from the end of the
// last leadership that began before the fault to the start of the first
// that began after it.
func gaps(res chaos.Result) []time.Duration {
	var out []time.Duration
	ivs := append([]chaos.Interval(nil), res.Intervals...)
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].Start.Before(ivs[j].Start) })
	for _, f := range res.Faults {
		if f.Survived {
			out = append(out, 0)
			continue
		}
		var before, after *chaos.Interval
		for i := range ivs {
			if ivs[i].Start.Before(f.Fault.Time) {
				before = &ivs[i]
			} else if after == nil {
				after = &ivs[i]
			}
		}
		var gap time.Duration
		if before != nil && after != nil {
			gap = after.Start.Sub(before.End)
		}
		out = append(out, gap)
	}
	return out
}

// TestGroupReplicationSinglePrimary: candidates of both backends reach a
// single-primary group through groupconn.Connector (a DSN per member; the
// connector keeps the writable one). The primary is killed (SIGKILL): the
// survivors expel it (about 5 s) and elect another primary, the candidates'
// connections to the dead member fail and their next ones reach the new
// primary, where one of them takes over once the old leader's lease has run
// out by the database clock. Then the primary is switched over with
// group_replication_set_as_primary: the old primary stays up, read-only;
// the connector drops connections refused there. No two leaders at any
// instant (the chaos suite's checker), a leader within the liveness bound
// of the new primary's election, and how long nobody led is logged.
//
// The lock backend: GET_LOCK is local to each member, so a primary change
// takes the holder's lock with it (the member died, or it turned read-only
// and the holder's renewal, a write of the row, is refused). The first
// candidate to reach the new primary gets a lock there at once, finds the
// row written by a lock holder whose lease may still be live, and leads
// after the rest of that lease (the lock delay of a lost connection): the
// old holder stands down by its own clock first. So on single-primary the
// lock backend is safe and fails over like a crashed holder; Run's
// preflight accepts it.
func TestGroupReplicationSinglePrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member Group Replication group")
	}
	// A group of its own (MySQL 9.7 only), and it waits on members' restarts
	// and GR's own elections more than it computes: beside the package's
	// other waiting tests at the end, and beside the other group's test
	// (two groups, 6 members, fit the machine's memory), rather than one
	// after the other. The deadline below starts when it runs.
	t.Parallel()
	// A deadline for the whole test, not a bound on any step: beside two
	// CPU hogs, four member restarts and rejoins outlasted 6 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g := startGroup(t, ctx, false)
	t.Run("Doctor", func(t *testing.T) { doctorGroup(t, ctx, g, false) })
	var cfgs []*mysql.Config
	for i := range g.Nodes {
		cfgs = append(cfgs, memberConfig(g, i))
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runs := map[string]*grRun{}
	for _, backend := range []string{"table", "lock"} {
		r := &grRun{t: t, backend: backend, name: "gr-single-" + backend}
		runs[backend] = r
		for k := range 3 {
			conn, err := groupconn.New(cfgs)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(conn)
			t.Cleanup(func() { db.Close() })
			r.start(runCtx, db, fmt.Sprintf("%s-%d", backend, k+1))
		}
	}
	for _, r := range runs {
		if _, err := r.waitLeader(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)

	fault := func(kind string, inject func(old int) error) {
		old, err := g.Primary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := inject(old); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		p, err := g.WaitPrimary(ctx, old)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		elected := time.Now()
		t.Logf("%s: member %d was the primary; member %d primary %v later", kind, old+1, p+1, elected.Sub(began).Round(time.Millisecond))
		for _, r := range runs {
			r.record(chaos.Record{Event: "fault", Kind: kind, Time: began, End: elected, Target: fmt.Sprintf("member %d", old+1)})
		}
		for _, r := range runs {
			id, err := r.waitLeader(ctx, 20*time.Second)
			if err != nil {
				t.Errorf("%s: %v", kind, err)
				continue
			}
			t.Logf("%s: %s leads on member %d, %v after the new primary", kind, id, p+1, time.Since(elected).Round(time.Millisecond))
		}
		if err := g.Rejoin(ctx, old); err != nil {
			t.Fatalf("%s: rejoin: %v", kind, err)
		}
		if err := g.WaitOnline(ctx, p); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
	fault("gr_primary_kill", func(old int) error { return g.Kill(old) })
	fault("gr_switchover", func(old int) error { return g.SetPrimary(ctx, (old+1)%len(g.Nodes)) })
	fault("gr_primary_leave", func(old int) error { return g.Leave(ctx, old) })
	stop()
	for _, backend := range []string{"table", "lock"} {
		res := runs[backend].check()
		for i, f := range res.Faults {
			var gap time.Duration
			if gs := gaps(res); i < len(gs) {
				gap = gs[i]
			}
			t.Logf("%s backend, %s: failover %v after the fault began (GR's own election %v of it), nobody led for %v",
				backend, f.Fault.Kind, f.Failover.Round(time.Millisecond), f.Fault.End.Sub(f.Fault.Time).Round(time.Millisecond), gap.Round(time.Millisecond))
		}
	}
}

// TestGroupReplicationMultiPrimary: the table backend with candidates on
// every member of a multi-primary group. Two members' concurrent writes of
// the election's row conflict in certification (error 3101 at COMMIT, or
// 1213 where a remote write set aborted a local transaction): the loser
// sees "not leader this tick" and goes on campaigning; Run never fails.
// The leader resigns (the others race for the released row from three
// members) and the leader's member is killed, in turn. No two leaders at any instant. The lock
// backend is refused at Run's preflight on every member
// (ErrUnsupportedTopology: GET_LOCK is local to each member). Fenced is
// safe: a leader's fenced transaction on one member that outlives its
// lease while a candidate on another member takes over cannot commit (the
// fence writes the row, so the two conflict in certification).
func TestGroupReplicationMultiPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member Group Replication group")
	}
	// A group of its own (MySQL 9.7 only), and it waits on members' restarts
	// and GR's own elections more than it computes: beside the package's
	// other waiting tests at the end, and beside the other group's test
	// (two groups, 6 members, fit the machine's memory), rather than one
	// after the other. The deadline below starts when it runs.
	t.Parallel()
	// A deadline for the whole test, not a bound on any step: beside two
	// CPU hogs, four member restarts and rejoins outlasted 6 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	g := startGroup(t, ctx, true)
	t.Run("Doctor", func(t *testing.T) { doctorGroup(t, ctx, g, true) })
	dbs := make([]*sql.DB, len(g.Nodes))
	for i := range g.Nodes {
		db, err := sql.Open("mysql", memberConfig(g, i).FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}

	t.Run("LockBackendRefused", func(t *testing.T) {
		for i, db := range dbs {
			e, err := election.NewLock(db, election.Config{Name: "gr-refused", ID: "x"})
			if err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
			err = e.Run(rctx)
			rcancel()
			if !errors.Is(err, election.ErrUnsupportedTopology) {
				t.Errorf("member %d: the lock backend's Run returned %v, want ErrUnsupportedTopology", i+1, err)
			} else {
				t.Logf("member %d: %v", i+1, err)
			}
		}
	})

	t.Run("FencedLongTransaction", func(t *testing.T) {
		grFencedLong(t, ctx, dbs[0], dbs[1])
	})

	t.Run("TableBackend", func(t *testing.T) {
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		r := &grRun{t: t, backend: "table", name: "gr-multi"}
		// Candidates on every member, each with a pool of its own.
		for k := range 2 * len(g.Nodes) {
			node := k % len(g.Nodes)
			db, err := sql.Open("mysql", memberConfig(g, node).FormatDSN())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			r.start(runCtx, db, fmt.Sprintf("m%d.%d", node+1, k+1))
		}
		if _, err := r.waitLeader(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		// Clean resigns make the others race for the released row from
		// three members (certification conflicts); member kills take a
		// leader's member away.
		for i := range 8 {
			time.Sleep(2 * time.Second)
			id := r.leader()
			if id == "" {
				continue
			}
			began := time.Now()
			if i%2 == 0 {
				r.mu.Lock()
				e := r.es[id]
				r.mu.Unlock()
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				err := e.Resign(rctx)
				rcancel()
				r.record(chaos.Record{Event: "fault", Kind: "resign", Time: began, End: time.Now(), Target: id, Detail: fmt.Sprint(err)})
			} else {
				node := int(id[1] - '1')
				if err := g.Kill(node); err != nil {
					t.Fatal(err)
				}
				r.record(chaos.Record{Event: "fault", Kind: "gr_member_kill", Time: began, End: began, Target: id})
				if _, err := r.waitLeader(ctx, 30*time.Second); err != nil {
					t.Error(err)
				}
				if err := g.Rejoin(ctx, node); err != nil {
					t.Fatalf("rejoin of member %d, %v after its kill: %v", node+1, time.Since(began).Round(time.Second), err)
				}
			}
			if _, err := r.waitLeader(ctx, 30*time.Second); err != nil {
				t.Error(err)
			}
		}
		time.Sleep(2 * time.Second)
		stop()
		res := r.check()
		errs := r.errorCounts()
		t.Logf("multi-primary: %d leaderships over %d faults; heartbeat errors by kind: %v (certification conflicts are 3101 at COMMIT and 1180 for a local transaction a remote one aborted; 1290: a restarted member not yet in the group is read-only)",
			len(res.Intervals), len(res.Faults), errs)
		for _, f := range res.Faults {
			t.Logf("%s of %s: next leader %v after it began", f.Fault.Kind, f.Fault.Target, f.Failover.Round(time.Millisecond))
		}
		// Every certification conflict of a heartbeat counts as a deadlock
		// in the metrics (a heartbeat's error is counted there once, and
		// logged at most once).
		r.errNums.mu.Lock()
		conflicts := r.errNums.beats["1213"] + r.errNums.beats["3101"] + r.errNums.beats["1180/149"]
		beats := fmt.Sprint(r.errNums.beats)
		r.errNums.mu.Unlock()
		if float64(conflicts) > errs["deadlock"] {
			t.Errorf("heartbeat errors by kind %v: %.0f deadlocks, but the heartbeats logged %d certification conflicts (by number: %s)",
				errs, errs["deadlock"], conflicts, beats)
		}
		t.Logf("heartbeats' certification conflicts: %d (by number: %s), counted as kind=deadlock: %.0f", conflicts, beats, errs["deadlock"])
	})
}

// grFencedLong: leader L on one member runs a fenced transaction that
// outlives its lease, under a context that is never cancelled, while M on
// another member campaigns. If M leads meanwhile, L's commit must fail.
func grFencedLong(t *testing.T, ctx context.Context, dbL, dbM *sql.DB) {
	if _, err := dbL.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS gr_fenced (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, term BIGINT UNSIGNED NOT NULL, at DATETIME(6) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	cfg := func(id string) election.Config {
		c := grTimings
		c.Name, c.ID = "gr-fenced", id
		return c
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	run := func(db *sql.DB, id string) election.Election {
		e, err := election.NewTable(db, cfg(id))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = e.Run(runCtx) }()
		return e
	}
	l := run(dbL, "L")
	for deadline := time.Now().Add(20 * time.Second); !l.IsLeader(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("L not elected")
		}
	}
	m := run(dbM, "M")
	term := l.Term()
	var mLedAt time.Time
	began := time.Now()
	err := l.Fenced(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec("INSERT INTO gr_fenced (term, at) VALUES (?, NOW(6))", term); err != nil {
			return err
		}
		// The session stays busy, so that the server does not drop it for
		// idling past the lease (Fenced bounds its idle time): the
		// commit must then fail in certification.
		for deadline := time.Now().Add(2*grTimings.LeaseDuration + 3*time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, err := tx.Exec("SELECT 1"); err != nil {
				return err
			}
			if m.IsLeader() {
				mLedAt = time.Now()
				time.Sleep(100 * time.Millisecond)
				break
			}
		}
		return nil
	})
	t.Logf("L's fenced transaction (term %d) ran %v", term, time.Since(began).Round(time.Millisecond))
	switch {
	case mLedAt.IsZero():
		t.Logf("M did not lead while L's fenced transaction was open (Fenced returned %v)", err)
	case err == nil:
		t.Errorf("fence broken: M led from %s while L's fenced transaction of term %d was open, and it committed", mLedAt.Format("15:04:05.000"), term)
	default:
		t.Logf("M led, and L's commit failed: %v", err)
	}
	var n int
	if err := dbL.QueryRowContext(ctx, "SELECT COUNT(*) FROM gr_fenced WHERE term = ?", term).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if !mLedAt.IsZero() && n != 0 {
		t.Errorf("L's fenced row of term %d is in the table after M led", term)
	}
}
