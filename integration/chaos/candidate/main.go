// Command candidate is one candidate process of the chaos suite
// (package integration/chaos): it campaigns in one election with the
// library, and prints one JSON line per event on stdout, by the wall clock of
// this machine, for the suite's checker:
//
//	{"event":"started","id":"c1.1","time":"…","pid":123}
//	{"event":"elected","id":"c1.1","term":42,"time":"…"}
//	{"event":"fenced_ok","id":"c1.1","term":42,"time":"…"}       a fenced write committed
//	{"event":"fenced_rejected","id":"c1.1","term":42,"time":"…"} Fenced said ErrNotLeader
//	{"event":"fenced_error","id":"c1.1","term":42,"time":"…","detail":"…"}
//	{"event":"demoted","id":"c1.1","term":42,"time":"…","until":"…","reason":"lease_lost"}
//	{"event":"stats","id":"c1.1","time":"…","errors":{"deadlock":3},"err_numbers":{"3101":3},"beats":120}
//	{"event":"resign","id":"c1.1","time":"…","detail":"…"}      SIGUSR1: Resign returned
//	{"event":"error","id":"c1.1","time":"…","detail":"…"}       Run failed
//	{"event":"exit","id":"c1.1","time":"…"}
//
// "time" is time.Now() when the line is written; "until" (demoted) is the
// last instant the candidate could have believed it led
// (election.Demotion.Until). While it believes it leads, with --fenced-every
// D > 0, it inserts a row (term, who, at = NOW(6)) into the table
// chaos_writes every D through Election.Fenced, under the leadership's
// context.
//
// "beats" (stats) is the number of heartbeats (follow or hold statements,
// failed ones included) Run has finished so far: while it grows, Run is
// campaigning; the suite's checker reports a candidate whose beats stop
// (stuck). "err_numbers" counts the failed heartbeats by MySQL error number
// (errnums.go). Stats are printed every --stats-every when the errors or the
// beats changed.
//
// SIGTERM (or SIGINT) ends Run's context: a leader resigns (the row is
// released) and the process exits 0. SIGUSR1 calls Election.Resign and the
// process goes on campaigning. SIGUSR2 makes its health check slow and
// flapping for --health-fault-for (see healthFault), or, with
// --session-state-file, leaves session state on its pool (sessionstate.go). A Run error exits 2.
//
// With --elections N it campaigns in N elections (--election, then
// --election with "-2", "-3", … appended), with --batch through one
// election.Batcher; its events of one election then name it
// ("election":"…") and its fenced writes fill chaos_writes.election. With
// --shards N it joins shard group --election of N shards instead (package
// shards), and its events name each shard's election (--election + "/0",
// "/1", …).
//
//	go build -o /tmp/candidate ./integration/chaos/candidate
//	/tmp/candidate --backend table --dsn 'root@tcp(127.0.0.1:3306)/db' --election e --id c1
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionprom"
	"github.com/sqlelect/sqlelect/integration/chaos"
	"github.com/sqlelect/sqlelect/integration/internal/groupconn"
	"github.com/sqlelect/sqlelect/shards"
)

// line is one JSON line: the suite's checker reads it back as a
// chaos.Record.
type line = chaos.Record

type printer struct {
	mu  sync.Mutex
	id  string
	enc *json.Encoder
}

func (p *printer) emit(l line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.ID = p.id
	l.Time = time.Now().Round(0)
	_ = p.enc.Encode(l)
}

func main() {
	backend := flag.String("backend", "table", "election backend: table or lock")
	dsn := flag.String("dsn", "", "go-sql-driver/mysql DSN (required); with --group, the members' DSNs separated by semicolons")
	group := flag.Bool("group", false, "--dsn lists the members of a Group Replication group: connect to the writable one (package groupconn)")
	name := flag.String("election", "chaos", "election name")
	id := flag.String("id", "", "candidate id (required)")
	table := flag.String("table", "", "election table (default service_election)")
	lease := flag.Duration("lease", 1500*time.Millisecond, "lease duration")
	renewDeadline := flag.Duration("renew-deadline", time.Second, "renew deadline")
	renewInterval := flag.Duration("renew-interval", 200*time.Millisecond, "renew interval")
	retryInterval := flag.Duration("retry-interval", 200*time.Millisecond, "retry interval")
	lockDelay := flag.Duration("lock-delay", 0, "lock delay (0: the library's default, one lease)")
	queryTimeout := flag.Duration("query-timeout", 500*time.Millisecond, "query timeout")
	fencedEvery := flag.Duration("fenced-every", 0, "while leading, attempt a fenced write into chaos_writes this often (0: never)")
	statsEvery := flag.Duration("stats-every", time.Second, "print heartbeat error counts this often when they changed (0: only at exit)")
	fastHandover := flag.Bool("fast-handover", true, "table backend: followers wait for the holder's handover lock (false sets Config.Tuning.DisableFastHandover)")
	elections := flag.Int("elections", 1, "campaign in this many elections: --election, then --election with -2, -3, … appended")
	nShards := flag.Int("shards", 0, "join shard group --election with this many shards (package shards) instead of campaigning in elections")
	batch := flag.Bool("batch", false, "table backend: run the elections through one election.Batcher")
	batchLinger := flag.Duration("batch-linger", 0, "the Batcher's Linger (0: its default)")
	healthTimeout := flag.Duration("health-timeout", 500*time.Millisecond, "Config.Health.Timeout")
	healthFaultFor := flag.Duration("health-fault-for", 3*time.Second, "how long a SIGUSR2 makes the health check slow and flapping")
	flag.StringVar(&sessionStateFile, "session-state-file", "", "on SIGUSR2, leave the statements of this file on the pool's idle connections (see sessionstate.go)")
	flag.DurationVar(&sessionStateFor, "session-state-for", 2*time.Second, "KILL the connections --session-state-file set this long after")
	flag.Parse()
	if *dsn == "" || *id == "" {
		fmt.Fprintln(os.Stderr, "candidate: --dsn and --id are required")
		os.Exit(2)
	}
	p := &printer{id: *id, enc: json.NewEncoder(os.Stdout)}
	open := func() (*sql.DB, error) { return sql.Open("mysql", *dsn) }
	if *group {
		open = func() (*sql.DB, error) {
			cfgs, err := groupconn.ParseDSNs(*dsn)
			if err != nil {
				return nil, err
			}
			c, err := groupconn.New(cfgs)
			if err != nil {
				return nil, err
			}
			return sql.OpenDB(c), nil
		}
	}
	hf := &healthFault{timeout: *healthTimeout, lasts: *healthFaultFor}
	sigCtx, stopSig := context.WithCancel(context.Background())
	defer stopSig()
	if sessionStateFile == "" {
		hf.watch(sigCtx) // else SIGUSR2 is the session-state fault's (sessionstate.go)
	}
	err := run(p, *backend, open, election.Config{
		Name: *name, ID: *id, Table: *table, LeaseDuration: *lease, Health: election.HealthConfig{Check: hf.check, Timeout: *healthTimeout},
		Tuning: election.TuningConfig{RenewDeadline: *renewDeadline, RenewInterval: *renewInterval, RetryInterval: *retryInterval, LockDelay: *lockDelay, QueryTimeout: *queryTimeout, DisableFastHandover: !*fastHandover},
		Value:  *id,
	}, *elections, *nShards, *batch, *batchLinger, *fencedEvery, *statsEvery)
	if err != nil {
		p.emit(line{Event: "error", Detail: err.Error()})
		fmt.Fprintln(os.Stderr, "candidate:", err)
		os.Exit(2)
	}
	p.emit(line{Event: "exit"})
}

// The session_state fault's flags (sessionstate.go).
var (
	sessionStateFile string
	sessionStateFor  time.Duration
)

// electionName is the name of the i-th election (from 0) of the process.
func electionName(name string, i int) string {
	if i == 0 {
		return name
	}
	return fmt.Sprintf("%s-%d", name, i+1)
}

func run(p *printer, backend string, open func() (*sql.DB, error), base election.Config, n, nShards int, batch bool, linger, fencedEvery, statsEvery time.Duration) error {
	db, err := open()
	if err != nil {
		return err
	}
	defer db.Close()
	metrics := electionprom.NewMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	base.Metrics = metrics
	nums := &numberCounts{n: map[string]float64{}}
	base.Tuning.Logger = slog.New(errNumbers{inner: slog.Default().Handler(), c: nums})
	var campaigning atomic.Bool // a Run's preflight passed: it has seen the row or been elected
	onElected := func(ctx context.Context, tag string, l election.Leadership) {
		campaigning.Store(true)
		p.emit(line{Event: "elected", Term: l.Term, Election: tag})
		if fencedEvery > 0 {
			writeFenced(ctx, p, l, base.ID, tag, fencedEvery)
		}
		<-ctx.Done()
	}
	onDemoted := func(tag string, d election.Demotion) {
		p.emit(line{Event: "demoted", Term: d.Term, Until: d.Until, Reason: string(d.Reason), Election: tag})
	}
	if nShards > 0 && (backend != "table" || batch || n > 1) {
		return fmt.Errorf("--shards runs the table backend's shard group: not with --backend %s, --batch or --elections", backend)
	}
	var es []election.Election
	campaign := func(ctx context.Context) error {
		return shards.Run(ctx, db, shards.Options{Group: base.Name, Shards: nShards, Config: base,
			OnElected: func(ctx context.Context, key string, l election.Leadership) {
				onElected(ctx, base.Name+"/"+key, l)
			},
			OnDemoted: func(key string, d election.Demotion) { onDemoted(base.Name+"/"+key, d) }})
	}
	if nShards <= 0 {
		if es, err = newElections(db, backend, base, n, batch, linger, onElected, onDemoted, &campaigning); err != nil {
			return err
		}
		campaign = func(ctx context.Context) error { return runAll(ctx, es) }
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p.emit(line{Event: "started", Pid: os.Getpid()})
	watchSessionState(ctx, p, db, sessionStateFile, sessionStateFor, campaigning.Load)

	statsDone := make(chan struct{})
	var last map[string]float64
	var lastNums map[string]float64
	var lastBeats uint64
	printStats := func() {
		// The numbers first: a failed heartbeat is counted in the
		// metrics before it is logged.
		ns := nums.snapshot()
		errs, beats := errorCounts(reg)
		if !equal(errs, last) || !equal(ns, lastNums) || beats != lastBeats {
			last, lastNums, lastBeats = errs, ns, beats
			p.emit(line{Event: "stats", Errors: errs, ErrNumbers: ns, Beats: beats})
		}
	}
	defer resignOnUSR1(ctx, p, es, n > 1 || batch)()
	go func() {
		defer close(statsDone)
		if statsEvery <= 0 {
			<-ctx.Done()
			return
		}
		t := time.NewTicker(statsEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				printStats()
			}
		}
	}()
	err = campaign(ctx)
	stop()
	<-statsDone
	printStats()
	return err
}

// newElections returns n elections (see electionName) on backend, through
// one Batcher when batch is set, whose callbacks are onElected and
// onDemoted with the election's name when there are several or a Batcher.
func newElections(db *sql.DB, backend string, base election.Config, n int, batch bool, linger time.Duration,
	onElected func(context.Context, string, election.Leadership), onDemoted func(string, election.Demotion), campaigning *atomic.Bool) ([]election.Election, error) {
	if batch {
		if backend != "table" {
			return nil, fmt.Errorf("--batch needs the table backend")
		}
		b, err := election.NewBatcher(db, election.BatcherOptions{Table: base.Table, QueryTimeout: base.Tuning.QueryTimeout, Linger: linger})
		if err != nil {
			return nil, err
		}
		base.Tuning.Batcher = b
	}
	multi := n > 1 || batch
	es := make([]election.Election, max(n, 1))
	for i := range es {
		cfg := base
		cfg.Name = electionName(base.Name, i)
		tag := ""
		if multi {
			tag = cfg.Name // the records say which election
		}
		cfg.Callbacks = election.Callbacks{
			OnLeaderChanged: func(election.Record) { campaigning.Store(true) },
			OnElected:       func(ctx context.Context, l election.Leadership) { onElected(ctx, tag, l) },
			OnDemoted:       func(d election.Demotion) { onDemoted(tag, d) },
		}
		var err error
		switch backend {
		case "table":
			es[i], err = election.NewTable(db, cfg)
		case "lock":
			es[i], err = election.NewLock(db, cfg)
		default:
			err = fmt.Errorf("unknown backend %q (table or lock)", backend)
		}
		if err != nil {
			return nil, err
		}
	}
	return es, nil
}

// runAll runs every election until ctx ends, and returns their errors.
func runAll(ctx context.Context, es []election.Election) error {
	errs := make([]error, len(es))
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Go(func() {
			if err := e.Run(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", e.Name(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// resignOnUSR1 calls Resign on every election at each SIGUSR1 until ctx
// ends; tagged, its records name the election. The returned func stops
// catching SIGUSR1 (run returns).
func resignOnUSR1(ctx context.Context, p *printer, es []election.Election, tagged bool) (stop func()) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-usr1:
				for _, e := range es {
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err := e.Resign(rctx)
					cancel()
					tag := ""
					if tagged {
						tag = e.Name()
					}
					p.emit(line{Event: "resign", Detail: errString(err), Election: tag})
				}
			}
		}
	}()
	return func() { signal.Stop(usr1) }
}

// writeFenced attempts a fenced write every interval until ctx (the
// leadership's) ends. The row's at is the database clock inside the fenced
// transaction, after the check.
func writeFenced(ctx context.Context, p *printer, l election.Leadership, id, tag string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		term := l.Term
		if term != 0 {
			err := l.Fenced(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO chaos_writes (term, who, election, at) VALUES (?, ?, ?, NOW(6))", term, id, tag)
				return err
			})
			switch {
			case err == nil:
				p.emit(line{Event: "fenced_ok", Term: term, Election: tag})
			case errors.Is(err, election.ErrNotLeader):
				p.emit(line{Event: "fenced_rejected", Term: term, Election: tag})
			case ctx.Err() != nil:
				// Leadership ended during the write: not a rejection.
			default:
				p.emit(line{Event: "fenced_error", Term: term, Detail: err.Error(), Election: tag})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errorCounts reads sqlelect_heartbeat_errors_total by kind, and the
// number of heartbeats (the sample count of
// sqlelect_heartbeat_duration_seconds).
func errorCounts(reg *prometheus.Registry) (map[string]float64, uint64) {
	out := map[string]float64{}
	var beats uint64
	mfs, err := reg.Gather()
	if err != nil {
		return out, 0
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "sqlelect_heartbeat_errors_total":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" {
						out[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		case "sqlelect_heartbeat_duration_seconds":
			for _, m := range mf.GetMetric() {
				beats += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return out, beats
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
