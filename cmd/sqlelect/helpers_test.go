package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/testdb"
)

// bin is the sqlelect binary built by TestMain.
var bin string

// binDirPrefix names the directories TestMain builds the binary in; the
// directory of a test process that is gone is removed by the next run
// (testdb.Main exits without giving a chance to clean up).
const binDirPrefix = "sqlelect-clitest-"

func TestMain(m *testing.M) {
	removeStaleBinDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", binDirPrefix, os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "sqlelect")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command(goTool(), append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "TestMain: go build:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	testdb.Main(m)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go" // where the Makefile looks too
}

func removeStaleBinDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), binDirPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// Short timings for candidates in tests: lease 2s, renew deadline 1.2s (the
// default grace of run is then 400ms), renew and retry 200ms.
var fastFlags = []string{"--lease", "2s", "--renew-deadline", "1.2s", "--renew", "200ms", "--retry", "200ms"}

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// testCtx is the deadline of a test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// result is the outcome of a one-shot command.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// sqlelect runs the binary to completion with SQLELECT_DSN=dsn (unless
// empty) and stdin /dev/null.
func sqlelect(t *testing.T, ctx context.Context, dsn string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env(dsn)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		r.code = ee.ExitCode()
	default:
		t.Fatalf("sqlelect %q: %v (ctx: %v)\n%s", args, err, ctx.Err(), r)
	}
	return r
}

// mustRun runs the binary and fails unless it exits with code want.
func mustRun(t *testing.T, ctx context.Context, dsn string, want int, args ...string) result {
	t.Helper()
	r := sqlelect(t, ctx, dsn, args...)
	if r.code != want {
		t.Fatalf("sqlelect %q: want exit %d, got %s", args, want, r)
	}
	return r
}

func env(dsn string) []string {
	// A -race binary sleeps 1 s when it exits 0, unless told not to.
	out := []string{"GORACE=atexit_sleep_ms=0 " + os.Getenv("GORACE")}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, envDSN+"=") && !strings.HasPrefix(e, "GORACE=") {
			out = append(out, e)
		}
	}
	if dsn != "" {
		out = append(out, envDSN+"="+dsn)
	}
	return out
}

// proc is a long-running sqlelect (campaign, run, watch).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu     sync.Mutex
	stdout []string
	stderr []string
	code   int
	err    error
}

// start starts the binary; t.Cleanup stops it (SIGTERM, then SIGKILL).
func start(t *testing.T, name, dsn string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = env(dsn)
	outR, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go p.collect(&wg, outR, &p.stdout)
	go p.collect(&wg, errR, &p.stderr)
	go func() {
		wg.Wait() // all output read before Wait closes the pipes
		err := p.cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.code = p.cmd.ProcessState.ExitCode()
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, strings.Join(p.lines(false), "\n"), name, strings.Join(p.lines(true), "\n"))
		}
	})
	return p
}

func (p *proc) collect(wg *sync.WaitGroup, r io.Reader, dst *[]string) {
	defer wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		p.mu.Lock()
		*dst = append(*dst, sc.Text())
		p.mu.Unlock()
	}
}

// lines returns the lines read so far from stdout, or stderr.
func (p *proc) lines(stderr bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stderr {
		return append([]string(nil), p.stderr...)
	}
	return append([]string(nil), p.stdout...)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

// stop sends SIGTERM, waits up to d, then SIGKILL.
func (p *proc) stop(d time.Duration) {
	if p.exited() {
		return
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, ctx context.Context) int {
	t.Helper()
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatalf("%s did not exit: %v", p.name, ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

// jsonEvent is a line printed by campaign and run.
type jsonEvent struct {
	Event    string    `json:"event"`
	Election string    `json:"election"`
	ID       string    `json:"id"`
	Term     uint64    `json:"term"`
	Time     time.Time `json:"time"`
	Until    time.Time `json:"until"`
	Reason   string    `json:"reason"`
	Leader   *string   `json:"leader"`
	Value    string    `json:"value"`
	State    string    `json:"state"`
	Priority *int      `json:"priority"`
	Err      string    `json:"err"`
}

// events parses the JSON lines of p (from stderr for run); other lines are
// skipped.
func (p *proc) events(stderr bool) []jsonEvent {
	var out []jsonEvent
	for _, l := range p.lines(stderr) {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var e jsonEvent
		if err := json.Unmarshal([]byte(l), &e); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// waitFor polls cond until it holds or ctx ends, which fails t.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// interval is one leadership (or one child process) from start to end.
type interval struct {
	who      string
	term     uint64
	from, to time.Time
}

func (iv interval) String() string {
	return fmt.Sprintf("%s term %d [%s, %s]", iv.who, iv.term,
		iv.from.Format("15:04:05.000000"), iv.to.Format("15:04:05.000000"))
}

// leaderships turns each candidate's events into intervals from the
// elected line's time to the demoted line's until; a leadership still open
// runs until end. It reports malformed sequences.
func leaderships(t *testing.T, byID map[string][]jsonEvent, end time.Time) []interval {
	t.Helper()
	var out []interval
	for id, evs := range byID {
		var open *interval
		for _, e := range evs {
			switch e.Event {
			case "elected":
				if open != nil {
					t.Errorf("%s: elected (term %d) while leading term %d", id, e.Term, open.term)
				}
				open = &interval{who: id, term: e.Term, from: e.Time}
			case "demoted":
				if open == nil || open.term != e.Term {
					t.Errorf("%s: demoted (term %d) without a matching elected", id, e.Term)
					continue
				}
				if e.Until.After(e.Time) {
					t.Errorf("%s: demoted until %v is after the line's time %v", id, e.Until, e.Time)
				}
				open.to = e.Until
				out = append(out, *open)
				open = nil
			}
		}
		if open != nil {
			open.to = end
			out = append(out, *open)
		}
	}
	return out
}

// checkNoOverlap checks that the intervals, sorted by start, do not
// overlap and that their terms strictly increase.
func checkNoOverlap(t *testing.T, ivs []interval) {
	t.Helper()
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].from.Before(ivs[j].from) })
	for i := 1; i < len(ivs); i++ {
		prev, cur := ivs[i-1], ivs[i]
		if !prev.to.Before(cur.from) {
			t.Errorf("overlap: %v and %v", prev, cur)
		}
		if cur.term <= prev.term {
			t.Errorf("terms do not increase: %v then %v", prev, cur)
		}
	}
	if t.Failed() || testing.Verbose() {
		for _, iv := range ivs {
			t.Logf("interval %v", iv)
		}
	}
}
