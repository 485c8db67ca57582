package election

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The metrics tests drive a candidate with the fake backend in a synctest
// bubble (see candidate_test.go) and check what it reports to its Metrics:
// the events, and the progress its gauges read. Package electionprom's
// tests check how the Prometheus Metrics exports them.

// recMetrics is a Metrics that records what it is told.
type recMetrics struct {
	mu        sync.Mutex
	counts    map[string]int             // "elected", "demoted:deposed", "error:timeout", "lease_lost", "health:failed", "health:timeout", …
	durations []time.Duration            // the heartbeats' non-zero durations
	running   map[string]func() Progress // by election, between Start and stop
	cfgs      map[string]Config          // as given to Start, by election
}

var _ Metrics = (*recMetrics)(nil)

func newRecMetrics() *recMetrics {
	return &recMetrics{counts: map[string]int{}, running: map[string]func() Progress{}, cfgs: map[string]Config{}}
}

func (m *recMetrics) add(k string) { m.mu.Lock(); m.counts[k]++; m.mu.Unlock() }

func (m *recMetrics) Start(cfg Config, progress func() Progress) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running[cfg.Name], m.cfgs[cfg.Name] = progress, cfg
	return func() { m.mu.Lock(); delete(m.running, cfg.Name); m.mu.Unlock() }
}
func (m *recMetrics) Elected(string, uint64)     { m.add("elected") }
func (m *recMetrics) Demoted(_ string, r Reason) { m.add("demoted:" + string(r)) }
func (m *recMetrics) Heartbeat(_ string, d time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d > 0 {
		m.durations = append(m.durations, d)
	}
	if err != nil {
		m.counts["error:"+ErrorKind(err)]++
	}
}
func (m *recMetrics) LeaseLost(string) { m.add("lease_lost") }
func (m *recMetrics) HealthCheck(_ string, err error, timedOut bool) {
	if err != nil {
		m.add("health:failed")
	}
	if timedOut {
		m.add("health:timeout")
	}
}
func (m *recMetrics) HandoverSkipped(string)     { m.add("handover_skipped") }
func (m *recMetrics) PreferenceRequested(string) { m.add("preference_requested") }

// n returns how many times k was reported.
func (m *recMetrics) n(k string) int { m.mu.Lock(); defer m.mu.Unlock(); return m.counts[k] }

// errors returns the errors reported, by kind.
func (m *recMetrics) errors() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.counts {
		if kind, ok := strings.CutPrefix(k, "error:"); ok {
			out[kind] = v
		}
	}
	return out
}

// progress reads the progress of the running candidate of election name;
// ok is false when none runs.
func (m *recMetrics) progress(name string) (p Progress, ok bool) {
	m.mu.Lock()
	f := m.running[name]
	m.mu.Unlock()
	if f == nil {
		return Progress{}, false
	}
	return f(), true
}

// mustProgress is progress, failing t when the candidate does not run.
func (m *recMetrics) mustProgress(t *testing.T, name string) Progress {
	t.Helper()
	p, ok := m.progress(name)
	if !ok {
		t.Fatalf("election %q: no candidate running", name)
	}
	return p
}

func (m *recMetrics) heartbeatDurations() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Duration(nil), m.durations...)
}

// metricsHarness is a harness whose candidate reports to a recMetrics.
func metricsHarness(t *testing.T, b *fakeBackend) (*harness, *recMetrics) {
	t.Helper()
	m := newRecMetrics()
	h := newHarness(t, b, func(c *Config) { c.Metrics = m })
	return h, m
}

// wantLeading checks a progress's leadership fields.
func wantLeading(t *testing.T, p Progress, leading bool, term uint64, left time.Duration) {
	t.Helper()
	if p.Leading != leading || p.Term != term || p.LeaseLeft != left {
		t.Errorf("progress leading %v term %d lease left %v, want %v %d %v", p.Leading, p.Term, p.LeaseLeft, leading, term, left)
	}
}

// wantSinceRenewal checks the time since the last renewal a progress reports.
func wantSinceRenewal(t *testing.T, p Progress, d time.Duration) {
	t.Helper()
	if p.LastRenewal.IsZero() || p.Now.Sub(p.LastRenewal) != d {
		t.Errorf("progress: last renewal %v before now (at %v), want %v", p.Now.Sub(p.LastRenewal), p.LastRenewal, d)
	}
}

// renewalsOf reads how many renewals b was asked for.
func renewalsOf(b *fakeBackend) int { b.mu.Lock(); defer b.mu.Unlock(); return b.renewals }

// Election, renewals, failed renewals of several kinds, and the lease lost
// by the clock: every report, and the progress at each step.
func TestMetricsElectionRenewalDemotion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 7}}
		h, m := metricsHarness(t, b)

		// T0: elected at once (an expired row: no lock delay). The loop waits
		// for the renewal at T0+2s, the watchdog for the deadline at T0+6s.
		synctest.Wait()
		b.set(func(f *fakeBackend) { f.followB = beat{} }) // nobody else to win once demoted
		p := m.mustProgress(t, "unit")
		wantLeading(t, p, true, 7, tRenewDeadline)
		wantSinceRenewal(t, p, 0)
		if n := m.n("elected"); n != 1 {
			t.Errorf("%d elected, want 1", n)
		}
		if e := m.errors(); len(e) != 0 {
			t.Errorf("heartbeat errors before any failed: %v", e)
		}

		// The progress follows the clock between heartbeats.
		advance(time.Second)
		p = m.mustProgress(t, "unit")
		wantLeading(t, p, true, 7, 5*time.Second)
		wantSinceRenewal(t, p, time.Second)

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
		p = m.mustProgress(t, "unit")
		wantLeading(t, p, true, 7, 8*time.Second-2040*time.Millisecond)
		wantSinceRenewal(t, p, 40*time.Millisecond)
		if d := m.heartbeatDurations(); len(d) != 1 || d[0] != 40*time.Millisecond {
			t.Errorf("heartbeat durations %v, want one of 40ms", d)
		}

		// Failed renewals, reported with their error: a deadlock
		// (T0+4.04s), a timeout (T0+5.05s), then connection errors (no time
		// spent: no duration) until the lease runs out at T0+8s.
		fail := func(err error, d time.Duration) {
			took = d
			b.set(func(f *fakeBackend) {
				f.renewB = func(uint64) (beat, error) { time.Sleep(d); return beat{}, err }
			})
		}
		fail(&mysql.MySQLError{Number: 1213 /* ER_LOCK_DEADLOCK */, Message: "Deadlock found"}, 10*time.Millisecond)
		step(2*time.Second, 2)
		fail(context.DeadlineExceeded, 10*time.Millisecond)
		step(time.Second, 3)
		p = m.mustProgress(t, "unit")
		wantLeading(t, p, true, 7, 8*time.Second-5060*time.Millisecond) // failed renewals do not end leadership; the clock does

		fail(errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"), 0)
		step(time.Second, 4)            // T0+6.06s
		step(time.Second, 5)            // T0+7.06s; next look at the deadline
		advance(940 * time.Millisecond) // T0+8s: the lease is lost
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "demoted:lease_lost") })
		synctest.Wait() // following again

		p = m.mustProgress(t, "unit")
		wantLeading(t, p, false, 0, 0)
		wantSinceRenewal(t, p, 6*time.Second) // since the renewal sent at T0+2s
		if n, l := m.n("elected"), m.n("demoted:lease_lost"); n != 1 || l != 1 {
			t.Errorf("elected %d, demoted lease_lost %d, want 1 and 1", n, l)
		}
		want := map[string]int{"deadlock": 1, "timeout": 1, "connection": 2}
		if e := m.errors(); len(e) != len(want) || e["deadlock"] != 1 || e["timeout"] != 1 || e["connection"] != 2 {
			t.Errorf("heartbeat errors %v, want %v", e, want)
		}
		if n := m.n("lease_lost"); n != 1 {
			t.Errorf("%d lease_lost, want 1", n)
		}
		if d := m.heartbeatDurations(); len(d) != 3 || d[0]+d[1]+d[2] != 60*time.Millisecond {
			t.Errorf("heartbeat durations %v, want 3 summing to 60ms", d)
		}
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// Resignation and deposition are reported with their reason; once Run
// returns, its progress is no longer read (stop was called).
func TestMetricsResignedAndDeposed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 3}}
		h, m := metricsHarness(t, b)
		synctest.Wait()

		// Deposed: the renewal finds the row taken.
		b.set(func(f *fakeBackend) {
			f.followB = beat{}
			f.renewB = func(uint64) (beat, error) { return beat{}, nil }
		})
		advance(tRenew)
		waitFor(t, func() bool { return strings.Contains(h.ev.String(), "demoted:deposed") })
		wantLeading(t, m.mustProgress(t, "unit"), false, 0, 0)
		if n := m.n("demoted:deposed"); n != 1 {
			t.Errorf("%d demoted deposed, want 1", n)
		}

		// Elected again (term 4), then shut down: resigned.
		b.set(func(f *fakeBackend) { f.followB, f.renewB = beat{held: true, term: 4}, nil })
		synctest.Wait()
		advance(tRetry)
		waitFor(t, func() bool { return h.c.IsLeader() })
		wantLeading(t, m.mustProgress(t, "unit"), true, 4, tRenewDeadline)
		if n := m.n("elected"); n != 2 {
			t.Errorf("%d elected, want 2", n)
		}
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
		if r, d := m.n("demoted:resigned"), m.n("demoted:deposed"); r != 1 || d != 1 {
			t.Errorf("demoted resigned %d, deposed %d, want 1 and 1", r, d)
		}
		if _, ok := m.progress("unit"); ok {
			t.Error("progress still registered after Run returned")
		}
	})
}

// Start is called as soon as Run starts, before any leadership, with the
// candidate's Config, defaults applied; no renewal is reported yet.
func TestMetricsFollowerFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{} // never wins
		_, m := metricsHarness(t, b)
		synctest.Wait()
		p := m.mustProgress(t, "unit")
		wantLeading(t, p, false, 0, 0)
		if !p.LastRenewal.IsZero() || p.Wedged || !p.Healthy {
			t.Errorf("progress %+v, want no renewal, not wedged, healthy", p)
		}
		m.mu.Lock()
		cfg := m.cfgs["unit"]
		m.mu.Unlock()
		if cfg.ID != "me" || cfg.Tuning.RetryInterval != tRetry || cfg.Tuning.QueryTimeout == 0 {
			t.Errorf("Start's Config %+v, want the candidate's with defaults", cfg)
		}
	})
}

// Several elections share one Metrics, each reported by its name.
func TestMetricsSharedByElections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newRecMetrics()
		ha := newHarness(t, &fakeBackend{followB: beat{held: true, term: 11}}, func(c *Config) { c.Name, c.Metrics = "a", m })
		hb := newHarness(t, &fakeBackend{}, func(c *Config) { c.Name, c.Metrics = "b", m })
		synctest.Wait()
		synctest.Wait()
		wantLeading(t, m.mustProgress(t, "a"), true, 11, tRenewDeadline)
		wantLeading(t, m.mustProgress(t, "b"), false, 0, 0)
		for _, h := range []*harness{ha, hb} {
			if err := h.stop(); err != nil {
				t.Error(err)
			}
		}
	})
}

// Without Config.Metrics a candidate reports to nopMetrics.
func TestMetricsDefaultNop(t *testing.T) {
	cfg, err := Config{Name: "x"}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Metrics.(nopMetrics); !ok {
		t.Fatalf("default Metrics %T, want nopMetrics", cfg.Metrics)
	}
	stop := cfg.Metrics.Start(cfg, nil)
	stop()
}
