package election_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionprom"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// smallPool runs table-backend candidates, with the fast handover on, on
// *sql.DBs whose pools the test sizes.
type smallPool struct {
	t       *testing.T
	ctx     context.Context
	dsn     string
	metrics *electionprom.Metrics
	reg     *prometheus.Registry

	mu    sync.Mutex
	cands map[string]*poolCand // by election name + id
}

type poolCand struct {
	name, id string
	e        election.Election
	rec      *leaderships
	cancel   context.CancelFunc
	done     chan error
}

func newSmallPool(t *testing.T, timeout time.Duration) *smallPool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	p := &smallPool{t: t, ctx: ctx, dsn: dsn, metrics: electionprom.NewMetrics(), reg: prometheus.NewRegistry(),
		cands: map[string]*poolCand{}}
	p.reg.MustRegister(p.metrics)
	t.Cleanup(p.stopAll)
	return p
}

// pool opens a *sql.DB of at most n connections, as a process would.
func (p *smallPool) pool(n int) *sql.DB {
	db := testdb.Open(p.t, p.dsn)
	db.SetMaxOpenConns(n)
	return db
}

// start runs candidate id of election name on db; rec records the
// election's leaderships (one per election name). Candidate "a" of each
// election records the metrics (a Metrics takes one candidate per name).
func (p *smallPool) start(db *sql.DB, name, id string, rec *leaderships) *poolCand {
	p.t.Helper()
	cfg := election.Config{
		Name: name, ID: id, LeaseDuration: tLease, Tuning: election.TuningConfig{RenewDeadline: tRenewDeadline, RenewInterval: tRenewInterval, RetryInterval: tRetryInterval, QueryTimeout: tQueryTimeout},
		Callbacks: rec.callbacks(id),
	}
	if id == "a" {
		cfg.Metrics = p.metrics
	}
	e, err := election.NewTable(db, cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(p.ctx)
	c := &poolCand{name: name, id: id, e: e, rec: rec, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- e.Run(ctx) }()
	p.mu.Lock()
	p.cands[name+"/"+id] = c
	p.mu.Unlock()
	return c
}

func (p *smallPool) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.cands {
		c.cancel()
		select {
		case err := <-c.done:
			if err != nil {
				p.t.Errorf("%s/%s: Run returned %v", c.name, c.id, err)
			}
		case <-time.After(10 * time.Second):
			p.t.Errorf("%s/%s: Run did not return within 10s of cancel", c.name, c.id)
		}
	}
	p.cands = map[string]*poolCand{}
}

// leaders returns the candidates of election name that lead now.
func (p *smallPool) leaders(name string) []*poolCand {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*poolCand
	for _, c := range p.cands {
		if c.name == name && c.e.IsLeader() {
			out = append(out, c)
		}
	}
	return out
}

// waitLeaders waits until every election in names has exactly one leader.
func (p *smallPool) waitLeaders(within time.Duration, names ...string) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		missing := ""
		for _, n := range names {
			if len(p.leaders(n)) != 1 {
				missing = n
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("election %s: no single leader within %v", missing, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// keepLeading samples every election in names for d and fails the test
// unless each had one leader in every sample and no change of leadership.
func (p *smallPool) keepLeading(d time.Duration, recs map[string]*leaderships) {
	p.t.Helper()
	samples := map[string]int{}
	led := map[string]int{}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for n := range recs {
			samples[n]++
			if len(p.leaders(n)) == 1 {
				led[n]++
			}
		}
	}
	for n, rec := range recs {
		rec.mu.Lock()
		changes := len(rec.ivs)
		rec.mu.Unlock()
		p.t.Logf("election %s: led in %d of %d samples over %v; %d leadership(s)", n, led[n], samples[n], d, changes)
		if led[n] != samples[n] || changes != 1 {
			p.t.Errorf("election %s: led in %d of %d samples, %d leadership(s); want every sample, one leadership", n, led[n], samples[n], changes)
		}
	}
}

// skipped returns sqlelect_fast_handover_skipped_total of election name.
func (p *smallPool) skipped(name string) float64 {
	p.t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		p.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sqlelect_fast_handover_skipped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "election" && l.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestFastHandoverSmallPool: the table backend's handover hint takes a
// connection of the caller's pool (the holder keeps one; a waiting follower
// blocks on one). On a pool with no connection to spare it must degrade to
// polling, never starve the elections' own statements: with
// SetMaxOpenConns(1) one election, then several candidates sharing that
// pool, elect and keep leading; with a pool of 2, two elections both lead.
func TestFastHandoverSmallPool(t *testing.T) {
	t.Run("Pool1", func(t *testing.T) {
		p := newSmallPool(t, 60*time.Second)
		name := "pool-" + randHex(4)
		rec := &leaderships{}
		recs := map[string]*leaderships{name: rec}
		db := p.pool(1)
		p.start(db, name, "a", rec)
		p.waitLeaders(3*tLease, name)
		p.keepLeading(2*time.Second, recs)
		// More candidates: one on the same pool of 1, one on a pool of 1
		// of its own (another process).
		p.start(db, name, "b", rec)
		p.start(p.pool(1), name, "c", rec)
		p.keepLeading(2*time.Second, recs)
		if n := p.skipped(name); n == 0 {
			t.Errorf("sqlelect_fast_handover_skipped_total{election=%q} = 0, want the skips counted", name)
		} else {
			t.Logf("fast handover skipped %v times", n)
		}
		p.stopAll()
		rec.check(t)
	})
	t.Run("Pool2TwoElections", func(t *testing.T) {
		p := newSmallPool(t, 60*time.Second)
		db := p.pool(2)
		recs := map[string]*leaderships{}
		var names []string
		for i := range 2 {
			name := fmt.Sprintf("pool-%d-%s", i, randHex(4))
			recs[name] = &leaderships{}
			names = append(names, name)
			p.start(db, name, "a", recs[name])
		}
		p.waitLeaders(3*tLease, names...)
		p.keepLeading(3*time.Second, recs)
		p.stopAll()
		for _, rec := range recs {
			rec.check(t)
		}
	})
}
