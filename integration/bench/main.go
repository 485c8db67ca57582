// Command bench is sqlelect's benchmark harness (`make bench`): on a real
// MariaDB (a throwaway server, or $SQLELECT_TEST_DSN), with candidates as
// separate processes, it measures
//
//   - failover: the leader process is killed (kill -9); time until another
//     candidate is elected, as a ratio to the lease;
//   - handover: the leader gets SIGTERM and resigns; time until another
//     candidate is elected, with and without fast handover;
//   - transfer: an operator asks the leader to hand over to a named
//     follower (Operator.Transfer, the row's transfer_to); time
//     until that follower is elected;
//   - cost: statements and row writes per second on the server, from its
//     own status counters, for a leader and for a follower;
//   - seed: the seed recipe (integration/bench/seedcandidate) in the same
//     harness: failover, handover and cost;
//   - scale: thousands of elections with 3 candidates each on one server
//     (integration/bench/scaleload);
//   - shards (not by default): a shard group's `sqlelect shards` processes
//     (package shards): start-up, steady state, a join and a kill -9;
//
// and prints a markdown summary; raw trials go to -out as CSV, with a PNG
// plot made by gnuplot when it is installed.
//
//	cd integration && go run ./bench -trials 30
//	cd integration && go run ./bench -scenarios scale -scale 10000:5m,30000:1m
//	cd integration && go run ./bench -scenarios shards -shards 10000:5:5m
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.IntVar(&o.trials, "trials", 30, "failover and handover trials per configuration")
	flag.IntVar(&o.seedTrials, "seed-trials", 10, "failover trials of the seed recipe (each takes about 20 s)")
	flag.DurationVar(&o.lease, "lease", 2*time.Second, "lease for failover and handover (renew deadline 2/3, renew and retry intervals 1/10 of it)")
	flag.DurationVar(&o.costWindow, "cost-window", 20*time.Second, "measurement window of each cost phase")
	flag.StringVar(&o.scenarios, "scenarios", "failover,handover,transfer,cost,seed,scale", "comma-separated scenarios")
	flag.StringVar(&o.scale, "scale", "10000:5m,10000:1m:unbatched,20000:1m,30000:1m,50000:1m", "scale runs: elections:window[:unbatched], comma-separated")
	flag.StringVar(&o.shards, "shards", "10000:5:5m", "shard groups: shards:processes:window, comma-separated (scenario shards)")
	flag.StringVar(&o.shardsArgs, "shards-args", "", "more flags for each `sqlelect shards` process, space-separated (e.g. --lease 3s)")
	flag.StringVar(&o.out, "out", "bench/results", "directory for the raw results, the summary and the plot")
	flag.StringVar(&o.serverArgs, "server-args", "", "extra options for the server the harness starts, space-separated (e.g. --disable-log-bin)")
	flag.BoolVar(&o.interpolate, "interpolate", true, "interpolateParams=true in the candidates' DSN (the library needs it no more; the seed recipe does)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal("bench: ", err)
	}
}

type options struct {
	trials, seedTrials int
	lease, costWindow  time.Duration
	scenarios, scale   string
	shards, shardsArgs string
	out                string
	serverArgs         string
	interpolate        bool
}

func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	env, err := newEnv(ctx, strings.Fields(o.serverArgs))
	if err != nil {
		return err
	}
	defer env.close()
	env.interpolate = o.interpolate

	var sum strings.Builder
	fmt.Fprintf(&sum, "Machine: %s. Server: %s. Go: %s. Run: %s.\n\n", env.machine, env.version, goVersion(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	var trials []trial
	want := map[string]bool{}
	for _, s := range strings.Split(o.scenarios, ",") {
		want[strings.TrimSpace(s)] = true
	}
	L := o.lease
	timing := fmt.Sprintf("lease %v, renew deadline %v, renew/retry %v", L, (L * 2 / 3).Round(time.Millisecond), L/10)

	if want["failover"] || want["handover"] || want["transfer"] || want["seed"] {
		var rows []summaryRow
		if want["failover"] {
			for _, b := range []string{"table", "lock"} {
				ts, err := env.trials(ctx, b, "failover", candidateOpts{lease: L, retry: L / 10, fast: true}, o.trials)
				if err != nil {
					return err
				}
				trials = append(trials, ts...)
				rows = append(rows, summarize("failover (kill -9)", b, timing, ts, L))
			}
		}
		if want["handover"] {
			for _, c := range []struct {
				backend, label string
				co             candidateOpts
			}{
				{"table", fmt.Sprintf("retry %v, fast handover", L/10), candidateOpts{lease: L, retry: L / 10, fast: true}},
				{"table", fmt.Sprintf("retry %v, fast handover", L/2), candidateOpts{lease: L, retry: L / 2, fast: true}},
				{"table", fmt.Sprintf("retry %v, DisableFastHandover", L/10), candidateOpts{lease: L, retry: L / 10}},
				{"table", fmt.Sprintf("retry %v, DisableFastHandover", L/2), candidateOpts{lease: L, retry: L / 2}},
				{"lock", fmt.Sprintf("retry %v", L/10), candidateOpts{lease: L, retry: L / 10, fast: true}},
			} {
				ts, err := env.trials(ctx, c.backend, "handover", c.co, o.trials)
				if err != nil {
					return err
				}
				for i := range ts {
					ts[i].config = c.label
				}
				trials = append(trials, ts...)
				rows = append(rows, summarize("handover (SIGTERM, resign)", c.backend, c.label, ts, 0))
			}
		}
		if want["transfer"] {
			for _, b := range []string{"table", "lock"} {
				ts, err := env.trials(ctx, b, "transfer", candidateOpts{lease: L, retry: L / 10, fast: true}, o.trials)
				if err != nil {
					return err
				}
				trials = append(trials, ts...)
				rows = append(rows, summarize("transfer (operator's request to a named follower)", b, timing, ts, 0))
			}
		}
		if want["seed"] {
			seedLease := 20 * time.Second
			for _, kind := range []string{"failover", "handover"} {
				ts, err := env.trials(ctx, "seed", kind, candidateOpts{lease: seedLease}, o.seedTrials)
				if err != nil {
					return err
				}
				trials = append(trials, ts...)
				name := "failover (kill -9)"
				if kind == "handover" {
					name = "handover (SIGTERM; the recipe never releases)"
				}
				rows = append(rows, summarize(name, "seed recipe", "timeout 20 s, every candidate polls every 1 s", ts, seedLease))
			}
		}
		sum.WriteString("## Failover and handover\n\n")
		fmt.Fprintf(&sum, "3 candidate processes per election; sqlelect candidates with %s unless the row says otherwise. Times are from the signal (or the transfer request) to the new leader's elected event (both by this machine's clock). Quantiles are nearest-rank: with 30 trials p99 is the maximum.\n\n", timing)
		sum.WriteString(formatRows(rows))
		sum.WriteString("\n")
		if err := writeCSV(filepath.Join(o.out, "trials.csv"), trials); err != nil {
			return err
		}
		if err := plot(o.out, trials); err != nil {
			fmt.Fprintln(os.Stderr, "bench: no plot:", err)
		}
	}
	if want["cost"] {
		sum.WriteString("## Database cost at steady state (library defaults: lease 15 s, renew 2 s, retry 2 s; the seed recipe: every candidate every 1 s)\n\n")
		table, err := env.cost(ctx, o.costWindow)
		if err != nil {
			return err
		}
		sum.WriteString(table + "\n")
	}
	if want["scale"] {
		sum.WriteString("## Scale: many elections, 3 candidates each, lease 10 s (renew deadline 7 s, renew and retry 2 s)\n\n")
		table, err := env.scaleRuns(ctx, o.scale)
		if err != nil {
			return err
		}
		sum.WriteString(table + "\n")
	}
	if want["shards"] {
		flags := "the library's defaults (lease 15 s, renew and retry 2 s)"
		if o.shardsArgs != "" {
			flags = "flags `" + o.shardsArgs + "`, else the library's defaults"
		}
		sum.WriteString("## Shard groups: `sqlelect shards` processes, " + flags + "\n\n")
		env.logDir = o.out // each process's log: <out>/p1.log, …
		table, err := env.shardRuns(ctx, o.shards, strings.Fields(o.shardsArgs))
		if err != nil {
			return err
		}
		sum.WriteString(table + "\n")
	}
	fmt.Print(sum.String())
	return os.WriteFile(filepath.Join(o.out, "summary.md"), []byte(sum.String()), 0o644)
}
