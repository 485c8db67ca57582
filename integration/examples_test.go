package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election/electionhttp"
	"github.com/sqlelect/sqlelect/integration/testdb"
)

// The examples (examples/), built and run as their README says, several
// replicas against one database each: the tests check what a user would.

const modulePath = "github.com/sqlelect/sqlelect"

// goBinary finds the go command for building the examples.
func goBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := "/usr/local/go/bin/go" // where the Makefile looks too
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no go command to build the examples: %v", err)
	}
	return p
}

// buildExample compiles pkg (a path below the library module) into a
// temporary directory and returns the binary, or the build's error and
// output. It builds in the library module's directory, with that module's
// go.mod and go.sum: this module's go.sum lists only what its own imports
// need (the CLI's pflag and x/term are not among them). Its only deadline
// is go test's -timeout: on a fresh machine's empty build cache a build
// takes minutes under CI's load, and its time is not under test.
func buildExample(t *testing.T, pkg string) (string, error) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command(goBinary(t), "build", "-o", bin, modulePath+"/"+pkg)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

func mustBuildExample(t *testing.T, pkg string) string {
	t.Helper()
	bin, err := buildExample(t, pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// outputLine is one line a process printed, with when the test read it.
type outputLine struct {
	at   time.Time
	text string
}

// exampleProc is a running example process whose output the test collects.
type exampleProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process was waited for
	err  error         // cmd.Wait's result, read after done

	mu             sync.Mutex
	stdout, stderr []outputLine
}

// startExample runs bin with args and SQLELECT_DSN=dsn. The process is killed when
// ctx ends, and in t.Cleanup: SIGTERM, then SIGKILL after 5 s. A failed
// test logs what the process printed.
func startExample(ctx context.Context, t *testing.T, name, dsn, bin string, args ...string) *exampleProc {
	t.Helper()
	p := &exampleProc{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Env = append(os.Environ(), "SQLELECT_DSN="+dsn)
	p.cmd.WaitDelay = 5 * time.Second
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	collect := func(r io.Reader, to *[]outputLine) {
		defer readers.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			*to = append(*to, outputLine{time.Now(), sc.Text()})
			p.mu.Unlock()
		}
	}
	go collect(stdout, &p.stdout)
	go collect(stderr, &p.stderr)
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			t.Logf("%s (pid %d, exit %v) printed:\n%s", name, p.cmd.Process.Pid, p.err, p.output())
		}
	})
	return p
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and waits.
func (p *exampleProc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *exampleProc) signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *exampleProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its Wait error.
func (p *exampleProc) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("%s did not exit: %w", p.name, ctx.Err())
	}
}

func (p *exampleProc) lines(stderr bool) []outputLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stderr {
		return append([]outputLine(nil), p.stderr...)
	}
	return append([]outputLine(nil), p.stdout...)
}

func (p *exampleProc) output() string {
	var b strings.Builder
	for _, l := range p.lines(false) {
		fmt.Fprintf(&b, "  out %s %s\n", l.at.Format("15:04:05.000"), l.text)
	}
	for _, l := range p.lines(true) {
		fmt.Fprintf(&b, "  err %s %s\n", l.at.Format("15:04:05.000"), l.text)
	}
	return b.String()
}

// matches returns the submatches of re in the process's lines, in order.
func (p *exampleProc) matches(re *regexp.Regexp, stderr bool) [][]string {
	var ms [][]string
	for _, l := range p.lines(stderr) {
		if m := re.FindStringSubmatch(l.text); m != nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// pollUntil calls cond every 20 ms until it returns true, within d and ctx.
func pollUntil(ctx context.Context, d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ---- examples/httpservice -------------------------------------------------

// httpReplica is one httpservice process and the address it listens on.
type httpReplica struct {
	*exampleProc
	id, addr string
}

var exampleHTTPClient = &http.Client{Timeout: 2 * time.Second}

// get returns the status and body of http://addr/path; status 0 when the
// replica does not answer.
func (r httpReplica) get(ctx context.Context, path string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := exampleHTTPClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// leaderReplicas returns the replicas answering 200 on /api/leader-check, and
// whether every other one answered 404.
func leaderReplicas(ctx context.Context, rs []httpReplica) ([]httpReplica, bool) {
	var ls []httpReplica
	others404 := true
	for _, r := range rs {
		switch code, _ := r.get(ctx, "/api/leader-check"); code {
		case http.StatusOK:
			ls = append(ls, r)
		case http.StatusNotFound:
		default:
			others404 = false
		}
	}
	return ls, others404
}

func TestExamplesHTTPService(t *testing.T) {
	t.Parallel()
	bin := mustBuildExample(t, "examples/httpservice") // before the deadline: a build on a cold cache is slow
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)

	var rs []httpReplica
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("hs-%d", i)
		p := startExample(ctx, t, id, dsn, bin, "--id", id, "--listen", "127.0.0.1:0")
		rs = append(rs, httpReplica{exampleProc: p, id: id})
	}
	// Each logs the address it bound (port 0 picks a free one).
	for i := range rs {
		r := &rs[i]
		if !pollUntil(ctx, 20*time.Second, func() bool {
			for _, l := range r.lines(true) {
				var rec struct{ Msg, Addr string }
				if json.Unmarshal([]byte(l.text), &rec) == nil && rec.Msg == "listening" {
					r.addr = rec.Addr
					return true
				}
			}
			return r.exited()
		}) || r.addr == "" {
			t.Fatalf("%s did not log its listening address", r.id)
		}
	}

	// Exactly one replica answers 200 on /api/leader-check, the others 404
	// (the first election waits out the lock delay: one 3 s lease).
	var leader httpReplica
	if !pollUntil(ctx, 15*time.Second, func() bool {
		ls, ok := leaderReplicas(ctx, rs)
		if len(ls) == 1 && ok {
			leader = ls[0]
			return true
		}
		return false
	}) {
		ls, _ := leaderReplicas(ctx, rs)
		t.Fatalf("want exactly one replica answering 200 on /api/leader-check, got %d", len(ls))
	}
	// And it stays that way.
	for range 5 {
		if ls, ok := leaderReplicas(ctx, rs); len(ls) != 1 || ls[0].id != leader.id || !ok {
			t.Fatalf("leader check changed: %d replicas answer 200", len(ls))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// /api/status names it on every replica.
	var term uint64
	for _, r := range rs {
		code, body := r.get(ctx, "/api/status")
		var st electionhttp.StatusJSON
		if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
			t.Fatalf("%s /api/status: %d %s (%v)", r.id, code, body, err)
		}
		if st.Election != "httpservice" || st.ID != r.id || st.IsLeader != (r.id == leader.id) || st.Leader == nil ||
			st.Leader.ID != leader.id || st.Leader.Value != leader.addr || !st.Leader.Live() {
			t.Errorf("%s /api/status: %s; want leader %s at %s", r.id, body, leader.id, leader.addr)
			continue
		}
		if r.id == leader.id {
			term = st.Term
			if st.Term != st.Leader.Term || st.Term == 0 {
				t.Errorf("leader's /api/status: term %d, record's %d", st.Term, st.Leader.Term)
			}
		}
	}

	// /metrics: sqlelect_leader 1 with the term on the leader, 0 elsewhere.
	for _, r := range rs {
		code, body := r.get(ctx, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("%s /metrics: %d", r.id, code)
		}
		want := `sqlelect_leader{election="httpservice"} 0`
		if r.id == leader.id {
			want = `sqlelect_leader{election="httpservice"} 1`
			m := regexp.MustCompile(`(?m)^sqlelect_term\{election="httpservice"\} (\S+)$`).FindStringSubmatch(body)
			if m == nil {
				t.Errorf("leader's /metrics lacks sqlelect_term")
			} else if v, err := strconv.ParseFloat(m[1], 64); err != nil || uint64(v) != term {
				t.Errorf("leader's sqlelect_term %s, want %d", m[1], term)
			}
		}
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(body) {
			t.Errorf("%s /metrics lacks %q:\n%s", r.id, want, grepLines(body, "sqlelect_"))
		}
	}

	// The leader writes once every --work-every (500 ms) from its
	// OnElected, which starts after /api/leader-check turned 200: wait for
	// its first fenced write, so that the handover below has writes of two
	// terms to show whatever the scheduling.
	db := testdb.Open(t, dsn)
	jobsBy := func(who string) int {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM app_jobs WHERE who = ?", who).Scan(&n); err != nil {
			t.Logf("counting app_jobs: %v", err)
		}
		return n
	}
	if !pollUntil(ctx, 5*time.Second, func() bool { return jobsBy(leader.id) > 0 }) {
		t.Fatalf("%s wrote no row into app_jobs within 5 s of leading", leader.id)
	}

	// SIGTERM the leader: it stops serving, resigns, and another httpReplica
	// answers 200 within 1 s.
	var rest []httpReplica
	for _, r := range rs {
		if r.id != leader.id {
			rest = append(rest, r)
		}
	}
	sent := time.Now()
	leader.signal(syscall.SIGTERM)
	var next httpReplica
	if !pollUntil(ctx, 3*time.Second, func() bool {
		ls, _ := leaderReplicas(ctx, rest)
		if len(ls) > 0 {
			next = ls[0]
			return true
		}
		return false
	}) {
		t.Fatalf("no replica took over within 3 s of the leader's SIGTERM")
	}
	handover := time.Since(sent)
	t.Logf("handover from %s to %s: %v after SIGTERM", leader.id, next.id, handover.Round(time.Millisecond))
	if handover > time.Second {
		t.Errorf("handover took %v, want at most 1 s (the old leader resigns)", handover)
	}
	if err := leader.wait(ctx); err != nil {
		t.Errorf("%s exit after SIGTERM: %v, want 0", leader.id, err)
	}
	if ls, ok := leaderReplicas(ctx, rest); len(ls) != 1 || !ok {
		t.Errorf("after the handover %d replicas answer 200", len(ls))
	}
	if _, body := next.get(ctx, "/api/status"); !strings.Contains(body, `"is_leader":true`) {
		t.Errorf("new leader's /api/status: %s", body)
	}

	// Let the new leader write (at least twice), then check the fenced
	// writes: every term is one replica's, and the terms never interleave.
	if !pollUntil(ctx, 5*time.Second, func() bool { return jobsBy(next.id) >= 2 }) {
		t.Errorf("%s wrote fewer than 2 rows into app_jobs within 5 s of leading", next.id)
	}
	rows, err := db.QueryContext(ctx, "SELECT term, who FROM app_jobs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	whoOf := map[uint64]string{}
	var terms []uint64
	for rows.Next() {
		var term uint64
		var who string
		if err := rows.Scan(&term, &who); err != nil {
			t.Fatal(err)
		}
		if w, ok := whoOf[term]; ok && w != who {
			t.Errorf("term %d written by %s and %s", term, w, who)
		}
		whoOf[term] = who
		if n := len(terms); n > 0 && term < terms[n-1] {
			t.Errorf("fenced writes interleave: term %d after %d", term, terms[n-1])
		}
		if n := len(terms); n == 0 || terms[n-1] != term {
			terms = append(terms, term)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(terms) != 2 || whoOf[terms[0]] != leader.id || whoOf[terms[1]] != next.id {
		t.Errorf("app_jobs terms %v by %v; want writes by %s then %s", terms, whoOf, leader.id, next.id)
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// ---- examples/periodic ----------------------------------------------------

var periodicRunLine = regexp.MustCompile(`^run slot=(\S+) id=(\S+) term=(\d+) took=\S+$`)

func TestExamplesPeriodic(t *testing.T) {
	t.Parallel()
	bin := mustBuildExample(t, "examples/periodic") // before the deadline: a build on a cold cache is slow
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)

	ps := map[string]*exampleProc{}
	var ids []string
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("cron-%d", i)
		ps[id] = startExample(ctx, t, id, dsn, bin, "--id", id, "--every", "250ms", "--work", "20ms")
		ids = append(ids, id)
	}
	runs := func(id string) int { return len(ps[id].matches(periodicRunLine, false)) }
	// runner returns the one replica that ran slots, among those not in skip.
	runner := func(skip ...string) string {
		for _, id := range ids {
			if !slices.Contains(skip, id) && runs(id) > 0 {
				return id
			}
		}
		return ""
	}

	// The first leader runs the schedule (after the 3 s lock delay).
	var first string
	if !pollUntil(ctx, 15*time.Second, func() bool { first = runner(); return first != "" && runs(first) >= 4 }) {
		t.Fatal("no replica ran 4 slots")
	}
	// A clean handover: SIGTERM.
	ps[first].signal(syscall.SIGTERM)
	if err := ps[first].wait(ctx); err != nil {
		t.Errorf("%s exit after SIGTERM: %v", first, err)
	}
	var second string
	if !pollUntil(ctx, 5*time.Second, func() bool { second = runner(first); return second != "" && runs(second) >= 4 }) {
		t.Fatal("no replica took over the schedule after the SIGTERM")
	}
	// A crash: SIGKILL; the third replica takes over after the lease.
	ps[second].signal(syscall.SIGKILL)
	_ = ps[second].wait(ctx)
	var third string
	if !pollUntil(ctx, 10*time.Second, func() bool { third = runner(first, second); return third != "" && runs(third) >= 4 }) {
		t.Fatal("no replica took over the schedule after the SIGKILL")
	}

	// No slot ran twice, by the replicas' own account.
	type run struct {
		slot, id string
		term     uint64
	}
	printed := map[string]run{}
	for _, id := range ids {
		for _, m := range ps[id].matches(periodicRunLine, false) {
			term, _ := strconv.ParseUint(m[3], 10, 64)
			r := run{m[1], m[2], term}
			if r.id != id {
				t.Errorf("%s printed a run of %s", id, r.id)
			}
			if prev, dup := printed[r.slot]; dup {
				t.Errorf("slot %s ran twice: by %s (term %d) and %s (term %d)", r.slot, prev.id, prev.term, r.id, r.term)
			}
			printed[r.slot] = r
		}
	}

	// And by the table: in slot order the terms never go back, each term
	// belongs to one replica, and every printed run is there.
	db := testdb.Open(t, dsn)
	rows, err := db.QueryContext(ctx, "SELECT slot, term, who FROM job_runs WHERE job = 'periodic' ORDER BY slot")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := map[string]run{}
	whoOf := map[uint64]string{}
	var order []string
	var last uint64
	for rows.Next() {
		var slotMS int64
		var r run
		if err := rows.Scan(&slotMS, &r.term, &r.id); err != nil {
			t.Fatal(err)
		}
		r.slot = time.UnixMilli(slotMS).UTC().Format("2006-01-02T15:04:05.000Z")
		stored[r.slot] = r
		if r.term < last {
			t.Errorf("slot %s ran by term %d after term %d: two replicas ran the schedule at once", r.slot, r.term, last)
		}
		last = r.term
		if w, ok := whoOf[r.term]; ok && w != r.id {
			t.Errorf("term %d ran by %s and %s", r.term, w, r.id)
		}
		if _, ok := whoOf[r.term]; !ok {
			order = append(order, r.id)
		}
		whoOf[r.term] = r.id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for slot, p := range printed {
		if s, ok := stored[slot]; !ok || s != p {
			t.Errorf("printed run %+v, stored %+v", p, s)
		}
	}
	if want := []string{first, second, third}; !slices.Equal(order, want) {
		t.Errorf("the schedule ran on %v, want %v", order, want)
	}
	t.Logf("%d slots: %d by %s, %d by %s, %d by %s", len(stored), runs(first), first, runs(second), second, runs(third), third)
}

// ---- examples/shell -------------------------------------------------------

var (
	scriptStarted = regexp.MustCompile(`^(\d+)\.(\d+) leader-only\.sh\[(\d+)\] started: leading (\S+) as (\S+) with term (\d+)$`)
	scriptStopped = regexp.MustCompile(`^(\d+)\.(\d+) leader-only\.sh\[(\d+)\] stopped: `)
)

// scriptStamp parses the script's "seconds.nanoseconds" time.
func scriptStamp(sec, nsec string) time.Time {
	s, _ := strconv.ParseInt(sec, 10, 64)
	n, _ := strconv.ParseInt((nsec + "000000000")[:9], 10, 64)
	return time.Unix(s, n)
}

func TestExamplesShell(t *testing.T) {
	t.Parallel()
	cli := mustBuildExample(t, "cmd/sqlelect") // before the deadline: a build on a cold cache is slow
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	script, err := filepath.Abs(filepath.Join("..", "examples", "shell", "leader-only.sh"))
	if err != nil {
		t.Fatal(err)
	}
	testdb.Migrate(t, dsn)

	ps := map[string]*exampleProc{}
	// A 3 s lease (renew deadline 2 s): a loaded CI machine that stalls a
	// leader past a shorter deadline would restart a script, and the test
	// counts runs. Handovers here are clean, so the lease costs no time.
	run := func(id string) {
		ps[id] = startExample(ctx, t, id, dsn, cli, "run", "shell-example", "--id", id, "--lease", "3s", "--", script)
	}
	startedBy := func(id string) int { return len(ps[id].matches(scriptStarted, false)) }
	// leading returns the candidate whose script started, among those
	// still running.
	leading := func() string {
		for id, p := range ps {
			if !p.exited() && startedBy(id) > 0 {
				return id
			}
		}
		return ""
	}
	run("node-1")
	run("node-2")

	var first string
	if !pollUntil(ctx, 10*time.Second, func() bool { first = leading(); return first != "" }) {
		t.Fatal("the script never started")
	}
	// SIGTERM the leader's sqlelect: it stops the script, resigns, exits 0;
	// the other starts its script.
	ps[first].signal(syscall.SIGTERM)
	if err := ps[first].wait(ctx); err != nil {
		t.Errorf("%s: sqlelect run exit after SIGTERM: %v", first, err)
	}
	var second string
	if !pollUntil(ctx, 5*time.Second, func() bool { second = leading(); return second != "" }) {
		t.Fatal("the script did not start on the other candidate")
	}
	// Once more, with a fresh candidate waiting.
	run("node-3")
	time.Sleep(500 * time.Millisecond)
	ps[second].signal(syscall.SIGTERM)
	if err := ps[second].wait(ctx); err != nil {
		t.Errorf("%s: sqlelect run exit after SIGTERM: %v", second, err)
	}
	if !pollUntil(ctx, 5*time.Second, func() bool { return startedBy("node-3") > 0 }) {
		t.Fatal("the script did not start on node-3")
	}
	time.Sleep(300 * time.Millisecond)

	// Each script run, from its own timestamps: [started, stopped].
	type span struct {
		id, pid    string
		term       uint64
		start, end time.Time // end zero: still running
	}
	var spans []span
	for id, p := range ps {
		byPid := map[string]*span{}
		for _, l := range p.lines(false) {
			if m := scriptStarted.FindStringSubmatch(l.text); m != nil {
				term, _ := strconv.ParseUint(m[6], 10, 64)
				if m[4] != "shell-example" || m[5] != id || term == 0 {
					t.Errorf("%s: the script got SQLELECT_ELECTION %q, SQLELECT_ID %q, SQLELECT_TERM %q", id, m[4], m[5], m[6])
				}
				byPid[m[3]] = &span{id: id, pid: m[3], term: term, start: scriptStamp(m[1], m[2])}
			}
			if m := scriptStopped.FindStringSubmatch(l.text); m != nil {
				if s := byPid[m[3]]; s != nil && s.end.IsZero() {
					s.end = scriptStamp(m[1], m[2])
				}
			}
		}
		for _, s := range byPid {
			spans = append(spans, *s)
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	if len(spans) != 3 {
		t.Fatalf("the script ran %d times, want 3: %+v", len(spans), spans)
	}
	for i, s := range spans {
		if i == len(spans)-1 {
			if !s.end.IsZero() {
				t.Errorf("the last run (%s) stopped: %+v", s.id, s)
			}
			break
		}
		next := spans[i+1]
		switch {
		case s.end.IsZero():
			t.Errorf("%s's script never printed that it stopped, yet %s's started", s.id, next.id)
		case !s.end.Before(next.start):
			t.Errorf("the script ran on two candidates at once: %s's until %s, %s's from %s",
				s.id, s.end.Format("15:04:05.000000"), next.id, next.start.Format("15:04:05.000000"))
		case next.term <= s.term:
			t.Errorf("terms did not increase: %d then %d", s.term, next.term)
		default:
			t.Logf("%s's script stopped %v before %s's started", s.id, next.start.Sub(s.end).Round(time.Microsecond), next.id)
		}
	}
}

// ---- examples/shards ------------------------------------------------------

var shardsLine = regexp.MustCompile(`^(lead|drop) shard=(\S+) id=(\S+) term=(\d+)$`)

// TestExamplesShards: three replicas share 6 shards, 2 each; one stops
// (SIGTERM) and the other two take its shards, 3 each; no replica ever
// leads a shard another leads, by their own lines, and every row of
// shard_work is by the shard's leader of its term.
func TestExamplesShards(t *testing.T) {
	t.Parallel()
	bin := mustBuildExample(t, "examples/shards") // before the deadline: a build on a cold cache is slow
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	ps := map[string]*exampleProc{}
	for _, id := range []string{"a", "b", "c"} {
		ps[id] = startExample(ctx, t, id, dsn, bin, "--id", id, "--lease", "2s")
	}
	// leads returns the shards each replica leads, by its lines.
	leads := func() map[string]int {
		n := map[string]int{}
		for id, p := range ps {
			led := map[string]bool{}
			for _, m := range p.matches(shardsLine, false) {
				led[m[2]] = m[1] == "lead"
			}
			for _, on := range led {
				if on {
					n[id]++
				}
			}
		}
		return n
	}
	balanced := func(want map[string]int) bool { return maps.Equal(leads(), want) }
	if !pollUntil(ctx, 30*time.Second, func() bool { return balanced(map[string]int{"a": 2, "b": 2, "c": 2}) }) {
		t.Fatalf("not 2 shards each: %v", leads())
	}
	ps["a"].signal(syscall.SIGTERM)
	if err := ps["a"].wait(ctx); err != nil {
		t.Errorf("a's exit after SIGTERM: %v", err)
	}
	delete(ps, "a")
	if !pollUntil(ctx, 20*time.Second, func() bool { return balanced(map[string]int{"b": 2 + 1, "c": 2 + 1}) }) {
		t.Fatalf("a's shards not taken, 3 each: %v", leads())
	}

	// Each (shard, term) is one replica's, and a shard's terms only grow
	// in the order its rows were written.
	db := testdb.Open(t, dsn)
	rows, err := db.QueryContext(ctx, "SELECT shard, term, who FROM shard_work ORDER BY at")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	whoOf, last := map[string]string{}, map[string]uint64{}
	for rows.Next() {
		var shard, who string
		var term uint64
		if err := rows.Scan(&shard, &term, &who); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprint(shard, "/", term)
		if w, ok := whoOf[key]; ok && w != who {
			t.Errorf("shard %s term %d written by %s and %s", shard, term, w, who)
		}
		if term < last[shard] {
			t.Errorf("shard %s: a row of term %d after one of term %d", shard, term, last[shard])
		}
		whoOf[key], last[shard] = who, max(last[shard], term)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(last) != 6 {
		t.Errorf("work on %d shards, want 6", len(last))
	}
}
