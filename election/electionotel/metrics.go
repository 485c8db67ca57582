// Package electionotel exports an election's metrics through the
// OpenTelemetry metrics API: Metrics implements election.Metrics, through
// which a candidate reports, with instruments of a metric.MeterProvider of
// yours (the SDK's, with the exporter you use: OTLP, Prometheus, stdout).
// It exports the measurements package electionprom exports, named by
// OpenTelemetry's conventions: dotted lowercase names in the sqlelect
// namespace, the unit as the instrument's unit rather than in the name, no
// _total suffix, and the error kind as the error.type attribute.
//
// A program that imports election alone pulls in no OpenTelemetry module;
// only one that imports this package does.
package electionotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sqlelect/sqlelect/election"
)

// ScopeName is the instrumentation scope of the meter NewMetrics uses.
const ScopeName = "github.com/sqlelect/sqlelect/election/electionotel"

// Attribute keys: the election's name (Config.Name) on every measurement,
// the reason of a leadership change, and the kind of a heartbeat error
// (election.ErrorKind, or lease_lost), OpenTelemetry's error.type.
const (
	AttrElection = attribute.Key("sqlelect.election")
	AttrReason   = attribute.Key("sqlelect.reason")
	AttrError    = attribute.Key("error.type")
)

// Metrics reports one or more elections of this process through the
// instruments of a MeterProvider. Create it with NewMetrics and set it as
// election.Config.Metrics. All methods are safe for concurrent use, and a
// nil *Metrics records nothing. Several elections may share one Metrics,
// but at most one candidate per election name.
//
// Instruments (electionprom's series in brackets), all with the attribute
// sqlelect.election:
//
//	sqlelect.leader                  gauge, 1 while this process leads, else 0 (sqlelect_leader)
//	sqlelect.term                    gauge, the current term while leading, else 0 (sqlelect_term)
//	sqlelect.lease.remaining         gauge, s: local lease left while leading, else 0 (sqlelect_lease_remaining_seconds)
//	sqlelect.last_renewal.age        gauge, s: time since the last successful renewal (sqlelect_last_renewal_age_seconds)
//	sqlelect.leadership.changes      counter, by sqlelect.reason: elected, resigned, lease_lost, deposed, error, unhealthy,
//	                                 transferred (sqlelect_leadership_changes_total)
//	sqlelect.heartbeat.duration      histogram, s: each heartbeat statement (sqlelect_heartbeat_duration_seconds)
//	sqlelect.heartbeat.errors        counter, by error.type: timeout, connection, deadlock, lock_wait, server, access, schema,
//	                                 lease_lost (sqlelect_heartbeat_errors_total)
//	sqlelect.fast_handover.skipped   counter: handover hints skipped (sqlelect_fast_handover_skipped_total)
//	sqlelect.last_attempt.age        gauge, s: time since the campaign loop last began a step (sqlelect_last_attempt_age_seconds)
//	sqlelect.wedged                  gauge, 1 while Run runs but its loop is stuck, else 0 (sqlelect_wedged)
//	sqlelect.healthy                 gauge, with Config.Health.Check: 1 while its latest result is a pass (sqlelect_healthy)
//	sqlelect.health_check.failures   counter, with Config.Health.Check (sqlelect_health_check_failures_total)
//	sqlelect.health_check.timeouts   counter, with Config.Health.Check (sqlelect_health_check_timeouts_total)
//	sqlelect.preference.requests     counter, with Config.Preference.Priority (sqlelect_preference_requests_total)
type Metrics struct {
	changes, errors, skips, health, healthTimeouts, prefers metric.Int64Counter
	duration                                                metric.Float64Histogram

	leader, term, wedged, healthy metric.Int64ObservableGauge
	left, age, attempt            metric.Float64ObservableGauge

	mu         sync.Mutex
	candidates map[*candidate]struct{}
}

var _ election.Metrics = (*Metrics)(nil)

// candidate is one running candidate whose gauges the callback reads.
type candidate struct {
	name        string
	healthCheck bool
	progress    func() election.Progress
}

// heartbeatBuckets are the histogram's bounds, in seconds: electionprom's.
var heartbeatBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// NewMetrics creates the instruments on a meter of mp (scope ScopeName)
// and registers the callback that reads the candidates' gauges.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter(ScopeName)
	m := &Metrics{candidates: map[*candidate]struct{}{}}
	var err error
	counter := func(dst *metric.Int64Counter, name, unit, desc string) {
		if err == nil {
			*dst, err = meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		}
	}
	intGauge := func(dst *metric.Int64ObservableGauge, name, unit, desc string) {
		if err == nil {
			*dst, err = meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		}
	}
	floatGauge := func(dst *metric.Float64ObservableGauge, name, desc string) {
		if err == nil {
			*dst, err = meter.Float64ObservableGauge(name, metric.WithUnit("s"), metric.WithDescription(desc))
		}
	}
	counter(&m.changes, "sqlelect.leadership.changes", "{change}", "Leadership changes of this process, by reason.")
	counter(&m.errors, "sqlelect.heartbeat.errors", "{error}", "Failed heartbeats, by kind (error.type).")
	counter(&m.skips, "sqlelect.fast_handover.skipped", "{hint}", "Table backend: fast handover hints skipped, the pool having no connection to spare.")
	counter(&m.health, "sqlelect.health_check.failures", "{check}", "Config.Health.Check calls that failed or did not answer in time.")
	counter(&m.healthTimeouts, "sqlelect.health_check.timeouts", "{check}", "Config.Health.Check calls that did not answer within Health.Timeout.")
	counter(&m.prefers, "sqlelect.preference.requests", "{request}", "Requests this follower wrote for a leader of lower priority to hand over to it.")
	intGauge(&m.leader, "sqlelect.leader", "1", "1 while this process leads the election, else 0.")
	intGauge(&m.term, "sqlelect.term", "{term}", "The fencing term while this process leads, else 0.")
	intGauge(&m.wedged, "sqlelect.wedged", "1", "1 while Run runs but its campaign loop is stuck, else 0.")
	intGauge(&m.healthy, "sqlelect.healthy", "1", "With Config.Health.Check: 1 while its last check passed, else 0.")
	floatGauge(&m.left, "sqlelect.lease.remaining", "Time left before this leader must stand down without a renewal (local monotonic clock).")
	floatGauge(&m.age, "sqlelect.last_renewal.age", "Time since this process's last successful renewal or acquisition.")
	floatGauge(&m.attempt, "sqlelect.last_attempt.age", "Time since the campaign loop last began a step.")
	if err == nil {
		m.duration, err = meter.Float64Histogram("sqlelect.heartbeat.duration", metric.WithUnit("s"),
			metric.WithDescription("Duration of heartbeat statements (renewals, and followers' looks)."),
			metric.WithExplicitBucketBoundaries(heartbeatBuckets...))
	}
	if err == nil {
		_, err = meter.RegisterCallback(m.observe, m.leader, m.term, m.wedged, m.healthy, m.left, m.age, m.attempt)
	}
	if err != nil {
		return nil, err // the SDK's errors name the instrument
	}
	return m, nil
}

// observe reports the gauges of the running candidates.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.candidates {
		p := c.progress()
		var leader, term int64
		var left float64
		if p.Leading {
			leader, term, left = 1, int64(p.Term), p.LeaseLeft.Seconds()
		}
		attrs := metric.WithAttributeSet(attribute.NewSet(AttrElection.String(c.name)))
		o.ObserveInt64(m.leader, leader, attrs)
		o.ObserveInt64(m.term, term, attrs)
		o.ObserveFloat64(m.left, left, attrs)
		if !p.LastRenewal.IsZero() {
			o.ObserveFloat64(m.age, p.Now.Sub(p.LastRenewal).Seconds(), attrs)
		}
		o.ObserveFloat64(m.attempt, p.Now.Sub(p.LastStep).Seconds(), attrs)
		o.ObserveInt64(m.wedged, b2i(p.Wedged), attrs)
		if c.healthCheck {
			o.ObserveInt64(m.healthy, b2i(p.Healthy), attrs)
		}
	}
	return nil
}

// add adds n to counter with the election's attribute and extra ones.
func add(counter metric.Int64Counter, n int64, name string, extra ...attribute.KeyValue) {
	attrs := append([]attribute.KeyValue{AttrElection.String(name)}, extra...)
	counter.Add(context.Background(), n, metric.WithAttributes(attrs...))
}

// Start implements election.Metrics: the candidate's gauges are reported
// until stop is called, and every counter users alert on is reported at 0
// from the start: each reason, and each kind election.ErrorKind returns
// plus lease_lost.
func (m *Metrics) Start(cfg election.Config, progress func() election.Progress) (stop func()) {
	if m == nil {
		return func() {}
	}
	c := &candidate{name: cfg.Name, healthCheck: cfg.Health.Check != nil, progress: progress}
	for _, r := range []election.Reason{"elected", election.ReasonResigned, election.ReasonLeaseLost, election.ReasonDeposed,
		election.ReasonError, election.ReasonUnhealthy, election.ReasonTransferred} {
		add(m.changes, 0, c.name, AttrReason.String(string(r)))
	}
	for _, k := range []string{"timeout", "connection", "deadlock", "lock_wait", "server", "access", "schema", "lease_lost"} {
		add(m.errors, 0, c.name, AttrError.String(k))
	}
	if c.healthCheck {
		add(m.health, 0, c.name)
		add(m.healthTimeouts, 0, c.name)
	}
	if cfg.Preference.Priority > 0 {
		add(m.prefers, 0, c.name)
	}
	return m.track(c)
}

// track adds c to the candidates whose gauges observe reports, until the
// returned stop.
func (m *Metrics) track(c *candidate) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.candidates[c] = struct{}{}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.candidates, c)
	}
}

// Heartbeat implements election.Metrics: d is recorded in
// sqlelect.heartbeat.duration when not zero, and an error counted in
// sqlelect.heartbeat.errors by its kind.
func (m *Metrics) Heartbeat(name string, d time.Duration, err error) {
	if m == nil {
		return
	}
	if d > 0 {
		m.duration.Record(context.Background(), d.Seconds(), metric.WithAttributes(AttrElection.String(name)))
	}
	if err != nil {
		add(m.errors, 1, name, AttrError.String(election.ErrorKind(err)))
	}
}

// LeaseLost implements election.Metrics: counted in
// sqlelect.heartbeat.errors with error.type lease_lost.
func (m *Metrics) LeaseLost(name string) {
	if m != nil {
		add(m.errors, 1, name, AttrError.String("lease_lost"))
	}
}

// HealthCheck implements election.Metrics: failures are counted in
// sqlelect.health_check.failures, timeouts also in
// sqlelect.health_check.timeouts.
func (m *Metrics) HealthCheck(name string, err error, timedOut bool) {
	if m == nil || err == nil {
		return
	}
	add(m.health, 1, name)
	if timedOut {
		add(m.healthTimeouts, 1, name)
	}
}

// HandoverSkipped implements election.Metrics:
// sqlelect.fast_handover.skipped.
func (m *Metrics) HandoverSkipped(name string) {
	if m != nil {
		add(m.skips, 1, name)
	}
}

// Elected implements election.Metrics: sqlelect.leadership.changes with
// reason elected.
func (m *Metrics) Elected(name string, _ uint64) {
	if m != nil {
		add(m.changes, 1, name, AttrReason.String("elected"))
	}
}

// Demoted implements election.Metrics: sqlelect.leadership.changes by
// reason.
func (m *Metrics) Demoted(name string, r election.Reason) {
	if m != nil {
		add(m.changes, 1, name, AttrReason.String(string(r)))
	}
}

// PreferenceRequested implements election.Metrics:
// sqlelect.preference.requests.
func (m *Metrics) PreferenceRequested(name string) {
	if m != nil {
		add(m.prefers, 1, name)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
