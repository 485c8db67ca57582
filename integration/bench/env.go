package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/schema"
)

// env is the server, the built candidate programs and the processes started.
type env struct {
	server   *mysqld.Server // nil with $SQLELECT_TEST_DSN
	adminDSN string
	admin    *sql.DB
	pid      int
	machine  string
	version  string
	binDir   string
	cand     string // integration/chaos/candidate
	seed     string // integration/bench/seedcandidate
	// interpolate sets interpolateParams in the candidates' DSN (-interpolate)
	interpolate bool
	logDir      string // where spawn writes each process's stderr (<id>.log); "" for nowhere

	mu    sync.Mutex
	procs map[*proc]bool
}

func newEnv(ctx context.Context, serverArgs []string) (*env, error) {
	e := &env{procs: map[*proc]bool{}}
	if dsn := os.Getenv("SQLELECT_TEST_DSN"); dsn != "" {
		e.adminDSN = dsn
	} else {
		s, err := mysqld.Start(ctx, mysqld.Options{
			ExtraArgs: append([]string{"--max-connections=1000"}, serverArgs...),
			Logf:      func(f string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+f+"\n", a...) },
		})
		if err != nil {
			return nil, err
		}
		e.server, e.adminDSN, e.pid = s, s.DSN(""), s.Pid()
	}
	db, err := sql.Open("mysql", e.adminDSN)
	if err != nil {
		e.close()
		return nil, err
	}
	e.admin = db
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&e.version); err != nil {
		e.close()
		return nil, fmt.Errorf("connecting to the server: %w", err)
	}
	e.machine = machine()
	if e.binDir, err = os.MkdirTemp("", "sqlelect-bench-"); err != nil {
		e.close()
		return nil, err
	}
	e.cand, e.seed = filepath.Join(e.binDir, "candidate"), filepath.Join(e.binDir, "seedcandidate")
	for out, pkg := range map[string]string{e.cand: "github.com/sqlelect/sqlelect/integration/chaos/candidate", e.seed: "github.com/sqlelect/sqlelect/integration/bench/seedcandidate"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			e.close()
			return nil, fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	return e, nil
}

func (e *env) close() {
	e.mu.Lock()
	for p := range e.procs {
		_ = p.cmd.Process.Kill()
	}
	e.mu.Unlock()
	if e.admin != nil {
		e.admin.Close()
	}
	if e.server != nil {
		_ = e.server.Stop()
	}
	if e.binDir != "" {
		os.RemoveAll(e.binDir)
	}
}

// database creates a fresh database with the election table (and the seed
// recipe's table) and returns its DSN.
func (e *env) database(ctx context.Context) (string, error) {
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "bench_" + hex.EncodeToString(b[:])
	if _, err := e.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	cfg, err := mysql.ParseDSN(e.adminDSN)
	if err != nil {
		return "", err
	}
	cfg.DBName = name
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.InterpolateParams = e.interpolate
	dsn := cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if err := schema.New(db).Up(ctx); err != nil {
		return "", err
	}
	if _, err := e.admin.ExecContext(ctx, "CREATE TABLE "+name+`.seed_election (
  anchor tinyint(3) unsigned NOT NULL,
  service_id varchar(128) NOT NULL,
  last_seen_active timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (anchor))`); err != nil {
		return "", err
	}
	return dsn, nil
}

// event is one JSON line of a candidate (or of a shard group's process,
// with the shard's election).
type event struct {
	Event    string    `json:"event"`
	ID       string    `json:"id"`
	Election string    `json:"election"`
	Time     time.Time `json:"time"`
}

// proc is a candidate process.
type proc struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
}

// candidateOpts are a candidate process's timings.
type candidateOpts struct {
	lease, retry time.Duration
	fast         bool // table backend: fast handover
	defaults     bool // the library's defaults (cost)
}

// start starts candidate id of backend ("table", "lock" or "seed"); its
// events go to events.
func (e *env) start(ctx context.Context, backend, dsn, election, id string, o candidateOpts, events chan<- event) (*proc, error) {
	var cmd *exec.Cmd
	if backend == "seed" {
		cmd = exec.Command(e.seed, "--dsn", dsn, "--id", id)
	} else {
		args := []string{"--backend", backend, "--dsn", dsn, "--election", election, "--id", id,
			"--fast-handover=" + strconv.FormatBool(o.fast), "--stats-every=0"}
		if o.defaults {
			args = append(args, "--lease=15s", "--renew-deadline=10s", "--renew-interval=2s", "--retry-interval=2s", "--query-timeout=5s")
		} else {
			L := o.lease
			args = append(args, "--lease="+L.String(), "--renew-deadline="+(L*2/3).String(),
				"--renew-interval="+(L/10).String(), "--retry-interval="+o.retry.String(), "--query-timeout="+(L/5).String())
		}
		cmd = exec.Command(e.cand, args...)
	}
	return e.spawn(ctx, id, cmd, events)
}

// spawn starts cmd, process id, whose JSON lines on stdout go to events.
func (e *env) spawn(ctx context.Context, id string, cmd *exec.Cmd, events chan<- event) (*proc, error) {
	cmd.Stderr = nil
	if e.logDir != "" {
		f, err := os.Create(filepath.Join(e.logDir, id+".log"))
		if err != nil {
			return nil, err
		}
		defer f.Close() // the process has its own copy once started
		cmd.Stderr = f
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{id: id, cmd: cmd, done: make(chan struct{})}
	e.mu.Lock()
	e.procs[p] = true
	e.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				select {
				case events <- ev:
				case <-ctx.Done():
				}
			}
		}
		_ = cmd.Wait()
		e.mu.Lock()
		delete(e.procs, p)
		e.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

func (p *proc) stop() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// trial is one measured failover or handover.
type trial struct {
	scenario, backend, config string
	n                         int
	d                         time.Duration
	lease                     time.Duration
}

// trials runs n failover ("failover": kill -9), handover ("handover":
// SIGTERM) or transfer ("transfer": an operator's request naming a
// follower, Operator.Transfer) trials with 3 candidates in one
// election.
func (e *env) trials(ctx context.Context, backend, kind string, o candidateOpts, n int) ([]trial, error) {
	dsn, err := e.database(ctx)
	if err != nil {
		return nil, err
	}
	req, err := sql.Open("mysql", dsn) // the operator's, for transfers
	if err != nil {
		return nil, err
	}
	defer req.Close()
	events := make(chan event, 1024)
	procs := map[string]*proc{}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	next := 0
	spawn := func() error {
		next++
		id := fmt.Sprintf("c%d", next)
		p, err := e.start(ctx, backend, dsn, "bench", id, o, events)
		if err != nil {
			return err
		}
		procs[id] = p
		return nil
	}
	for range 3 {
		if err := spawn(); err != nil {
			return nil, err
		}
	}
	L := o.lease
	// waitElected waits for an elected event, other than from not, after t,
	// and notes when not was demoted meanwhile (demoted).
	var demoted time.Time
	waitElected := func(not string, after time.Time, within time.Duration) (event, error) {
		deadline := time.NewTimer(within)
		defer deadline.Stop()
		for {
			select {
			case ev := <-events:
				if ev.Event == "demoted" && ev.ID == not && !ev.Time.Before(after) {
					demoted = ev.Time
				}
				if ev.Event == "elected" && ev.ID != not && !ev.Time.Before(after) {
					return ev, nil
				}
			case <-deadline.C:
				return event{}, fmt.Errorf("%s %s: no candidate elected within %v", backend, kind, within)
			case <-ctx.Done():
				return event{}, ctx.Err()
			}
		}
	}
	leader, err := waitElected("", time.Time{}, 3*L+30*time.Second)
	if err != nil {
		return nil, err
	}
	var out []trial
	for i := range n {
		// Let the leader settle, then strike at a random point of its
		// renewal cycle.
		settle := L/2 + randDuration(L)
		if backend == "seed" {
			// The recipe's cycle is its 1 s interval, not its timeout.
			settle = 2*time.Second + randDuration(time.Second)
		}
		sleep(ctx, settle)
		p := procs[leader.ID]
		if p == nil {
			return nil, fmt.Errorf("leader %s is not one of ours", leader.ID)
		}
		var target string
		for id := range procs {
			if id != leader.ID {
				target = id
			}
		}
		demoted = time.Time{}
		at := time.Now()
		switch kind {
		case "failover":
			p.signal(syscall.SIGKILL)
		case "handover":
			p.signal(syscall.SIGTERM)
		case "transfer":
			if _, err := ops(req).Transfer(ctx, "bench", target); err != nil {
				return nil, err
			}
		}
		next, err := waitElected(leader.ID, at, 3*L+30*time.Second)
		if err != nil {
			return nil, err
		}
		if kind == "transfer" && next.ID != target {
			return nil, fmt.Errorf("%s transfer to %s: %s was elected", backend, target, next.ID)
		}
		d := next.Time.Sub(at)
		out = append(out, trial{scenario: kind, backend: backend, config: fmt.Sprintf("lease %v", L), n: i + 1, d: d, lease: L})
		fmt.Fprintf(os.Stderr, "bench: %s %s trial %d/%d: %v\n", backend, kind, i+1, n, d.Round(time.Millisecond))
		if kind == "transfer" {
			// How long the old leader took to act on the request.
			fmt.Fprintf(os.Stderr, "bench: %s transfer trial %d/%d: %s demoted after %v\n", backend, i+1, n, leader.ID, demoted.Sub(at).Round(100*time.Microsecond))
			leader = next // the old leader runs on, as a follower
			continue
		}
		<-p.done
		delete(procs, leader.ID)
		if err := spawn(); err != nil {
			return nil, err
		}
		leader = next
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func randDuration(max time.Duration) time.Duration {
	var b [8]byte
	_, _ = rand.Read(b[:])
	u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32
	return time.Duration(u % uint64(max))
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if _, v, ok := strings.Cut(l, ":"); ok {
					model = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d cores%s, %s/%s", model, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH)
}

func goVersion() string { return runtime.Version() }

var errNoGnuplot = errors.New("gnuplot is not installed (Debian: apt-get install gnuplot-nox)")
