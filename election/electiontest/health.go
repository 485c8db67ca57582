package electiontest

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionhttp"
	"github.com/sqlelect/sqlelect/election/electionprom"
)

// errUnhealthy is what the suite's health checks fail with.
var errUnhealthy = errors.New("electiontest: unhealthy")

// startHealthChecked starts n candidates whose Config.Health.Check fails
// while their flag is false; all start healthy. checks[i] counts the
// checks of candidate i that failed.
func (c *cluster) startHealthChecked(n int) (ms []*member, flags []*atomic.Bool, failed []*atomic.Int64) {
	ms, flags, failed = make([]*member, n), make([]*atomic.Bool, n), make([]*atomic.Int64, n)
	for i := range ms {
		ok, bad := &atomic.Bool{}, &atomic.Int64{}
		ok.Store(true)
		flags[i], failed[i] = ok, bad
		ms[i] = c.start(idN(i), func(cfg *election.Config) {
			cfg.Health.Check = func(context.Context) error {
				if !ok.Load() {
					bad.Add(1)
					return errUnhealthy
				}
				return nil
			}
		}, nil)
	}
	return ms, flags, failed
}

func idN(i int) string { return "node-" + string(rune('1'+i)) }

// testUnhealthyHandsOver: a leader whose health check fails stands down at
// its next renewal and releases the row, so that a follower leads within a
// renew interval and a handover; it does not lead again while unhealthy.
func testUnhealthyHandsOver(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	ms, flags, failed := c.startHealthChecked(3)
	old, _ := c.waitLeader(takeoverBound, nil)
	oldTerm := old.e.Term()
	c.awaitFollowing(ms, old) // the followers campaign: one takes over at its next look
	var oldFailed *atomic.Int64
	for i, m := range ms {
		if m == old {
			flags[i].Store(false)
			oldFailed = failed[i]
		}
	}
	start := time.Now()
	nl, at := c.waitLeader(RenewInterval+handoverBound, old)
	t.Logf("handover to %s %v after %s's health check began failing", nl.id, at.Sub(start).Round(time.Millisecond), old.id)
	// The unhealthy candidate checks again (once a retry interval), and
	// does not campaign: five more failed checks.
	n := oldFailed.Load()
	if !poll(20*RetryInterval+takeoverBound, 5*time.Millisecond, func() bool { return oldFailed.Load() >= n+5 }) {
		t.Fatalf("%s checked its health %d times since the handover, want 5", old.id, oldFailed.Load()-n)
	}
	for _, iv := range c.rec.elections() {
		switch {
		case iv.id == old.id && iv.term == oldTerm && iv.reason != election.ReasonUnhealthy:
			t.Errorf("%s demoted with %q, want %q", old.id, iv.reason, election.ReasonUnhealthy)
		case iv.id == old.id && iv.term != oldTerm:
			t.Errorf("%s led again (term %d) while unhealthy", old.id, iv.term)
		}
	}
}

// testFlappingHealth: health checks that fail at random, on every
// candidate, make leadership change often but never overlap (the sampler
// and the recorder check that in t.Cleanup); once the checks pass again,
// one candidate leads.
func testFlappingHealth(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	var flapping atomic.Bool
	flapping.Store(true)
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(rand.Uint64(), 0))
	for i := 0; i < 3; i++ {
		c.start(idN(i), func(cfg *election.Config) {
			cfg.Health.Check = func(context.Context) error {
				mu.Lock()
				bad := flapping.Load() && rnd.Float64() < 0.3
				mu.Unlock()
				if bad {
					return errUnhealthy
				}
				return nil
			}
		}, nil)
	}
	// Flap until leaderships have ended unhealthy flappingDemotions times
	// (about 5 s at the checks' 30% failure rate).
	const flappingDemotions = 5
	unhealthy := func() int {
		n := 0
		for _, iv := range c.rec.elections() {
			if iv.reason == election.ReasonUnhealthy {
				n++
			}
		}
		return n
	}
	began := time.Now()
	if !poll(30*time.Second, 10*time.Millisecond, func() bool { return unhealthy() >= flappingDemotions }) {
		t.Errorf("%d leaders stood down as unhealthy in 30 s of flapping checks, want %d", unhealthy(), flappingDemotions)
	}
	flapping.Store(false)
	n := unhealthy()
	nl, _ := c.waitLeader(takeoverBound, nil)
	t.Logf("%d leaderships, %d ended unhealthy, in %v of flapping; %s leads after", len(c.rec.elections()), n, time.Since(began).Round(time.Millisecond), nl.id)
}

// testWedgedReported: an OnElected that does not return when its context
// is cancelled holds up the campaign loop once the leadership ends (here:
// deposed by an operator): electionhttp.HealthzHandler answers 503 and sqlelect_wedged
// is 1 within the renew deadline past due, and both recover once OnElected
// returns.
func testWedgedReported(t *testing.T, s Suite) {
	c := newCluster(t, s, true)
	unstick := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(unstick) }) }) // before finish stops the candidates
	metrics := electionprom.NewMetrics()
	reg := prometheus.NewRegistry()
	if err := reg.Register(metrics); err != nil {
		t.Fatal(err)
	}
	m := c.start("node-1", func(cfg *election.Config) {
		cfg.Metrics = metrics
		elected := cfg.Callbacks.OnElected
		cfg.Callbacks.OnElected = func(ctx context.Context, l election.Leadership) {
			elected(ctx, l)
			<-unstick // a bug: leader-only work that ignores its context
		}
	}, nil)
	c.waitLeader(takeoverBound, nil)
	healthz := func() (int, string) {
		rec := httptest.NewRecorder()
		electionhttp.HealthzHandler(m.e).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	wedged := func() float64 { return gauge(t, reg, "sqlelect_wedged") }
	if code, body := healthz(); code != http.StatusOK || wedged() != 0 {
		t.Fatalf("healthz %d %q while leading", code, body)
	}
	if _, err := ops(c.admin).Assume(c.ctx, c.name, "ghost"); err != nil {
		t.Fatal(err)
	}
	deposed := time.Now()
	var code int
	var body string
	if !poll(RenewInterval+RenewDeadline+time.Second, 5*time.Millisecond, func() bool {
		code, body = healthz()
		return code == http.StatusServiceUnavailable && strings.HasPrefix(body, "wedged") && wedged() == 1
	}) {
		t.Fatalf("not reported wedged %v after the deposition: healthz %d %q", time.Since(deposed), code, body)
	}
	t.Logf("reported wedged %v after the deposition: %s", time.Since(deposed).Round(time.Millisecond), strings.TrimSpace(body))
	once.Do(func() { close(unstick) })
	if !poll(10*time.Second, 5*time.Millisecond, func() bool {
		code, _ := healthz()
		return code == http.StatusOK && wedged() == 0
	}) {
		t.Fatal("still wedged after OnElected returned")
	}
}

// gauge reads the value of the gauge series name from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s series", name)
	return 0
}
