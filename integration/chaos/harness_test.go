//go:build linux

package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/history"
	"github.com/sqlelect/sqlelect/integration/testdb"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/internal/spans"
	"github.com/sqlelect/sqlelect/schema"
)

// EnvRounds names the variable that sets how many rounds of each fault kind
// the suite injects on each backend (default 2, the short version; 0 skips
// the suite).
const EnvRounds = "SQLELECT_CHAOS_ROUNDS"

// EnvSummary names the variable holding a file to which the summary table
// is written (besides the test output).
const EnvSummary = "SQLELECT_CHAOS_SUMMARY"

// EnvFaults names the variable that, set to a comma-separated list of fault
// kinds (e.g. op_assume_resign,net_halfopen), injects only those; runs that
// inject none of them are skipped.
const EnvFaults = "SQLELECT_CHAOS_FAULTS"

// EnvKeep names the variable that, set to 1, keeps every run's records (they
// are kept anyway when a run fails).
const EnvKeep = "SQLELECT_CHAOS_KEEP"

var roundsFlag = flag.Int("chaos.rounds", -1, "rounds of each fault kind per backend (default $"+EnvRounds+", else 2)")

// rounds returns the number of rounds of each fault kind.
func rounds(t *testing.T) int {
	n := 2
	if *roundsFlag >= 0 {
		n = *roundsFlag
	} else if v := os.Getenv(EnvRounds); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			t.Fatalf("%s=%q: want a number of rounds", EnvRounds, v)
		}
	}
	if n == 0 {
		t.Skipf("%s=0", EnvRounds)
	}
	return n
}

// shortMode reports whether the suite runs its short version (neither the
// flag nor the variable sets the rounds): the faults marked once then run
// one round each.
func shortMode() bool {
	return *roundsFlag < 0 && os.Getenv(EnvRounds) == ""
}

// selectFaults keeps the faults that $SQLELECT_CHAOS_FAULTS names (all when
// it is empty), and skips t when none is left.
func selectFaults(t *testing.T, faults []fault) []fault {
	v := os.Getenv(EnvFaults)
	if v == "" {
		return faults
	}
	want := map[string]bool{}
	for _, k := range strings.Split(v, ",") {
		want[strings.TrimSpace(k)] = true
	}
	var out []fault
	for _, f := range faults {
		if want[f.kind] {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Skipf("%s=%s selects none of this run's faults", EnvFaults, v)
	}
	return out
}

// timings is the candidates' configuration: short, so that a round takes a
// few seconds.
type timings struct {
	Lease, RenewDeadline, RenewInterval, RetryInterval, QueryTimeout, LockDelay time.Duration
	FencedEvery                                                                 time.Duration
}

var defaultTimings = timings{
	Lease:         1500 * time.Millisecond,
	RenewDeadline: time.Second,
	RenewInterval: 200 * time.Millisecond,
	RetryInterval: 200 * time.Millisecond,
	QueryTimeout:  500 * time.Millisecond,
	LockDelay:     1500 * time.Millisecond,
	FencedEvery:   50 * time.Millisecond,
}

// boundMargin is the liveness bound's margin for scheduling on a small
// machine and reconnecting.
const boundMargin = time.Second

// fenceSlack: see Config.FenceSlack.
const fenceSlack = 50 * time.Millisecond

func (tm timings) bound() time.Duration {
	return Bound(tm.Lease, tm.LockDelay, tm.RenewInterval, tm.RetryInterval, tm.QueryTimeout,
		0.2 /* the default Tuning.JitterFactor */, boundMargin)
}

func (tm timings) checkerConfig() Config {
	return Config{RenewDeadline: tm.RenewDeadline, Bound: tm.bound(), FenceSlack: fenceSlack, StuckAfter: tm.bound(),
		FromStart: map[string]bool{kindNetHalfOpen: true, kindNetHalfOpenBatch: true}}
}

// The candidate binary, built once per test binary.
var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func candidateBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "sqlelect-chaos-bin-")
		if buildErr != nil {
			return
		}
		bin := filepath.Join(buildDir, "candidate")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "github.com/sqlelect/sqlelect/integration/chaos/candidate").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build the candidate: %v\n%s", err, out)
			return
		}
		buildBin = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// goTool returns the go command: on the PATH, else where the Makefile
// looks.
func goTool() string {
	if _, err := exec.LookPath("go"); err != nil {
		return "/usr/local/go/bin/go"
	}
	return "go"
}

// cluster is one election: candidate processes, what they print, and the
// suite's notes, for the checker.
type cluster struct {
	// took, when a fault's inject sets it, is when the fault took effect
	// (a freeze armed to fire at a given statement): the fault's record
	// starts then. ended, when set, is when the fault ended, though its
	// inject went on (to bring a killed Group Replication member back).
	took, ended time.Time

	t       *testing.T
	ctx     context.Context
	label   string // table, lock, galera: the summary's backend column
	backend string // the candidates' --backend
	group   bool   // the slots' DSNs list a Group Replication group's members (--group)
	name    string // the election
	prefix  string // of the candidates' ids: "c" (c1.1, c2.1, …) unless set
	// elections, when more than 1, is how many elections each candidate
	// campaigns in (name, name-2, …); batch runs them through a Batcher.
	elections int
	batch     bool
	// shards, when set, is the number of shards of the shard group
	// shardGroup each candidate joins instead (package shards); name is
	// then the first shard's election, the one the faults aim at.
	shards     int
	shardGroup string
	// extraArgs are appended to every candidate's command line.
	extraArgs []string
	// noHistory, when set, says why the elections' history (migration
	// 10) is not checked against the records: finish reads it otherwise.
	noHistory string
	// readings holds, per election, the history as read before a fault
	// made the candidates write over its rows (readHistory).
	readings map[string][][]history.Term
	tm       timings
	rng      *rand.Rand
	outDir   string
	recFile  *os.File

	mu      sync.Mutex
	recs    []Record
	leading map[string]uint64 // candidates with an open leadership
	slots   []*slot
}

// slot is one candidate position: a database user and a DSN, and the
// candidate process currently running in it (a restart is a new process
// with a new id).
type slot struct {
	n    int
	user string
	dsn  string
	node int // Galera: the node the candidate talks to
	inc  int
	proc *proc
	px   *proxy // the slot's toxiproxy, nil when none
	hole *hole  // the relay in front of px (or the node), nil when none
	// bin, when set, is the candidate binary the slot runs (another
	// version's: see TestChaosRollingUpgrade) instead of candidateBinary.
	bin string
}

type proc struct {
	id      string
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // SIGSTOPped
	killed  bool
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func newCluster(t *testing.T, ctx context.Context, label, backend string, tm timings) *cluster {
	dir, err := os.MkdirTemp("", "sqlelect-chaos-"+label+"-")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{
		t: t, ctx: ctx, label: label, backend: backend, name: "chaos-" + label, prefix: "c", tm: tm,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed)), outDir: dir, recFile: f,
		leading: map[string]uint64{},
	}
	stopWatch := c.watchStalls()
	t.Cleanup(func() {
		c.killAll()
		stopWatch()
		f.Close()
		if t.Failed() || os.Getenv(EnvKeep) == "1" {
			t.Logf("records kept in %s (records.jsonl: one JSON record a line; candidate-*.log: their stderr)", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	return c
}

// harnessStallMin is the shortest stall of the suite's own process that
// watchStalls records; stallProbeEvery how often it looks.
const (
	harnessStallMin = 500 * time.Millisecond
	stallProbeEvery = 20 * time.Millisecond
)

// watchStalls records, until the returned stop, each span in which this
// process stalled for longer than harnessStallMin (a harness_stall record,
// from Time to End; see the checker's package comment): its ticker came
// late, or a one-byte write to a file of the run's directory, where the
// candidates write their logs, hung (2026-12-01: in one CI run, three runs
// on two servers, side by side, each saw a candidate make no heartbeat for
// 10.72 to 10.74 s, unseen on an idle machine in nine runs).
func (c *cluster) watchStalls() (stop func()) {
	f, err := os.Create(filepath.Join(c.outDir, "stall-probe"))
	if err != nil {
		c.t.Fatal(err)
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		t := time.NewTicker(stallProbeEvery)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			_, _ = f.WriteAt([]byte{'.'}, 0)
			if now := time.Now(); now.Sub(last) > harnessStallMin {
				c.record(Record{Event: "harness_stall", Time: last, End: now})
			}
			last = time.Now()
		}
	}()
	return func() { close(quit); <-done }
}

// record notes one event; safe from any goroutine.
func (c *cluster) record(r Record) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.Round(0)
	b, _ := json.Marshal(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r)
	_, _ = c.recFile.Write(append(b, '\n'))
	if r.Election != "" && r.Election != c.name {
		return // the faults aim at the leader of the first election
	}
	switch r.Event {
	case "elected":
		c.leading[r.ID] = r.Term
	case "demoted", "killed", "exited":
		delete(c.leading, r.ID)
	}
}

func (c *cluster) records() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.recs...)
}

// addSlot adds a candidate position; the caller has created its user.
func (c *cluster) addSlot(user, dsn string, node int, px *proxy, h *hole) *slot {
	s := &slot{n: len(c.slots) + 1, user: user, dsn: dsn, node: node, px: px, hole: h}
	c.slots = append(c.slots, s)
	return s
}

// start starts a new candidate process in slot s.
func (c *cluster) start(s *slot) {
	c.t.Helper()
	s.inc++
	id := fmt.Sprintf("%s%d.%d", c.prefix, s.n, s.inc)
	name := c.name
	if c.shards > 0 {
		name = c.shardGroup
	}
	args := []string{
		"--backend", c.backend, "--dsn", s.dsn, "--election", name, "--id", id,
		"--lease", c.tm.Lease.String(), "--renew-deadline", c.tm.RenewDeadline.String(),
		"--renew-interval", c.tm.RenewInterval.String(), "--retry-interval", c.tm.RetryInterval.String(),
		"--query-timeout", c.tm.QueryTimeout.String(), "--lock-delay", c.tm.LockDelay.String(),
		"--fenced-every", c.tm.FencedEvery.String(), "--stats-every", "500ms",
	}
	if c.elections > 1 {
		args = append(args, "--elections", fmt.Sprint(c.elections))
	}
	if c.shards > 0 {
		args = append(args, "--shards", fmt.Sprint(c.shards))
	}
	if c.group {
		args = append(args, "--group")
	}
	if c.batch {
		// Renewals that fall within half a renew interval share a batch
		// (one statement only runs for five or more).
		args = append(args, "--batch", "--batch-linger", (c.tm.RenewInterval / 2).String())
	}
	args = append(args, c.extraArgs...)
	bin := s.bin
	if bin == "" {
		bin = candidateBinary(c.t)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(c.outDir, "candidate-"+id+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := &proc{id: id, cmd: cmd, done: make(chan struct{})}
	c.mu.Lock()
	s.proc = p
	c.mu.Unlock()
	go func() {
		defer close(p.done)
		defer logf.Close()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				c.record(Record{Event: "garbage", ID: id, Detail: sc.Text()})
				continue
			}
			c.record(r)
		}
		err := cmd.Wait()
		detail := "exit 0"
		if err != nil {
			detail = err.Error()
		}
		c.record(Record{Event: "exited", ID: id, Detail: detail})
	}()
}

// signal sends sig to the process of slot s; it records a kill.
func (c *cluster) signal(s *slot, sig syscall.Signal) error {
	c.mu.Lock()
	p := s.proc
	c.mu.Unlock()
	if p == nil || !p.running() {
		return fmt.Errorf("slot %d: no running process", s.n)
	}
	switch sig {
	case syscall.SIGKILL:
		// Record the kill before sending it: the reader of the process's
		// output records its exit as soon as it dies, and the checker
		// must see the kill first.
		p.killed = true
		c.record(Record{Event: "killed", ID: p.id})
	case syscall.SIGTERM:
		c.record(Record{Event: "sigterm", ID: p.id})
	}
	err := p.cmd.Process.Signal(sig)
	switch sig {
	case syscall.SIGSTOP:
		c.mu.Lock()
		p.stopped = true
		c.mu.Unlock()
	case syscall.SIGCONT:
		c.mu.Lock()
		p.stopped = false
		c.mu.Unlock()
	}
	return err
}

// waitExit waits for the process of slot s to exit.
func (c *cluster) waitExit(s *slot, within time.Duration) error {
	p := s.proc
	select {
	case <-p.done:
		return nil
	case <-time.After(within):
		return fmt.Errorf("%s did not exit within %v", p.id, within)
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// stopAll ends every candidate cleanly (SIGTERM), killing those that do not
// exit in time.
func (c *cluster) stopAll() {
	for _, s := range c.slots {
		if s.proc != nil && s.proc.running() {
			if s.proc.stopped {
				_ = c.signal(s, syscall.SIGCONT)
			}
			_ = c.signal(s, syscall.SIGTERM)
		}
	}
	for _, s := range c.slots {
		if s.proc == nil {
			continue
		}
		if err := c.waitExit(s, 10*time.Second); err != nil {
			c.t.Errorf("%v after SIGTERM; killing it", err)
			_ = c.signal(s, syscall.SIGKILL)
			<-s.proc.done
		}
	}
}

// killAll kills whatever still runs (t.Cleanup).
func (c *cluster) killAll() {
	for _, s := range c.slots {
		if p := s.proc; p != nil && p.running() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// leader returns the slot whose candidate leads now, judging by the
// records, or nil when none or several do (the checker judges those).
func (c *cluster) leader() *slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found *slot
	for _, s := range c.slots {
		p := s.proc
		if p == nil || p.stopped || !p.running() {
			continue
		}
		if _, ok := c.leading[p.id]; ok {
			if found != nil {
				return nil
			}
			found = s
		}
	}
	return found
}

// waitLeader waits until one candidate leads, and returns its slot, or nil
// after within.
func (c *cluster) waitLeader(within time.Duration) *slot {
	deadline := time.Now().Add(within)
	for {
		if l := c.leader(); l != nil {
			return l
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pause sleeps d unless the test's context ends first.
func (c *cluster) pause(d time.Duration) {
	select {
	case <-time.After(d):
	case <-c.ctx.Done():
	}
}

// jitter returns a random duration in [0, d).
func (c *cluster) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(c.rng.Int64N(int64(d)))
}

// fault is a fault injector: it injects a fault aimed at the leader l and
// returns when the fault has ended (it was healed), with the id it was
// aimed at.
type fault struct {
	kind   string
	inject func(c *cluster, l *slot) (target string, err error)
	// once: one round in the short version (shortMode), for the long
	// faults.
	once bool
}

// campaign runs the faults, each rounds times in a random order, one at a
// time: each waits for a leader, picks a random moment in its renewal
// cycle, injects, and waits for a leader again.
func (c *cluster) campaign(faults []fault, rounds int) {
	c.t.Helper()
	if l := c.waitLeader(c.tm.LockDelay + c.tm.bound() + 5*time.Second); l == nil {
		c.t.Errorf("%s: no first leader elected", c.label)
		return
	}
	var plan []fault
	for _, f := range faults {
		n := rounds
		if f.once && shortMode() {
			n = 1
		}
		for range n {
			plan = append(plan, f)
		}
	}
	c.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	started := time.Now()
	for i, f := range plan {
		if c.ctx.Err() != nil {
			c.t.Errorf("%s: out of time after %d of %d faults", c.label, i, len(plan))
			return
		}
		l := c.waitLeader(c.tm.bound() + 5*time.Second)
		if l == nil {
			c.t.Errorf("%s: no leader before fault %d (%s); going on", c.label, i+1, f.kind)
			continue
		}
		c.pause(c.jitter(2 * c.tm.RenewInterval))
		if l = c.leader(); l == nil {
			continue // it changed hands meanwhile: try again next round
		}
		start := time.Now()
		c.took, c.ended = time.Time{}, time.Time{}
		target, err := f.inject(c, l)
		end := time.Now()
		if !c.took.IsZero() {
			start = c.took // the fault took effect later than it was begun
		}
		if !c.ended.IsZero() {
			end = c.ended
		}
		if err != nil {
			c.t.Errorf("%s: injecting %s: %v", c.label, f.kind, err)
		}
		c.record(Record{Event: "fault", Kind: f.kind, Time: start, End: end, Target: target, Detail: errString(err)})
		c.pause(c.tm.RenewInterval) // let the faulted candidate notice
		if c.waitLeader(c.tm.bound()+5*time.Second) == nil {
			c.t.Logf("%s: no leader %v after %s", c.label, c.tm.bound()+5*time.Second, f.kind)
		}
		c.pause(300 * time.Millisecond)
		if testing.Verbose() && (i+1)%10 == 0 {
			c.t.Logf("%s: %d of %d faults injected in %v", c.label, i+1, len(plan), time.Since(started).Round(time.Second))
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// finish stops the candidates, reads the fenced writes through admin, runs
// the checker, reports, and adds the run to the summary.
func (c *cluster) finish(admin *sql.DB) Result {
	c.t.Helper()
	// The checker gives every fault its bound to be followed by a leader,
	// up to run_end: let the last fault have all of it. (The wait after
	// each fault can return on a leader that is just being deposed: a CI
	// run ended 0.5 s after a last kill_conn and counted it "late".)
	c.pause(c.tm.bound())
	c.record(Record{Event: "run_end"})
	c.stopAll()
	writes, err := readWrites(c.ctx, admin)
	if err != nil {
		c.t.Errorf("%s: reading chaos_writes: %v", c.label, err)
	}
	var hists map[string]*History
	if c.noHistory == "" {
		hists = map[string]*History{}
		for _, name := range c.electionNames() {
			if err := c.readHistory(admin, name); err != nil {
				c.t.Errorf("%s: reading the history of %s: %v", c.label, name, err)
				continue
			}
			h := mergeHistory(c.readings[name])
			hists[name] = &h
		}
	} else {
		c.t.Logf("%s: the history is not checked: %s", c.label, c.noHistory)
	}
	res := CheckElections(c.tm.checkerConfig(), c.records(), writes, c.electionNames(), hists)
	for _, v := range res.Violations {
		c.t.Errorf("%s: %s", c.label, v)
	}
	if res.Failed() {
		c.t.Logf("%s: leaderships:\n\t%s", c.label, joinIntervals(res.Intervals))
	}
	for _, r := range c.records() {
		if r.Event == "error" || r.Event == "garbage" {
			c.t.Errorf("%s: candidate %s: %s", c.label, r.Event, r)
		}
	}
	summary.add(c.label, res, c.tm.checkerConfig())
	one := &summaryTable{runs: []summaryRun{{backend: c.label, res: res, cfg: c.tm.checkerConfig()}}}
	c.t.Logf("%s: summary\n%s\n%s", c.label, one, one.margins())
	stalls := harnessStalls(c.records())
	c.t.Logf("%s: %d leaderships, %d terms checked, %d in the history, %d faults, %d fenced writes (%d rejected), heartbeat errors %v, the suite's own stalls %d (%v)",
		c.label, len(res.Intervals), res.TermsChecked, res.HistoryChecked, len(res.Faults), res.Writes, res.FencedRejected, res.Errors,
		len(stalls), spans.Within(stalls, time.Time{}, time.Now()))
	return res
}

// readHistory reads the history of election name (in the default table)
// through admin and keeps it in c.readings. finish reads it after the run;
// a fault reads it too before the candidates may write over its rows
// without its terms being old: a floor row deleted (TRUNCATE, DELETE)
// counts the election's terms from 0 again, and its next terms go into
// the history's first slots (floor.Stmts.Append).
func (c *cluster) readHistory(admin *sql.DB, name string) error {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	ts, err := history.List(ctx, admin, "", name, time.Time{})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readings == nil {
		c.readings = map[string][][]history.Term{}
	}
	c.readings[name] = append(c.readings[name], ts)
	return nil
}

// electionNames returns the names of the cluster's elections.
func (c *cluster) electionNames() []string {
	if c.shards > 0 {
		var names []string
		for i := range c.shards {
			names = append(names, fmt.Sprintf("%s/%d", c.shardGroup, i))
		}
		return names
	}
	if c.elections <= 1 {
		return []string{c.name}
	}
	names := []string{c.name}
	for i := 2; i <= c.elections; i++ {
		names = append(names, fmt.Sprintf("%s-%d", c.name, i))
	}
	return names
}

func joinIntervals(ivs []Interval) string {
	var s []string
	for _, iv := range ivs {
		s = append(s, iv.String())
	}
	return strings.Join(s, "\n\t")
}

// readWrites reads chaos_writes.
func readWrites(ctx context.Context, db *sql.DB) ([]Write, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT id, term, who, election, at FROM chaos_writes ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Write
	for rows.Next() {
		var w Write
		if err := rows.Scan(&w.Seq, &w.Term, &w.Who, &w.Election, &w.At); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// setupDatabase creates the database chaos with the election table and
// chaos_writes through the root DSN rootDSN (on no database), and returns
// an admin pool on it.
func setupDatabase(t *testing.T, ctx context.Context, rootDSN string) (*sql.DB, string) {
	return setupDatabaseNamed(t, ctx, rootDSN, "chaos")
}

// setupDatabaseNamed is setupDatabase for database db.
func setupDatabaseNamed(t *testing.T, ctx context.Context, rootDSN, db string) (*sql.DB, string) {
	t.Helper()
	return setupDatabaseWith(t, ctx, rootDSN, db, false)
}

// serverStarts lets the tests that run side by side (the short ones and
// TestChaosGroupReplication) start their servers one at a time: a MySQL
// 9.7 start (initialize, then start) is mostly CPU, and four at once on a
// busy 2-core machine outlasted the start timeout. What follows the start,
// which waits on leases, still runs side by side.
var serverStarts sync.Mutex

// startServer starts a dedicated throwaway server with a small buffer
// pool, stopped in t.Cleanup.
func startServer(t *testing.T, ctx context.Context) *mysqld.Server {
	t.Helper()
	serverStarts.Lock()
	srv, err := mysqld.Start(ctx, mysqld.Options{ExtraArgs: []string{"--innodb-buffer-pool-size=64M"}})
	serverStarts.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	t.Logf("server: %s", srv.Version())
	return srv
}

// createDatabase creates database db through rootDSN (on no database), and
// returns rootDSN's configuration on db (parseTime, UTC).
func createDatabase(t *testing.T, ctx context.Context, rootDSN, db string) *mysql.Config {
	t.Helper()
	root, err := sql.Open("mysql", rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+db); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(rootDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName, cfg.ParseTime, cfg.Loc = db, true, time.UTC
	return cfg
}

// setupDatabaseWith is setupDatabaseNamed; with ddl it creates the
// election table with schema.DDL instead of the migrations (golang-migrate
// records the version in a SERIALIZABLE transaction, which a Group
// Replication group with update-everywhere checks refuses).
func setupDatabaseWith(t *testing.T, ctx context.Context, rootDSN, db string, ddl bool) (*sql.DB, string) {
	t.Helper()
	cfg := createDatabase(t, ctx, rootDSN, db)
	dsn := cfg.FormatDSN()
	if !ddl {
		testdb.Migrate(t, dsn)
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if ddl {
		multi := *cfg
		multi.MultiStatements = true
		db, err := sql.Open("mysql", multi.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.ExecContext(ctx, schema.DDL(""))
		db.Close()
		if err != nil {
			t.Fatalf("schema.DDL: %v", err)
		}
	}
	createWrites(t, ctx, admin)
	return admin, dsn
}

// createWrites creates the table chaos_writes, where the candidates' fenced
// writes go.
func createWrites(t *testing.T, ctx context.Context, admin *sql.DB) {
	t.Helper()
	if _, err := admin.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS chaos_writes (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  term BIGINT UNSIGNED NOT NULL,
  who VARCHAR(64) NOT NULL,
  election VARCHAR(64) NOT NULL DEFAULT '',
  at DATETIME(6) NOT NULL
) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
}

// createUser creates a database user for one candidate slot, so that its
// connections can be found in the processlist, and returns its DSN to addr.
func createUser(t *testing.T, ctx context.Context, admin *sql.DB, user, addr string) string {
	return createUserOn(t, ctx, admin, "chaos", user, addr)
}

// createUserOn is createUser on database db.
func createUserOn(t *testing.T, ctx context.Context, admin *sql.DB, db, user, addr string) string {
	t.Helper()
	for _, host := range []string{"%", "localhost"} {
		for _, q := range []string{
			fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY 'pw'", user, host),
			fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%s'", db, user, host),
		} {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	var version string
	if err := admin.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	return candidateDSN(user, addr, db, !strings.Contains(strings.ToLower(version), "mariadb"))
}

// candidateDSN is the DSN of user to addr, database db. On Oracle MySQL
// (oracle) it sets innodb_lock_wait_timeout to 1 s, docs/servers.md's remedy
// there: MySQL cannot bound a write's row-lock wait per statement, so a
// statement its client gave up on would otherwise wait on the server for
// 50 s (MariaDB: SET STATEMENT … FOR, done by the library).
func candidateDSN(user, addr, db string, oracle bool) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, "pw", "tcp", addr, db
	cfg.Timeout = time.Second
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	if oracle {
		cfg.Params["innodb_lock_wait_timeout"] = "1"
	}
	return cfg.FormatDSN()
}

// killConnections kills every connection of user, as an operator (or the
// server's own limits) would.
func killConnections(ctx context.Context, admin *sql.DB, user string) (int, error) {
	rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", user)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	n := 0
	for _, id := range ids {
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
			n++
		}
	}
	return n, nil
}
