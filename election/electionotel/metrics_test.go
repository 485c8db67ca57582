package electionotel_test

import (
	"context"
	"errors"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionotel"
	"github.com/sqlelect/sqlelect/election/electionprom"
)

// collected is one Collect of a ManualReader: value by instrument name
// and attributes ("k=v,k=v", sorted), and the unit of each instrument.
type collected struct {
	values map[string]map[string]float64
	units  map[string]string
	scopes []string
}

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collected{values: map[string]map[string]float64{}, units: map[string]string{}}
	key := func(s attribute.Set) string {
		var kv []string
		for _, a := range s.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		sort.Strings(kv)
		return strings.Join(kv, ",")
	}
	for _, sm := range rm.ScopeMetrics {
		c.scopes = append(c.scopes, sm.Scope.Name)
		for _, m := range sm.Metrics {
			v := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					v[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					v[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					v[key(p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					v[key(p.Attributes)] = float64(p.Count)
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
			c.values[m.Name], c.units[m.Name] = v, m.Unit
		}
	}
	return c
}

func newMetrics(t *testing.T) (*electionotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	m, err := electionotel.NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	if err != nil {
		t.Fatal(err)
	}
	return m, r
}

// reporter drives an election.Metrics as a candidate of election e does:
// elected, two heartbeats (one failed), a lease lost, a failed health
// check, a skipped hint, a preference request, a demotion.
func report(m election.Metrics, progress func() election.Progress) (stop func()) {
	cfg := election.Config{Name: "e"}
	cfg.Health.Check = func(context.Context) error { return nil }
	cfg.Preference.Priority = 5
	stop = m.Start(cfg, progress)
	m.Elected("e", 42)
	m.Heartbeat("e", 3*time.Millisecond, nil)
	m.Heartbeat("e", 0, context.DeadlineExceeded)
	m.LeaseLost("e")
	m.HealthCheck("e", errors.New("down"), true)
	m.HandoverSkipped("e")
	m.PreferenceRequested("e")
	m.Demoted("e", election.ReasonResigned)
	return stop
}

// TestMetrics reads every instrument through the SDK's in-memory reader.
func TestMetrics(t *testing.T) {
	m, r := newMetrics(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	stop := report(m, func() election.Progress {
		return election.Progress{Now: now, Leading: true, Term: 42, LeaseLeft: 1500 * time.Millisecond,
			LastRenewal: now.Add(-2 * time.Second), LastStep: now.Add(-time.Second), Healthy: true}
	})
	got := collect(t, r)
	if len(got.scopes) != 1 || got.scopes[0] != electionotel.ScopeName {
		t.Errorf("scopes %q, want %s", got.scopes, electionotel.ScopeName)
	}
	const e = "sqlelect.election=e"
	for _, w := range []struct {
		name, attrs string
		value       float64
		unit        string
	}{
		{"sqlelect.leader", e, 1, "1"},
		{"sqlelect.term", e, 42, "{term}"},
		{"sqlelect.lease.remaining", e, 1.5, "s"},
		{"sqlelect.last_renewal.age", e, 2, "s"},
		{"sqlelect.last_attempt.age", e, 1, "s"},
		{"sqlelect.wedged", e, 0, "1"},
		{"sqlelect.healthy", e, 1, "1"},
		{"sqlelect.leadership.changes", e + ",sqlelect.reason=elected", 1, "{change}"},
		{"sqlelect.leadership.changes", e + ",sqlelect.reason=resigned", 1, "{change}"},
		{"sqlelect.leadership.changes", e + ",sqlelect.reason=deposed", 0, "{change}"},
		{"sqlelect.heartbeat.duration", e, 1, "s"},
		{"sqlelect.heartbeat.errors", "error.type=timeout," + e, 1, "{error}"},
		{"sqlelect.heartbeat.errors", "error.type=lease_lost," + e, 1, "{error}"},
		{"sqlelect.heartbeat.errors", "error.type=deadlock," + e, 0, "{error}"},
		{"sqlelect.fast_handover.skipped", e, 1, "{hint}"},
		{"sqlelect.health_check.failures", e, 1, "{check}"},
		{"sqlelect.health_check.timeouts", e, 1, "{check}"},
		{"sqlelect.preference.requests", e, 1, "{request}"},
	} {
		v, ok := got.values[w.name][w.attrs]
		if !ok || v != w.value || got.units[w.name] != w.unit {
			t.Errorf("%s{%s} = %v (present %v), unit %q; want %v, unit %q\n%v", w.name, w.attrs, v, ok, got.units[w.name], w.value, w.unit, got.values[w.name])
		}
	}
	// Once Run returned, its gauges are no longer reported; the counters stay.
	stop()
	got = collect(t, r)
	if v := got.values["sqlelect.leader"]; len(v) != 0 {
		t.Errorf("sqlelect.leader after stop: %v", v)
	}
	if got.values["sqlelect.leadership.changes"][e+",sqlelect.reason=elected"] != 1 {
		t.Errorf("counters lost at stop: %v", got.values["sqlelect.leadership.changes"])
	}
}

// TestSameMeasurementsAsPrometheus: for every series electionprom exports
// after the same reports, electionotel has the instrument named for it.
func TestSameMeasurementsAsPrometheus(t *testing.T) {
	toOtel := map[string]string{
		"sqlelect_leader":                      "sqlelect.leader",
		"sqlelect_term":                        "sqlelect.term",
		"sqlelect_lease_remaining_seconds":     "sqlelect.lease.remaining",
		"sqlelect_last_renewal_age_seconds":    "sqlelect.last_renewal.age",
		"sqlelect_leadership_changes_total":    "sqlelect.leadership.changes",
		"sqlelect_heartbeat_duration_seconds":  "sqlelect.heartbeat.duration",
		"sqlelect_heartbeat_errors_total":      "sqlelect.heartbeat.errors",
		"sqlelect_fast_handover_skipped_total": "sqlelect.fast_handover.skipped",
		"sqlelect_last_attempt_age_seconds":    "sqlelect.last_attempt.age",
		"sqlelect_wedged":                      "sqlelect.wedged",
		"sqlelect_healthy":                     "sqlelect.healthy",
		"sqlelect_health_check_failures_total": "sqlelect.health_check.failures",
		"sqlelect_health_check_timeouts_total": "sqlelect.health_check.timeouts",
		"sqlelect_preference_requests_total":   "sqlelect.preference.requests",
	}
	progress := func() election.Progress {
		now := time.Now()
		return election.Progress{Now: now, Leading: true, Term: 7, LastRenewal: now, LastStep: now}
	}
	prom := electionprom.NewMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prom)
	defer report(prom, progress)()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m, r := newMetrics(t)
	defer report(m, progress)()
	got := collect(t, r)
	for _, mf := range mfs {
		name, ok := toOtel[mf.GetName()]
		if !ok {
			t.Errorf("electionprom exports %s, which electionotel has no instrument for", mf.GetName())
			continue
		}
		if len(got.values[name]) != len(mf.GetMetric()) {
			t.Errorf("%s: %d series, %s: %d", mf.GetName(), len(mf.GetMetric()), name, len(got.values[name]))
		}
		delete(toOtel, mf.GetName())
	}
	for p, o := range toOtel {
		t.Errorf("electionprom no longer exports %s (electionotel's %s)", p, o)
	}
}

func TestMetricsNil(t *testing.T) {
	var m *electionotel.Metrics
	report(m, func() election.Progress { return election.Progress{} })()
}

// TestElectionPullsNoOpenTelemetry: a program that imports election alone
// builds without any OpenTelemetry module; one that imports electionotel
// needs them (so that the check can fail).
func TestElectionPullsNoOpenTelemetry(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "/usr/local/go/bin/go"
	}
	deps := func(pkg string) string {
		t.Helper()
		out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		return string(out)
	}
	if out := deps("github.com/sqlelect/sqlelect/election"); strings.Contains(out, "go.opentelemetry.io") {
		t.Errorf("election depends on OpenTelemetry:\n%s", out)
	}
	if out := deps("github.com/sqlelect/sqlelect/election/electionotel"); !strings.Contains(out, " go.opentelemetry.io/otel/metric\n") {
		t.Errorf("go list -deps electionotel names no go.opentelemetry.io/otel/metric module:\n%s", out)
	}
}
