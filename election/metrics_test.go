package election

import (
	"context"
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// The metrics tests drive a candidate with the fake backend in a synctest
// bubble (see candidate_test.go) and read what a registry of the caller's
// would serve.
//
// They gather from the registry directly rather than with
// prometheus/testutil: testutil imports github.com/kylelemons/godebug, which
// is not in go.sum. lintMetrics below is testutil.CollectAndLint without it (a
// pedantic registry, then promlint).

// metricsScrape is one Gather of a registry, indexed for lookups.
type metricsScrape map[string]*dto.MetricFamily

func gatherMetrics(t *testing.T, g prometheus.Gatherer) metricsScrape {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	s := metricsScrape{}
	for _, mf := range mfs {
		s[mf.GetName()] = mf
	}
	return s
}

// find returns the series of family name whose labels include want
// ("k=v" pairs), or nil.
func (s metricsScrape) find(name string, want ...string) *dto.Metric {
	mf := s[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			ok = ok && labels[k] == v
		}
		if ok {
			return m
		}
	}
	return nil
}

// value is the value of a gauge or counter series; it fails t when the
// series is missing.
func (s metricsScrape) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := s.find(name, labels...)
	switch {
	case m == nil:
		t.Fatalf("%s%v: no such series; have %v", name, labels, s.names())
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	t.Fatalf("%s%v: neither a gauge nor a counter", name, labels)
	return 0
}

func (s metricsScrape) names() []string {
	var n []string
	for k := range s {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// want checks the value of one series, to a nanosecond.
func (s metricsScrape) want(t *testing.T, v float64, name string, labels ...string) {
	t.Helper()
	if got := s.value(t, name, labels...); math.Abs(got-v) > 1e-9 {
		t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

// histogram returns the sample count and sum of a histogram series, and its
// cumulative bucket counts by upper bound.
func (s metricsScrape) histogram(t *testing.T, name string, labels ...string) (uint64, float64, map[float64]uint64) {
	t.Helper()
	m := s.find(name, labels...)
	if m == nil || m.Histogram == nil {
		t.Fatalf("%s%v: no such histogram; have %v", name, labels, s.names())
	}
	buckets := map[float64]uint64{}
	for _, b := range m.Histogram.GetBucket() {
		buckets[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum(), buckets
}

// lintMetrics registers c on a new pedantic registry (which also checks that what
// Collect sends matches Describe), gathers, and runs promlint: what
// testutil.CollectAndLint does.
func lintMetrics(t *testing.T, c prometheus.Collector) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("register on a pedantic registry: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("pedantic gather: %v", err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// metricsHarness is a harness whose candidate records into m, registered on
// a registry of its own.
func metricsHarness(t *testing.T, b *fakeBackend) (*harness, *Metrics, *prometheus.Registry) {
	t.Helper()
	m := NewMetrics()
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, b, func(c *Config) { c.Metrics = m })
	return h, m, reg
}

// renewalsOf reads how many renewals b was asked for.
func renewalsOf(b *fakeBackend) int { b.mu.Lock(); defer b.mu.Unlock(); return b.renewals }

// Election, renewals, failed renewals of several kinds, and the lease lost
// by the clock: every series of the collector, with its value at each step.
func TestMetricsElectionRenewalDemotion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const name = "election=unit"
		b := &fakeBackend{followB: beat{held: true, term: 7}}
		h, m, reg := metricsHarness(t, b)

		// T0: elected at once (an expired row: no lock delay). The loop waits
		// for the renewal at T0+2s, the watchdog for the deadline at T0+6s.
		synctest.Wait()
		b.set(func(f *fakeBackend) { f.followB = beat{} }) // nobody else to win once demoted
		s := gatherMetrics(t, reg)
		s.want(t, 1, "sqlelect_leader", name)
		s.want(t, 7, "sqlelect_term", name)
		s.want(t, tRenewDeadline.Seconds(), "sqlelect_lease_remaining_seconds", name)
		s.want(t, 0, "sqlelect_last_renewal_age_seconds", name)
		s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=elected")
		for _, m := range s["sqlelect_heartbeat_errors_total"].GetMetric() {
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("heartbeat errors before any failed: %v", m)
			}
		}

		// The gauges follow the clock between heartbeats.
		advance(time.Second)
		s = gatherMetrics(t, reg)
		s.want(t, 5, "sqlelect_lease_remaining_seconds", name)
		s.want(t, 1, "sqlelect_last_renewal_age_seconds", name)

		// T0+2s: a renewal that takes 40ms. The lease now ends at T0+8s.
		took := 40 * time.Millisecond // how long the next renewals take
		b.set(func(f *fakeBackend) {
			f.renewB = func(hold uint64) (beat, error) {
				time.Sleep(40 * time.Millisecond)
				return beat{held: true, term: hold}, nil
			}
		})
		step := func(d time.Duration, renewals int) {
			t.Helper()
			// The renewal due after d takes took: look once it is done.
			advance(d + took)
			if n := renewalsOf(b); n != renewals {
				t.Fatalf("%d renewals, want %d", n, renewals)
			}
		}
		step(time.Second, 1)
		s = gatherMetrics(t, reg)
		s.want(t, 1, "sqlelect_leader", name)
		s.want(t, 8-2.04, "sqlelect_lease_remaining_seconds", name)
		s.want(t, 0.04, "sqlelect_last_renewal_age_seconds", name)
		count, sum, buckets := s.histogram(t, "sqlelect_heartbeat_duration_seconds", name)
		if count != 1 || math.Abs(sum-0.04) > 1e-9 || buckets[0.025] != 0 || buckets[0.05] != 1 {
			t.Errorf("heartbeat duration: count %d sum %v buckets %v, want one 40ms sample", count, sum, buckets)
		}

		// Failed renewals, counted by kind: a deadlock (T0+4.04s), a timeout
		// (T0+5.05s), then connection errors (no time spent: not observed in
		// the histogram) until the lease runs out at T0+8s.
		fail := func(err error, d time.Duration) {
			took = d
			b.set(func(f *fakeBackend) {
				f.renewB = func(uint64) (beat, error) { time.Sleep(d); return beat{}, err }
			})
		}
		fail(&mysql.MySQLError{Number: erLockDeadlock, Message: "Deadlock found"}, 10*time.Millisecond)
		step(2*time.Second, 2)
		fail(context.DeadlineExceeded, 10*time.Millisecond)
		step(time.Second, 3)
		s = gatherMetrics(t, reg)
		s.want(t, 1, "sqlelect_leader", name) // failed renewals do not end leadership; the clock does
		s.want(t, 8-5.06, "sqlelect_lease_remaining_seconds", name)
		s.want(t, 1, "sqlelect_heartbeat_errors_total", name, "kind=deadlock")
		s.want(t, 1, "sqlelect_heartbeat_errors_total", name, "kind=timeout")

		fail(errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"), 0)
		step(time.Second, 4)            // T0+6.06s
		step(time.Second, 5)            // T0+7.06s; next look at the deadline
		advance(940 * time.Millisecond) // T0+8s: the lease is lost
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "demoted:lease_lost") })
		synctest.Wait() // following again

		s = gatherMetrics(t, reg)
		s.want(t, 0, "sqlelect_leader", name)
		s.want(t, 0, "sqlelect_term", name)
		s.want(t, 0, "sqlelect_lease_remaining_seconds", name)
		s.want(t, 6, "sqlelect_last_renewal_age_seconds", name) // since the renewal sent at T0+2s
		s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=elected")
		s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=lease_lost")
		s.want(t, 1, "sqlelect_heartbeat_errors_total", name, "kind=deadlock")
		s.want(t, 1, "sqlelect_heartbeat_errors_total", name, "kind=timeout")
		s.want(t, 2, "sqlelect_heartbeat_errors_total", name, "kind=connection")
		s.want(t, 1, "sqlelect_heartbeat_errors_total", name, "kind=lease_lost")
		count, sum, _ = s.histogram(t, "sqlelect_heartbeat_duration_seconds", name)
		if count != 3 || math.Abs(sum-0.06) > 1e-9 {
			t.Errorf("heartbeat duration: count %d sum %v, want 3 samples summing to 60ms", count, sum)
		}

		// Every family, with labels by convention: what CollectAndLint checks.
		lintMetrics(t, m)
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// Resignation and deposition are counted by reason; once Run returns, the
// candidate's gauges are gone and the counters stay.
func TestMetricsResignedAndDeposed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const name = "election=unit"
		b := &fakeBackend{followB: beat{held: true, term: 3}}
		h, _, reg := metricsHarness(t, b)
		synctest.Wait()

		// Deposed: the renewal finds the row taken.
		b.set(func(f *fakeBackend) {
			f.followB = beat{}
			f.renewB = func(uint64) (beat, error) { return beat{}, nil }
		})
		advance(tRenew)
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "demoted:deposed") })
		s := gatherMetrics(t, reg)
		s.want(t, 0, "sqlelect_leader", name)
		s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=deposed")

		// Elected again (term 4), then shut down: resigned.
		b.set(func(f *fakeBackend) { f.followB, f.renewB = beat{held: true, term: 4}, nil })
		synctest.Wait()
		advance(tRetry)
		waitFor(t, func() bool { return h.c.IsLeader() })
		s = gatherMetrics(t, reg)
		s.want(t, 1, "sqlelect_leader", name)
		s.want(t, 4, "sqlelect_term", name)
		s.want(t, 2, "sqlelect_leadership_changes_total", name, "reason=elected")
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		s = gatherMetrics(t, reg)
		s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=resigned")
		s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=deposed")
		for _, g := range []string{"sqlelect_leader", "sqlelect_term", "sqlelect_lease_remaining_seconds", "sqlelect_last_renewal_age_seconds"} {
			if s[g] != nil {
				t.Errorf("%s still served after Run returned: %v", g, s[g])
			}
		}
	})
}

// A registered Metrics serves the changes counter at zero as soon as Run
// starts (so rate() works from the first metricsScrape), before any leadership.
func TestMetricsFollowerFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const name = "election=unit"
		b := &fakeBackend{} // never wins
		_, m, reg := metricsHarness(t, b)
		synctest.Wait()
		s := gatherMetrics(t, reg)
		s.want(t, 0, "sqlelect_leader", name)
		s.want(t, 0, "sqlelect_term", name)
		s.want(t, 0, "sqlelect_lease_remaining_seconds", name)
		s.want(t, 0, "sqlelect_leadership_changes_total", name, "reason=elected")
		// Every series the shipped alerts (monitoring/) use exists at 0.
		for _, r := range []string{"resigned", "lease_lost", "deposed", "error", "unhealthy", "transferred"} {
			s.want(t, 0, "sqlelect_leadership_changes_total", name, "reason="+r)
		}
		for _, k := range []string{"timeout", "connection", "deadlock", "lock_wait", "server", "access", "schema", "lease_lost"} {
			s.want(t, 0, "sqlelect_heartbeat_errors_total", name, "kind="+k)
		}
		if s["sqlelect_last_renewal_age_seconds"] != nil {
			t.Errorf("last renewal age served before any renewal")
		}
		lintMetrics(t, m)
	})
}

// Several elections share one Metrics, each series labelled by its name.
func TestMetricsSharedByElections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMetrics()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		ha := newHarness(t, &fakeBackend{followB: beat{held: true, term: 11}}, func(c *Config) { c.Name, c.Metrics = "a", m })
		hb := newHarness(t, &fakeBackend{}, func(c *Config) { c.Name, c.Metrics = "b", m })
		synctest.Wait()
		synctest.Wait()
		s := gatherMetrics(t, reg)
		s.want(t, 1, "sqlelect_leader", "election=a")
		s.want(t, 11, "sqlelect_term", "election=a")
		s.want(t, 0, "sqlelect_leader", "election=b")
		s.want(t, 0, "sqlelect_term", "election=b")
		if n := len(s["sqlelect_leader"].GetMetric()); n != 2 {
			t.Errorf("%d sqlelect_leader series, want 2", n)
		}
		for _, h := range []*harness{ha, hb} {
			if err := h.stop(); err != nil {
				t.Error(err)
			}
		}
	})
}

// A nil *Metrics records nothing and does not panic.
func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.add(nil)
	m.remove(nil)
	m.heartbeat("x", time.Second, errors.New("boom"))
	m.heartbeatResult("x", "lease_lost")
	m.elected("x", 1)
	m.demoted("x", ReasonResigned)
}
