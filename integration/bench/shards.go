package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/integration/bench/scaleload"
)

// shardsRun is one entry of the -shards flag: a group of shards over procs
// processes, watched for window at steady state.
type shardsRun struct {
	shards, procs int
	window        time.Duration
}

// parseShards parses "shards:processes:window", comma-separated.
func parseShards(spec string) ([]shardsRun, error) {
	var out []shardsRun
	for _, s := range strings.Split(spec, ",") {
		f := strings.Split(strings.TrimSpace(s), ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("shards %q: want shards:processes:window", s)
		}
		n, err1 := strconv.Atoi(f[0])
		p, err2 := strconv.Atoi(f[1])
		w, err3 := time.ParseDuration(f[2])
		if err1 != nil || err2 != nil || err3 != nil || n <= 0 || p <= 1 || w <= 0 {
			return nil, fmt.Errorf("shards %q: want shards:processes:window, at least 2 processes", s)
		}
		out = append(out, shardsRun{shards: n, procs: p, window: w})
	}
	return out, nil
}

// group is what a shard group's processes said they lead, by their lines.
type group struct {
	mu      sync.Mutex
	led     map[string]map[string]bool // process ID → shard elections
	elected int                        // elected lines so far
}

func (g *group) follow(events <-chan event) {
	for ev := range events {
		g.mu.Lock()
		if g.led[ev.ID] == nil {
			g.led[ev.ID] = map[string]bool{}
		}
		switch ev.Event {
		case "elected":
			g.led[ev.ID][ev.Election] = true
			g.elected++
		case "demoted":
			delete(g.led[ev.ID], ev.Election)
		}
		g.mu.Unlock()
	}
}

// shares returns what each of ids leads, and whether every one of the n
// shards is led by one of them, each leading n/len(ids) rounded down or up.
func (g *group) shares(n int, ids []string) (counts []int, balanced bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sum, balanced := 0, true
	for _, id := range ids {
		c := len(g.led[id])
		counts, sum = append(counts, c), sum+c
		balanced = balanced && c >= n/len(ids) && c <= (n+len(ids)-1)/len(ids)
	}
	return counts, balanced && sum == n
}

func (g *group) changes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.elected
}

// until polls g every 10 ms (every 100 ms until 2026-12-01) until ids
// hold a balanced share of n shards, for at most limit, and returns how
// long that took.
func (g *group) until(ctx context.Context, n int, ids []string, limit time.Duration) (time.Duration, error) {
	start, last := time.Now(), time.Now()
	for {
		counts, ok := g.shares(n, ids)
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > limit || ctx.Err() != nil {
			return 0, fmt.Errorf("not balanced over %v after %v: they lead %v", ids, limit, counts)
		}
		if time.Since(last) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "bench: %v: %v lead %v\n", time.Since(start).Round(time.Second), ids, counts)
			last = time.Now()
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// shardRuns runs shard groups (package shards, each process a `sqlelect
// shards` with the library's defaults, lease 15 s, and args), one after the other,
// each in a fresh database, and reports for each: the time until every
// shard is led and balanced; over the window, the leaderships that began
// (changes), the server's CPU and the busiest process's; then a process
// more (join), a clean stop of one (leave, SIGTERM) and a kill -9 of
// another (crash): the time until balanced again, and the leaderships
// that began meanwhile (moves).
func (e *env) shardRuns(ctx context.Context, spec string, args []string) (string, error) {
	runs, err := parseShards(spec)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(e.binDir, "sqlelect")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sqlelect")
	build.Dir, build.Stderr = "..", os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sqlelect: %w", err)
	}
	var b strings.Builder
	b.WriteString("| shards × processes | up | window | changes | shares | server CPU | busiest process CPU | join: balanced after, moves | leave (SIGTERM): balanced after, moves | crash (kill -9): balanced after, moves |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		row, err := e.shardRun(ctx, bin, r, args)
		if err != nil {
			return "", fmt.Errorf("shards %d × %d: %w", r.shards, r.procs, err)
		}
		fmt.Fprintln(os.Stderr, "bench: "+row)
		b.WriteString(row + "\n")
	}
	return b.String(), nil
}

func (e *env) shardRun(ctx context.Context, bin string, r shardsRun, args []string) (string, error) {
	dsn, err := e.database(ctx)
	if err != nil {
		return "", err
	}
	// A name's first election skips the lock delay only once the floor's
	// marker, which the migrations just wrote, is a lock delay old (15 s
	// by default): as for a deployment started after its migrations.
	sleep(ctx, 15*time.Second)
	events := make(chan event, 1024)
	g := &group{led: map[string]map[string]bool{}}
	go g.follow(events)
	procs := map[string]*proc{}
	var ids []string
	startProc := func(id string) error {
		p, err := e.spawn(ctx, id, exec.Command(bin, append([]string{"shards", "orders", "--shards", strconv.Itoa(r.shards), "--id", id, "--dsn", dsn, "--log-level", "info"}, args...)...), events)
		procs[id], ids = p, append(ids, id)
		return err
	}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	fmt.Fprintf(os.Stderr, "bench: shards %d over %d processes\n", r.shards, r.procs)
	for i := range r.procs {
		if err := startProc(fmt.Sprintf("p%d", i+1)); err != nil {
			return "", err
		}
	}
	up, err := g.until(ctx, r.shards, ids, 15*time.Minute)
	if err != nil {
		return "", err
	}
	// The busiest process over the window: each process's CPU at both ends.
	before := map[string]float64{}
	for id, p := range procs {
		before[id] = scaleload.ProcCPU(p.cmd.Process.Pid)
	}
	s0, c0 := scaleload.ProcCPU(e.pid), g.changes()
	sleep(ctx, r.window)
	s1, busiest := scaleload.ProcCPU(e.pid), 0.0
	for id, p := range procs {
		busiest = max(busiest, scaleload.ProcCPU(p.cmd.Process.Pid)-before[id])
	}
	counts, _ := g.shares(r.shards, ids)
	secs := r.window.Seconds()
	row := fmt.Sprintf("| %d × %d | %v | %v | %d | %v | %.2f cores | %.2f cores |", r.shards, r.procs, up.Round(time.Second), r.window,
		g.changes()-c0, counts, (s1-s0)/secs, busiest/secs)

	// A join, a clean leave and a crash, each timed until balanced again.
	for _, change := range []func() error{
		func() error { return startProc(fmt.Sprintf("p%d", r.procs+1)) },
		func() error { procs[ids[0]].signal(syscall.SIGTERM); ids = ids[1:]; return nil },
		func() error { procs[ids[0]].signal(syscall.SIGKILL); ids = ids[1:]; return nil },
	} {
		c0 = g.changes()
		if err := change(); err != nil {
			return "", err
		}
		took, err := g.until(ctx, r.shards, ids, 5*time.Minute)
		if err != nil {
			return "", err
		}
		row += fmt.Sprintf(" %v, %d |", took.Round(10*time.Millisecond), g.changes()-c0)
	}
	return row, nil
}
