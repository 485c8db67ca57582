package electionprom

import (
	"context"
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// The tests call Metrics as a candidate does (package election's tests
// check what a candidate reports), and read what a registry of the
// caller's would serve; TestMetricsOnServer runs a real candidate.
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

// newRegistry registers m on a new registry.
func newRegistry(t *testing.T, m *Metrics) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	return reg
}

// Every series, from what a candidate reports and its progress: at zero
// from Start, then with each report; the gauges follow the progress, and
// go once stop is called while the counters stay.
func TestMetricsSeries(t *testing.T) {
	const name = "election=unit"
	m := NewMetrics()
	reg := newRegistry(t, m)
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	p := election.Progress{Now: now, LastStep: now.Add(-time.Second), Healthy: true}
	cfg := election.Config{Name: "unit", Health: election.HealthConfig{Check: func(context.Context) error { return nil }}, Preference: election.PreferenceConfig{Priority: 1}}
	stop := m.Start(cfg, func() election.Progress { return p })

	s := gatherMetrics(t, reg)
	s.want(t, 0, "sqlelect_leader", name)
	s.want(t, 0, "sqlelect_term", name)
	s.want(t, 0, "sqlelect_lease_remaining_seconds", name)
	s.want(t, 1, "sqlelect_last_attempt_age_seconds", name)
	s.want(t, 0, "sqlelect_wedged", name)
	s.want(t, 1, "sqlelect_healthy", name)
	if s["sqlelect_last_renewal_age_seconds"] != nil {
		t.Errorf("last renewal age served before any renewal")
	}
	// Every series the shipped alerts (monitoring/) use exists at 0.
	for _, r := range []string{"elected", "resigned", "lease_lost", "deposed", "error", "unhealthy", "transferred"} {
		s.want(t, 0, "sqlelect_leadership_changes_total", name, "reason="+r)
	}
	for _, k := range []string{"timeout", "connection", "deadlock", "lock_wait", "server", "access", "schema", "lease_lost"} {
		s.want(t, 0, "sqlelect_heartbeat_errors_total", name, "kind="+k)
	}
	s.want(t, 0, "sqlelect_health_check_failures_total", name)
	s.want(t, 0, "sqlelect_health_check_timeouts_total", name)
	s.want(t, 0, "sqlelect_preference_requests_total", name)
	lintMetrics(t, m)

	// Leading, as a candidate reports it.
	m.Elected("unit", 7)
	p = election.Progress{Now: now, Leading: true, Term: 7, LeaseLeft: 5 * time.Second,
		LastRenewal: now.Add(-time.Second), LastStep: now.Add(-40 * time.Millisecond), Wedged: true}
	m.Heartbeat("unit", 40*time.Millisecond, nil)
	m.Heartbeat("unit", 10*time.Millisecond, &mysql.MySQLError{Number: 1213, Message: "Deadlock found"})
	m.Heartbeat("unit", 0, errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"))
	m.LeaseLost("unit")
	m.Demoted("unit", election.ReasonLeaseLost)
	m.HealthCheck("unit", nil, false)
	m.HealthCheck("unit", context.DeadlineExceeded, true)
	m.HealthCheck("unit", errors.New("no"), false)
	m.HandoverSkipped("unit")
	m.PreferenceRequested("unit")
	s = gatherMetrics(t, reg)
	s.want(t, 1, "sqlelect_leader", name)
	s.want(t, 7, "sqlelect_term", name)
	s.want(t, 5, "sqlelect_lease_remaining_seconds", name)
	s.want(t, 1, "sqlelect_last_renewal_age_seconds", name)
	s.want(t, 0.04, "sqlelect_last_attempt_age_seconds", name)
	s.want(t, 1, "sqlelect_wedged", name)
	s.want(t, 0, "sqlelect_healthy", name)
	s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=elected")
	s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=lease_lost")
	s.want(t, 1, "sqlelect_heartbeat_errors_total", name, "kind=deadlock")
	s.want(t, 1, "sqlelect_heartbeat_errors_total", name, "kind=connection")
	s.want(t, 1, "sqlelect_heartbeat_errors_total", name, "kind=lease_lost")
	s.want(t, 0, "sqlelect_heartbeat_errors_total", name, "kind=timeout")
	s.want(t, 2, "sqlelect_health_check_failures_total", name)
	s.want(t, 1, "sqlelect_health_check_timeouts_total", name)
	s.want(t, 1, "sqlelect_fast_handover_skipped_total", name)
	s.want(t, 1, "sqlelect_preference_requests_total", name)
	count, sum, buckets := s.histogram(t, "sqlelect_heartbeat_duration_seconds", name)
	if count != 2 || math.Abs(sum-0.05) > 1e-9 || buckets[0.01] != 1 || buckets[0.025] != 1 || buckets[0.05] != 2 {
		t.Errorf("heartbeat duration: count %d sum %v buckets %v, want 10ms and 40ms", count, sum, buckets)
	}
	lintMetrics(t, m)

	stop()
	s = gatherMetrics(t, reg)
	for _, g := range []string{"sqlelect_leader", "sqlelect_term", "sqlelect_lease_remaining_seconds",
		"sqlelect_last_renewal_age_seconds", "sqlelect_last_attempt_age_seconds", "sqlelect_wedged", "sqlelect_healthy"} {
		if s[g] != nil {
			t.Errorf("%s still served after stop: %v", g, s[g])
		}
	}
	s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=lease_lost")
}

// Without a HealthCheck or a Priority, their series are not served.
func TestMetricsOptionalSeries(t *testing.T) {
	m := NewMetrics()
	reg := newRegistry(t, m)
	defer m.Start(election.Config{Name: "unit"}, func() election.Progress { return election.Progress{Healthy: true} })()
	s := gatherMetrics(t, reg)
	for _, g := range []string{"sqlelect_healthy", "sqlelect_health_check_failures_total",
		"sqlelect_health_check_timeouts_total", "sqlelect_preference_requests_total"} {
		if s[g] != nil {
			t.Errorf("%s served without its option: %v", g, s[g])
		}
	}
}

// Several elections share one Metrics, each series labelled by its name.
func TestMetricsSharedByElections(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	defer m.Start(election.Config{Name: "a"}, func() election.Progress { return election.Progress{Leading: true, Term: 11} })()
	defer m.Start(election.Config{Name: "b"}, func() election.Progress { return election.Progress{} })()
	s := gatherMetrics(t, reg)
	s.want(t, 1, "sqlelect_leader", "election=a")
	s.want(t, 11, "sqlelect_term", "election=a")
	s.want(t, 0, "sqlelect_leader", "election=b")
	s.want(t, 0, "sqlelect_term", "election=b")
	if n := len(s["sqlelect_leader"].GetMetric()); n != 2 {
		t.Errorf("%d sqlelect_leader series, want 2", n)
	}
}

// A nil *Metrics records nothing and does not panic.
func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.Start(election.Config{Name: "x"}, nil)()
	m.Heartbeat("x", time.Second, errors.New("boom"))
	m.LeaseLost("x")
	m.Elected("x", 1)
	m.Demoted("x", election.ReasonResigned)
	m.HealthCheck("x", errors.New("boom"), true)
	m.HandoverSkipped("x")
	m.PreferenceRequested("x")
}

// A real candidate on a real server, through a registry: elected, then
// resigned when Run ends, and its gauges gone.
func TestMetricsOnServer(t *testing.T) {
	dsn := testdb.DSN(t) // the server's start has its own bound
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := NewMetrics()
	reg := newRegistry(t, m)
	elected := make(chan uint64, 1)
	e, err := election.NewTable(db, election.Config{Name: "prom", LeaseDuration: 3 * time.Second, Metrics: m,
		Callbacks: election.Callbacks{OnElected: func(_ context.Context, l election.Leadership) { elected <- l.Term }}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	var term uint64
	select {
	case term = <-elected:
	case <-ctx.Done():
		t.Fatal("never elected")
	}
	const name = "election=prom"
	s := gatherMetrics(t, reg)
	s.want(t, 1, "sqlelect_leader", name)
	s.want(t, float64(term), "sqlelect_term", name)
	s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=elected")
	if count, _, _ := s.histogram(t, "sqlelect_heartbeat_duration_seconds", name); count == 0 {
		t.Error("no heartbeat observed")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s = gatherMetrics(t, reg)
	s.want(t, 1, "sqlelect_leadership_changes_total", name, "reason=resigned")
	if s["sqlelect_leader"] != nil {
		t.Error("sqlelect_leader still served after Run returned")
	}
	lintMetrics(t, m)
}

// TestMembersOnServer: sqlelect_members_live counts an election's live
// members at each scrape; a gone member is not counted, and a database
// without the members table fails the scrape, naming the table.
func TestMembersOnServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	_, err := db.ExecContext(ctx, `INSERT INTO service_election_members (anchor, member_id, incarnation, started_at, last_seen, lease_ms) VALUES
  ('e', 'live', '0000000000000001', 1, FLOOR(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000), 60000),
  ('e', 'gone', '0000000000000002', 1, 1000, 1000)`)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewMembers(db, "", time.Second, "e", "none"))
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("scrape: %v, %v", mfs, err)
	}
	got := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	if mfs[0].GetName() != "sqlelect_members_live" || len(got) != 2 || got["e"] != 1 || got["none"] != 0 {
		t.Fatalf("%s: %v; want e 1, none 0", mfs[0].GetName(), got)
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE service_election_members"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "service_election_members") {
		t.Fatalf("scrape without the members table: %v; want an error naming it", err)
	}
}
