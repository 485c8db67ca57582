package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlelect/sqlelect/integration/bench/scaleload"
)

// summaryRow is one line of the failover and handover table.
type summaryRow struct {
	scenario, backend, config string
	n                         int
	p50, p90, p99, max        time.Duration
	lease                     time.Duration // 0: no ratio column
}

// quantile is the nearest-rank quantile of sorted ds: the smallest value
// with at least q of the trials at or below it (with 30 trials, p99 is the
// maximum).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func summarize(scenario, backend, config string, ts []trial, lease time.Duration) summaryRow {
	ds := make([]time.Duration, len(ts))
	for i, t := range ts {
		ds[i] = t.d
	}
	slices.Sort(ds)
	return summaryRow{scenario: scenario, backend: backend, config: config, n: len(ds),
		p50: quantile(ds, 0.5), p90: quantile(ds, 0.9), p99: quantile(ds, 0.99), max: quantile(ds, 1), lease: lease}
}

func formatRows(rows []summaryRow) string {
	var b strings.Builder
	b.WriteString("| scenario | backend | configuration | trials | p50 | p90 | p99 | max | p99 / lease |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		ratio := "-"
		if r.lease > 0 {
			ratio = fmt.Sprintf("%.3f", float64(r.p99)/float64(r.lease))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", r.scenario, r.backend, r.config, r.n,
			dur(r.p50), dur(r.p90), dur(r.p99), dur(r.max), ratio)
	}
	return b.String()
}

func dur(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.3f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// writeCSV writes every trial: scenario, backend, configuration, trial
// number, milliseconds, lease in milliseconds.
func writeCSV(path string, ts []trial) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"scenario", "backend", "config", "trial", "ms", "lease_ms"})
	for _, t := range ts {
		_ = w.Write([]string{t.scenario, t.backend, t.config, strconv.Itoa(t.n),
			strconv.FormatFloat(float64(t.d)/float64(time.Millisecond), 'f', 3, 64),
			strconv.FormatInt(t.lease.Milliseconds(), 10)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plot draws the empirical distributions (CDF) of the failover times as a
// ratio to the lease, and of the handover times in milliseconds (log
// scale), into distributions.png with gnuplot.
func plot(out string, ts []trial) error {
	gp, err := exec.LookPath("gnuplot")
	if err != nil {
		return errNoGnuplot
	}
	dir, err := os.MkdirTemp("", "sqlelect-plot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	type series struct {
		title, file string
		vals        []float64
	}
	var fail, hand []*series
	index := map[string]*series{}
	for _, t := range ts {
		key := t.scenario + "|" + t.backend + "|" + t.config
		s := index[key]
		if s == nil {
			title := t.backend
			switch t.scenario {
			case "handover":
				title = t.backend + ", " + t.config
			case "transfer":
				title = t.backend + ", transfer request"
			}
			s = &series{title: title, file: filepath.Join(dir, fmt.Sprintf("s%d.dat", len(index)))}
			index[key] = s
			if t.scenario == "failover" {
				fail = append(fail, s)
			} else {
				hand = append(hand, s)
			}
		}
		if t.scenario == "failover" {
			s.vals = append(s.vals, float64(t.d)/float64(t.lease))
		} else {
			s.vals = append(s.vals, float64(t.d)/float64(time.Millisecond))
		}
	}
	for _, s := range index {
		slices.Sort(s.vals)
		var b strings.Builder
		fmt.Fprintf(&b, "%g 0\n", s.vals[0])
		for i, v := range s.vals {
			fmt.Fprintf(&b, "%g %g\n", v, float64(i+1)/float64(len(s.vals)))
		}
		if err := os.WriteFile(s.file, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	plots := func(ss []*series) string {
		var parts []string
		for _, s := range ss {
			parts = append(parts, fmt.Sprintf("%q using 1:2 with steps lw 2 title %q", s.file, s.title))
		}
		return strings.Join(parts, ", ")
	}
	png, err := filepath.Abs(filepath.Join(out, "distributions.png"))
	if err != nil {
		return err
	}
	var script strings.Builder
	fmt.Fprintf(&script, "set terminal pngcairo size 1400,560 font 'sans,10'\nset output %q\n", png)
	script.WriteString("set multiplot layout 1,2\nset grid\nset key outside below\nset ylabel 'fraction of trials'\nset yrange [0:1.02]\n")
	n := 0
	if len(fail) > 0 {
		n++
		script.WriteString("set title 'Failover after kill -9: time to a new leader / lease'\nset xlabel 'time / lease'\n")
		fmt.Fprintf(&script, "plot %s\n", plots(fail))
	}
	if len(hand) > 0 {
		n++
		script.WriteString("set title 'Handover after SIGTERM (resign): time to a new leader'\nset xlabel 'milliseconds (log scale)'\nset logscale x\n")
		fmt.Fprintf(&script, "plot %s\n", plots(hand))
	}
	if n == 0 {
		return nil
	}
	script.WriteString("unset multiplot\n")
	cmd := exec.Command(gp)
	cmd.Stdin = strings.NewReader(script.String())
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gnuplot: %w: %s", err, b)
	}
	return nil
}

// rates reads the server's counters over window and returns per-second
// rates: statements (Questions), write statements (Com_insert, Com_update,
// Com_delete, Com_replace), row inserts attempted (Handler_write: an INSERT
// … ON DUPLICATE KEY UPDATE counts one even when the row exists) and rows
// changed (Handler_update + Handler_delete; an update that changes nothing
// is not counted).
func (e *env) rates(ctx context.Context, window time.Duration) (map[string]float64, error) {
	a, err := scaleload.Status(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	sleep(ctx, window)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	b, err := scaleload.Status(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	d := func(ks ...string) float64 {
		s := 0.0
		for _, k := range ks {
			s += b[k] - a[k]
		}
		return s / secs
	}
	return map[string]float64{
		"questions":        d("QUESTIONS"),
		"write_statements": d("COM_INSERT", "COM_UPDATE", "COM_DELETE", "COM_REPLACE"),
		"handler_write":    d("HANDLER_WRITE"),
		"rows_changed":     d("HANDLER_UPDATE", "HANDLER_DELETE"),
	}, nil
}

// cost measures, for each backend with the library's defaults and for the
// seed recipe: the server's rates with one candidate (the leader), then with
// three (the leader and two followers); a follower's cost is the
// difference divided by two. A calibration window with no candidates
// measures what reading the counters costs; it is subtracted.
func (e *env) cost(ctx context.Context, window time.Duration) (string, error) {
	base, err := e.rates(ctx, window)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Window %v per phase. Calibration (no candidates, only this harness reading the counters): %.2f statements/s, %.2f Handler_write/s, %.2f rows changed/s; subtracted below. A follower's figure is (leader and two followers − leader alone) / 2.\n\n",
		window, base["questions"], base["handler_write"], base["rows_changed"])
	b.WriteString("| backend | role | statements/s | write statements/s | Handler_write/s | rows changed/s | rows changed per renew interval |\n|---|---|---|---|---|---|---|\n")
	for _, c := range []struct {
		backend string
		renew   time.Duration
	}{{"table", 2 * time.Second}, {"lock", 2 * time.Second}, {"seed", time.Second}} {
		dsn, err := e.database(ctx)
		if err != nil {
			return "", err
		}
		events := make(chan event, 1024)
		o := candidateOpts{defaults: true, fast: true}
		var procs []*proc
		stopAll := func() {
			for _, p := range procs {
				p.stop()
			}
		}
		start := func(id string) error {
			p, err := e.start(ctx, c.backend, dsn, "cost", id, o, events)
			if err == nil {
				procs = append(procs, p)
			}
			return err
		}
		waitElected := func() error {
			t := time.NewTimer(2 * time.Minute)
			defer t.Stop()
			for {
				select {
				case ev := <-events:
					if ev.Event == "elected" {
						return nil
					}
				case <-t.C:
					return fmt.Errorf("cost %s: no leader within 2 minutes", c.backend)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		phase := func() (map[string]float64, error) {
			r, err := e.rates(ctx, window)
			if err != nil {
				return nil, err
			}
			for k := range r {
				r[k] -= base[k]
			}
			return r, nil
		}
		fmt.Fprintf(os.Stderr, "bench: cost %s: leader alone\n", c.backend)
		if err := start("c1"); err != nil {
			return "", err
		}
		if err := waitElected(); err != nil {
			stopAll()
			return "", err
		}
		sleep(ctx, 3*time.Second)
		leader, err := phase()
		if err != nil {
			stopAll()
			return "", err
		}
		fmt.Fprintf(os.Stderr, "bench: cost %s: leader and two followers\n", c.backend)
		for _, id := range []string{"c2", "c3"} {
			if err := start(id); err != nil {
				stopAll()
				return "", err
			}
		}
		sleep(ctx, 5*time.Second)
		all, err := phase()
		stopAll()
		if err != nil {
			return "", err
		}
		name := c.backend
		if name == "seed" {
			name = "seed recipe"
		}
		row := func(role string, r map[string]float64) {
			for k, v := range r {
				if math.Abs(v) < 0.005 {
					r[k] = 0 // no "-0.00" from subtracting equal rates
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", name, role,
				r["questions"], r["write_statements"], r["handler_write"], r["rows_changed"], r["rows_changed"]*c.renew.Seconds())
		}
		row("leader", leader)
		follower := map[string]float64{}
		for k := range all {
			follower[k] = (all[k] - leader[k]) / 2
		}
		row("each follower", follower)
	}
	return b.String(), nil
}

// scaleRuns runs the scale scenarios in spec ("elections:window[:unbatched]",
// comma-separated) one after the other, each in a fresh database.
func (e *env) scaleRuns(ctx context.Context, spec string) (string, error) {
	runs, err := parseScale(spec)
	if err != nil {
		return "", err
	}
	var rs []scaleload.Result
	for _, sr := range runs {
		n, w, batch := sr.elections, sr.window, sr.batch
		conns := 16
		if !batch {
			conns = 64
		}
		dsn, err := e.database(ctx)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(os.Stderr, "bench: scale %d elections x 3, batched %v, window %v\n", n, batch, w)
		r, err := scaleload.Run(ctx, scaleload.Options{
			DSN: dsn, Elections: n, Candidates: 3, Lease: 10 * time.Second,
			Warmup: 3 * time.Minute, Duration: w, Batch: batch, ServerPid: e.pid, MaxConns: conns,
			Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+f+"\n", a...) },
		})
		if err != nil {
			return "", fmt.Errorf("scale %d elections: %w", n, err)
		}
		rs = append(rs, r)
		fmt.Fprint(os.Stderr, scaleload.Table([]scaleload.Result{r}))
	}
	return scaleload.Table(rs), nil
}

// scaleRun is one entry of the -scale flag.
type scaleRun struct {
	elections int
	window    time.Duration
	batch     bool
}

// parseScale parses "elections:window[:unbatched]", comma-separated.
func parseScale(spec string) ([]scaleRun, error) {
	var out []scaleRun
	for _, s := range strings.Split(spec, ",") {
		f := strings.Split(strings.TrimSpace(s), ":")
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "unbatched") {
			return nil, fmt.Errorf("scale %q: want elections:window[:unbatched]", s)
		}
		n, err := strconv.Atoi(f[0])
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("scale %q: bad number of elections", s)
		}
		w, err := time.ParseDuration(f[1])
		if err != nil || w <= 0 {
			return nil, fmt.Errorf("scale %q: bad window", s)
		}
		out = append(out, scaleRun{elections: n, window: w, batch: len(f) == 2})
	}
	return out, nil
}
