// Package scaleload runs many elections against one server for the scale
// benchmark (integration/bench, scenario "scale"): N elections with K
// candidates each, the K candidates in K groups that stand for K processes
// (each group has its own *sql.DB and, when batching, its own Batcher), all
// in this process. It reports leadership changes during the measured window
// (none should happen: no fault is injected), heartbeat latency from the
// library's own histogram, and the server's CPU and statement counters.
package scaleload

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionprom"
)

// Options configures one run.
type Options struct {
	DSN        string        // a database with the election table
	Elections  int           // N
	Candidates int           // K (groups)
	Lease      time.Duration // lease; renew deadline 0.7×, renew and retry intervals 0.2× (2 s at 10 s)
	Warmup     time.Duration // the longest wait for every election to have a leader
	Duration   time.Duration // measured window
	Batch      bool          // share a Batcher per group
	ServerPid  int           // the server's pid for its CPU time (0: not measured)
	MaxConns   int           // per group's *sql.DB (default 16)
	Logf       func(format string, args ...any)
}

// Result is what one run measured.
type Result struct {
	Options
	Led             int // elections with a leader at the end of the warmup
	WarmupTook      time.Duration
	Changes         int64   // OnElected + OnDemoted calls during the window
	LeaderlessAt    int     // elections without a leader at the end
	Multi           int     // elections with more than one leader at a sampling (must be 0)
	P50, P99        float64 // heartbeat latency, seconds (from the histogram buckets)
	Heartbeats      float64 // heartbeats per second (all candidates)
	Errors          float64 // heartbeat errors during the window
	ServerCPU       float64 // server CPU, cores (1.0 = one core busy)
	SelfCPU         float64 // this process's CPU, cores
	Statements      float64 // server statements (Questions) per second
	RowWrites       float64 // rows updated or deleted per second (Handler_update + Handler_delete)
	WriteStatements float64 // INSERT, UPDATE, DELETE and REPLACE statements per second
	Commits         float64 // explicit commits (Com_commit) per second
	HeapMB          float64
	Goroutines      int
}

// Run runs the load until opts.Duration after warmup, then stops every
// candidate and returns.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.MaxConns == 0 {
		opts.MaxConns = 16
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	res := Result{Options: opts}
	admin, err := sql.Open("mysql", opts.DSN)
	if err != nil {
		return res, err
	}
	defer admin.Close()

	// One Metrics per group: a Metrics takes one candidate per election.
	var regs []*prometheus.Registry
	var counting atomic.Bool
	var changes atomic.Int64
	count := func() {
		if counting.Load() {
			changes.Add(1)
		}
	}

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	groups := make([][]election.Election, opts.Candidates)
	cfgBase := election.Config{
		LeaseDuration: opts.Lease, Tuning: election.TuningConfig{RenewDeadline: opts.Lease * 7 / 10, RenewInterval: opts.Lease / 5, RetryInterval: opts.Lease / 5, QueryTimeout: opts.Lease / 5, DisableFastHandover: true},
		Callbacks: election.Callbacks{
			OnElected: func(ctx context.Context, _ election.Leadership) { count() },
			OnDemoted: func(election.Demotion) { count() },
		},
	}
	var dbs []*sql.DB
	defer func() {
		for _, db := range dbs {
			db.Close()
		}
	}()
	for g := range opts.Candidates {
		db, err := sql.Open("mysql", opts.DSN)
		if err != nil {
			return res, err
		}
		db.SetMaxOpenConns(opts.MaxConns)
		db.SetMaxIdleConns(opts.MaxConns)
		dbs = append(dbs, db)
		metrics := electionprom.NewMetrics()
		reg := prometheus.NewRegistry()
		if err := reg.Register(metrics); err != nil {
			return res, err
		}
		regs = append(regs, reg)
		var b *election.Batcher
		if opts.Batch {
			if b, err = election.NewBatcher(db, election.BatcherOptions{QueryTimeout: cfgBase.Tuning.QueryTimeout}); err != nil {
				return res, err
			}
		}
		for i := range opts.Elections {
			cfg := cfgBase
			cfg.Name = fmt.Sprintf("shard-%06d", i)
			cfg.ID = fmt.Sprintf("group-%d", g)
			cfg.Tuning.Batcher = b
			cfg.Metrics = metrics
			e, err := election.NewTable(db, cfg)
			if err != nil {
				return res, err
			}
			groups[g] = append(groups[g], e)
		}
	}
	// Start the candidates spread over one renew interval, as processes
	// that did not all start in the same millisecond.
	total := opts.Elections * opts.Candidates
	spread := cfgBase.Tuning.RenewInterval
	start := time.Now()
	n := 0
	for i := range opts.Elections {
		for g := range opts.Candidates {
			e := groups[g][i]
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := e.Run(rctx); err != nil {
					select {
					case errc <- fmt.Errorf("%s/%s: %w", e.Name(), e.ID(), err):
					default:
					}
					stop()
				}
			}()
			n++
			if want := time.Duration(float64(spread) * float64(n) / float64(total)); time.Since(start) < want {
				time.Sleep(want - time.Since(start))
			}
		}
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	// Warm up: wait until every election has one leader.
	led := func() (ok, multi int) {
		for i := range opts.Elections {
			c := 0
			for g := range opts.Candidates {
				if groups[g][i].IsLeader() {
					c++
				}
			}
			if c == 1 {
				ok++
			}
			if c > 1 {
				multi++
			}
		}
		return
	}
	warmEnd := time.Now().Add(opts.Warmup)
	for {
		ok, multi := led()
		res.Multi += multi
		res.Led = ok
		if ok == opts.Elections || time.Now().After(warmEnd) || rctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.WarmupTook = time.Since(start)
	opts.Logf("scale: %d elections x %d candidates (batch=%v): %d led after %v", opts.Elections, opts.Candidates, opts.Batch, res.Led, res.WarmupTook.Round(time.Millisecond))

	// Measure.
	h0, e0, err := heartbeats(regs)
	if err != nil {
		return res, err
	}
	s0, err := Status(ctx, admin)
	if err != nil {
		return res, err
	}
	cpu0, self0 := ProcCPU(opts.ServerPid), ProcCPU(os.Getpid())
	t0 := time.Now()
	counting.Store(true)
	end := t0.Add(opts.Duration)
	for time.Now().Before(end) && rctx.Err() == nil {
		time.Sleep(min(time.Second, time.Until(end)))
		_, multi := led()
		res.Multi += multi
	}
	counting.Store(false)
	secs := time.Since(t0).Seconds()
	cpu1, self1 := ProcCPU(opts.ServerPid), ProcCPU(os.Getpid())
	s1, err := Status(ctx, admin)
	if err != nil {
		return res, err
	}
	h1, e1, err := heartbeats(regs)
	if err != nil {
		return res, err
	}
	ok, _ := led()
	res.LeaderlessAt = opts.Elections - ok
	res.Changes = changes.Load()
	diff := h1.sub(h0)
	res.P50, res.P99 = diff.quantile(0.5), diff.quantile(0.99)
	res.Heartbeats = diff.count / secs
	res.Errors = e1 - e0
	if opts.ServerPid > 0 {
		res.ServerCPU = (cpu1 - cpu0) / secs
	}
	res.SelfCPU = (self1 - self0) / secs
	res.Statements = (s1["QUESTIONS"] - s0["QUESTIONS"]) / secs
	d := func(k string) float64 { return s1[k] - s0[k] }
	res.RowWrites = (d("HANDLER_UPDATE") + d("HANDLER_DELETE")) / secs
	res.WriteStatements = (d("COM_INSERT") + d("COM_UPDATE") + d("COM_DELETE") + d("COM_REPLACE")) / secs
	res.Commits = (s1["COM_COMMIT"] - s0["COM_COMMIT"]) / secs
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapMB = float64(ms.HeapInuse) / (1 << 20)
	res.Goroutines = runtime.NumGoroutine()
	select {
	case err := <-errc:
		return res, err
	default:
	}
	return res, nil
}

// hist is a cumulative histogram summed over elections.
type hist struct {
	bounds []float64
	counts []float64 // cumulative per bound
	count  float64
}

func (h hist) sub(o hist) hist {
	out := hist{bounds: h.bounds, counts: make([]float64, len(h.counts)), count: h.count - o.count}
	for i := range h.counts {
		out.counts[i] = h.counts[i]
		if i < len(o.counts) {
			out.counts[i] -= o.counts[i]
		}
	}
	return out
}

// quantile interpolates linearly within the bucket, as Prometheus's
// histogram_quantile does.
func (h hist) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * h.count
	prevBound, prevCount := 0.0, 0.0
	for i, b := range h.bounds {
		if h.counts[i] >= rank {
			if h.counts[i] == prevCount {
				return b
			}
			return prevBound + (b-prevBound)*(rank-prevCount)/(h.counts[i]-prevCount)
		}
		prevBound, prevCount = b, h.counts[i]
	}
	return math.Inf(1)
}

func heartbeats(regs []*prometheus.Registry) (hist, float64, error) {
	var mfs []*dto.MetricFamily
	for _, reg := range regs {
		m, err := reg.Gather()
		if err != nil {
			return hist{}, 0, err
		}
		mfs = append(mfs, m...)
	}
	var h hist
	var errs float64
	for _, mf := range mfs {
		switch mf.GetName() {
		case "sqlelect_heartbeat_duration_seconds":
			for _, m := range mf.GetMetric() {
				hg := m.GetHistogram()
				if h.bounds == nil {
					for _, b := range hg.GetBucket() {
						h.bounds = append(h.bounds, b.GetUpperBound())
					}
					h.counts = make([]float64, len(h.bounds))
				}
				for i, b := range hg.GetBucket() {
					h.counts[i] += float64(b.GetCumulativeCount())
				}
				h.count += float64(hg.GetSampleCount())
			}
		case "sqlelect_heartbeat_errors_total":
			for _, m := range mf.GetMetric() {
				errs += m.GetCounter().GetValue()
			}
		}
	}
	return h, errs, nil
}

// Status reads the server's global status counters (SHOW GLOBAL STATUS),
// numeric ones only, by upper-case name, within 10 s.
func Status(ctx context.Context, db *sql.DB) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[strings.ToUpper(k)] = f
		}
	}
	return out, rows.Err()
}

// ProcCPU is a process's user+system CPU time in seconds (0 when unknown).
func ProcCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+2:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// Table formats results as markdown rows.
func Table(rs []Result) string {
	var b strings.Builder
	b.WriteString("| elections × candidates | batched | window | led | changes | leaderless at end | heartbeat p50 / p99 | heartbeats/s | errors | server statements/s | write statements/s | rows updated/s | server CPU | bench CPU |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d × %d | %v | %v | %d | %d | %d | %s / %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f cores | %.2f cores |\n",
			r.Elections, r.Candidates, r.Batch, r.Duration, r.Led, r.Changes, r.LeaderlessAt,
			ms(r.P50), ms(r.P99), r.Heartbeats, r.Errors, r.Statements, r.WriteStatements, r.RowWrites, r.ServerCPU, r.SelfCPU)
	}
	return b.String()
}

func ms(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case math.IsInf(s, 1):
		return ">5 s"
	}
	return fmt.Sprintf("%.1f ms", s*1000)
}
