// Command peers measures sqlelect beside the leader elections its users
// compare it with (issue 25), in one run, with one harness: etcd's
// client/v3/concurrency Election on Debian's etcd, ZooKeeper's
// ephemeral-sequential leader recipe on Debian's ZooKeeper over
// github.com/go-zookeeper/zk, client-go's tools/leaderelection (LeaseLock)
// against a minimal Lease API served by this harness, go-mysql-lock's
// GET_LOCK scheme and the seed recipe on the same MariaDB as sqlelect's
// table and lock backends. Every peer runs as 3 candidate processes
// (./candidate) with the same lease or session TTL (-lease, 2 s), and for
// each the harness measures
//
//   - first: the first election of a new name (3 candidates started at
//     once; from the winner's start to its leader signal);
//   - failover: kill -9 of the leader, to another candidate's leader signal;
//   - handover: SIGTERM of the leader (each peer's clean leave), to another
//     candidate's leader signal;
//   - transfer: an operator's request that the leader hand over to a named
//     follower (operator.Transfer, as the CLI's transfer does), from the
//     call to the target's leader signal; sqlelect's backends only, the
//     others have no planned transfer to a named candidate ("n/a");
//   - stall: SIGSTOP of the leader for 1.5 × lease, then SIGCONT: did
//     another take over, did two leader signals overlap and for how long,
//     and would the stale leader's fenced write have been accepted;
//   - cost: requests and writes per second on the database or coordination
//     server, leader alone and with two followers;
//   - killconn (go-mysql-lock's scheme only, not in the default list): the
//     holder's connection is killed on the server; how long two leader
//     signals overlap;
//   - rolling (peers run through members.Run only, sqlelect-members and
//     sqlelect-members-lock; not in the default list): a rolling upgrade of
//     3 candidates from 1.0.0 to 2.0.0 with leadership following the
//     newest version (rolling.go); the changes of leader and the longest
//     time without one.
//
// After the peers, it measures the loopback round trip of `SELECT 1` to
// the MariaDB peers' server (5,000 samples, p50 and p99), the unit of the
// least each figure could be (BENCHMARKS.md), and puts it in the header.
//
// It writes -out (summary.md, trials.csv, results.json, distributions.png
// with gnuplot) and prints the summary.
//
// The defaults (20 trials of failover, handover, transfer and first election, 10
// stalls, 10 s cost windows, 7 peers) take about 25 minutes (estimated: 30 of everything took 38);
//
//	cd integration/bench/peers && go run . -trials 30 -first-trials 30 -stall-trials 30
//	go run . -peers etcd,zookeeper -trials 5 -stall-trials 3 -cost-window 4s
//	go run . -peers sqlelect-members,sqlelect-members-lock -scenarios rolling -trials 5
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

type options struct {
	peers, scenarios    string
	trials, stallTrials int
	firstTrials         int
	lease, costWindow   time.Duration
	holdDown            time.Duration
	rollingHold         bool
	out                 string
}

func main() {
	var o options
	flag.StringVar(&o.peers, "peers", "sqlelect-table,sqlelect-lock,etcd,zookeeper,client-go,mysql-lock,seed", "comma-separated peers")
	flag.StringVar(&o.scenarios, "scenarios", "first,failover,handover,transfer,stall,cost", "comma-separated scenarios")
	flag.IntVar(&o.trials, "trials", 20, "failover, handover, transfer and rolling trials per peer")
	flag.IntVar(&o.firstTrials, "first-trials", 20, "first-election trials per peer")
	flag.IntVar(&o.stallTrials, "stall-trials", 10, "stall (SIGSTOP) trials per peer")
	flag.DurationVar(&o.lease, "lease", 2*time.Second, "lease or session TTL of every peer")
	flag.DurationVar(&o.holdDown, "hold-down", 0, "rolling: the members' hold-down (members.Options.HoldDown; 0: the lease)")
	flag.BoolVar(&o.rollingHold, "rolling-hold", false, "rolling: each restart also waits until the restarted member has served its hold-down (as TestRollingUpgrade), not only until it is live and healthy")
	flag.DurationVar(&o.costWindow, "cost-window", 10*time.Second, "measurement window of each cost phase")
	flag.StringVar(&o.out, "out", "../results/peers", "directory for the raw results, the summary and the plot")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal("peers: ", err)
	}
}

func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	bin, err := os.MkdirTemp("", "peers-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	h := &harness{cand: filepath.Join(bin, "candidate"), lease: o.lease}
	build := exec.CommandContext(ctx, "go", "build", "-o", h.cand, "./candidate")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./candidate: %w", err)
	}
	defer h.killAll()

	want := map[string]bool{}
	for _, s := range strings.Split(o.scenarios, ",") {
		want[strings.TrimSpace(s)] = true
	}
	var results []*peerResult
	var all []trial
	started := time.Now().UTC()
	load := loadavg()
	for _, name := range strings.Split(o.peers, ",") {
		name = strings.TrimSpace(name)
		sp, cleanup, err := h.setup(ctx, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r := &peerResult{spec: sp}
		err = func() error {
			defer cleanup()
			if want["cost"] {
				if err := h.cost(ctx, sp, o.costWindow, r); err != nil {
					return err
				}
			}
			if want["first"] {
				ts, err := h.first(ctx, sp, o.firstTrials)
				if err != nil {
					return err
				}
				r.first = ts
			}
			for _, k := range []struct {
				kind string
				into *[]trial
			}{{"failover", &r.failover}, {"handover", &r.handover}, {"transfer", &r.transfer}} {
				if !want[k.kind] {
					continue
				}
				ts, err := h.trials(ctx, sp, k.kind, o.trials)
				if err != nil {
					return err
				}
				*k.into = ts
			}
			if want["killconn"] {
				ts, err := h.killConn(ctx, sp, o.stallTrials)
				if err != nil {
					return err
				}
				r.killconn = ts
			}
			if want["rolling"] {
				hold := cmp.Or(o.holdDown, o.lease)
				ts, err := h.rolling(ctx, sp, o.trials, hold, o.rollingHold)
				if err != nil {
					return err
				}
				r.rolling, r.rollingWait = ts, "live and healthy"
				if o.rollingHold {
					r.rollingWait = fmt.Sprintf("live, healthy, hold-down (%v) served", hold)
				}
			}
			if want["stall"] {
				ts, err := h.stall(ctx, sp, o.stallTrials)
				if err != nil {
					return err
				}
				r.stall = ts
			}
			return nil
		}()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, r)
		for _, ts := range [][]trial{r.first, r.failover, r.handover, r.transfer, r.stall, r.killconn, r.rolling} {
			all = append(all, ts...)
		}
		// Keep what is done so far.
		if err := writeResults(o.out, results, all, h.header(started, load)); err != nil {
			return err
		}
	}
	head := h.header(started, load) + fmt.Sprintf("Run ended %s (%.0f minutes); load average at the end %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), time.Since(started).Minutes(), loadavg())
	if h.maria != nil {
		rtt, err := h.maria.rtt(ctx, 5000)
		if err != nil {
			return fmt.Errorf("round trip: %w", err)
		}
		head += rtt
	}
	fmt.Print(head + formatSummary(results, o.lease))
	if err := plot(o.out, all); err != nil {
		fmt.Fprintln(os.Stderr, "peers: no plot:", err)
	}
	return writeResults(o.out, results, all, head)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
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
	return fmt.Sprintf("%s, %d cores, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}
