// Package electionprom exports an election's metrics to Prometheus: Metrics
// implements election.Metrics, through which a candidate reports, and
// prometheus.Collector. The alerting rules and the dashboard in monitoring/
// use its series.
package electionprom

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlelect/sqlelect/election"
)

// Metrics is a prometheus.Collector for one or more elections of this
// process. Create it with NewMetrics, register it on your own registry, and
// set it as election.Config.Metrics; it uses no global registry. All
// methods are safe for concurrent use, and a nil *Metrics records nothing.
// Several elections may share one Metrics, but at most one candidate per
// election name (two candidates of the same election in one process would
// export the same series twice).
//
// Series, all labelled by election name:
//
//	sqlelect_leader                          1 while this process leads, else 0
//	sqlelect_term                            the current term while leading, else 0
//	sqlelect_lease_remaining_seconds         local lease left while leading, else 0
//	sqlelect_last_renewal_age_seconds        time since the last successful renewal
//	sqlelect_leadership_changes_total        by reason: elected, resigned, lease_lost, deposed, error, unhealthy, transferred
//	sqlelect_heartbeat_duration_seconds      histogram of each heartbeat statement
//	sqlelect_heartbeat_errors_total          by kind: timeout, connection, deadlock, lock_wait, server, access, schema, lease_lost
//	                                         (deadlock: deadlocks, 1213, and write conflicts at commit on a
//	                                         certification-based cluster: Galera's 1213, Group Replication's
//	                                         3101 and 1180 "Got error 149"; server: any other server error)
//	sqlelect_fast_handover_skipped_total     table backend: handover hints skipped, the pool having no connection to spare
//	sqlelect_last_attempt_age_seconds        time since the campaign loop last began a step (a heartbeat, a stand-down)
//	sqlelect_wedged                          1 while Run runs but its loop is stuck (see electionhttp.HealthzHandler), else 0
//	sqlelect_healthy                         with Config.Health.Check: 1 while its latest result is a pass (or none yet), else 0
//	sqlelect_health_check_failures_total     with Config.Health.Check: failed or timed-out checks
//	sqlelect_health_check_timeouts_total     with Config.Health.Check: checks that did not answer within Health.Timeout
//	sqlelect_preference_requests_total       with Config.Preference.Priority: requests this follower wrote for a lower-priority leader to hand over to it
type Metrics struct {
	changes  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	skips    *prometheus.CounterVec
	health   *prometheus.CounterVec
	// healthTimeouts counts the failures of health that were timeouts.
	healthTimeouts *prometheus.CounterVec
	prefers        *prometheus.CounterVec

	leaderDesc, termDesc, leftDesc, ageDesc *prometheus.Desc
	attemptDesc, wedgedDesc, healthyDesc    *prometheus.Desc

	mu         sync.Mutex
	candidates map[*candidate]struct{}
}

var _ election.Metrics = (*Metrics)(nil)

// candidate is one running candidate whose gauges Collect reads.
type candidate struct {
	name        string
	healthCheck bool // its Config.Health.Check is set: sqlelect_healthy is served
	progress    func() election.Progress
}

// NewMetrics returns a Metrics to register on a registry of yours.
func NewMetrics() *Metrics {
	l := []string{"election"}
	return &Metrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sqlelect_leadership_changes_total",
			Help: "Leadership changes of this process, by reason (elected, resigned, lease_lost, deposed, error, unhealthy, transferred).",
		}, []string{"election", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sqlelect_heartbeat_duration_seconds",
			Help:    "Duration of heartbeat statements (renewals, and followers' looks).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, l),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sqlelect_heartbeat_errors_total",
			Help: "Failed heartbeats, by kind (timeout, connection, deadlock, lock_wait, server, access, schema, lease_lost). deadlock counts deadlocks and the write conflicts of Galera and Group Replication (certification).",
		}, []string{"election", "kind"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sqlelect_fast_handover_skipped_total",
			Help: "Table backend: times the fast handover hint (a held or awaited GET_LOCK) was skipped because the connection pool had no connection to spare (see Config.Tuning.DisableFastHandover).",
		}, l),
		health: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sqlelect_health_check_failures_total",
			Help: "Config.Health.Check calls that failed or did not answer in time.",
		}, l),
		healthTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sqlelect_health_check_timeouts_total",
			Help: "Config.Health.Check calls that did not answer within Health.Timeout (also counted as failures).",
		}, l),
		prefers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sqlelect_preference_requests_total",
			Help: "With Config.Preference.Priority: requests this follower wrote asking a leader of lower priority to hand over to it.",
		}, l),
		attemptDesc: prometheus.NewDesc("sqlelect_last_attempt_age_seconds", "Time since the campaign loop last began a step (a heartbeat statement, a stand-down), by the local clock.", l, nil),
		wedgedDesc:  prometheus.NewDesc("sqlelect_wedged", "1 while Run runs but its campaign loop has made no progress for more than the renew deadline past when it was due, else 0.", l, nil),
		healthyDesc: prometheus.NewDesc("sqlelect_healthy", "With Config.Health.Check: 1 while its last check passed, else 0.", l, nil),
		leaderDesc:  prometheus.NewDesc("sqlelect_leader", "1 while this process leads the election, else 0.", l, nil),
		termDesc:    prometheus.NewDesc("sqlelect_term", "The fencing term while this process leads, else 0.", l, nil),
		leftDesc:    prometheus.NewDesc("sqlelect_lease_remaining_seconds", "Time left before this leader must stand down without a renewal (local monotonic clock), else 0.", l, nil),
		ageDesc:     prometheus.NewDesc("sqlelect_last_renewal_age_seconds", "Time since this process's last successful renewal or acquisition.", l, nil),
		candidates:  map[*candidate]struct{}{},
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.changes.Describe(ch)
	m.duration.Describe(ch)
	m.errors.Describe(ch)
	m.skips.Describe(ch)
	m.health.Describe(ch)
	m.healthTimeouts.Describe(ch)
	m.prefers.Describe(ch)
	ch <- m.attemptDesc
	ch <- m.wedgedDesc
	ch <- m.healthyDesc
	ch <- m.leaderDesc
	ch <- m.termDesc
	ch <- m.leftDesc
	ch <- m.ageDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.changes.Collect(ch)
	m.duration.Collect(ch)
	m.errors.Collect(ch)
	m.skips.Collect(ch)
	m.health.Collect(ch)
	m.healthTimeouts.Collect(ch)
	m.prefers.Collect(ch)
	m.mu.Lock()
	defer m.mu.Unlock()
	for c := range m.candidates {
		p := c.progress()
		leader, term, left := 0.0, 0.0, 0.0
		if p.Leading {
			leader, term, left = 1, float64(p.Term), p.LeaseLeft.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(m.leaderDesc, prometheus.GaugeValue, leader, c.name)
		ch <- prometheus.MustNewConstMetric(m.termDesc, prometheus.GaugeValue, term, c.name)
		ch <- prometheus.MustNewConstMetric(m.leftDesc, prometheus.GaugeValue, left, c.name)
		if !p.LastRenewal.IsZero() {
			ch <- prometheus.MustNewConstMetric(m.ageDesc, prometheus.GaugeValue, p.Now.Sub(p.LastRenewal).Seconds(), c.name)
		}
		ch <- prometheus.MustNewConstMetric(m.attemptDesc, prometheus.GaugeValue, p.Now.Sub(p.LastStep).Seconds(), c.name)
		ch <- prometheus.MustNewConstMetric(m.wedgedDesc, prometheus.GaugeValue, b2f(p.Wedged), c.name)
		if c.healthCheck {
			ch <- prometheus.MustNewConstMetric(m.healthyDesc, prometheus.GaugeValue, b2f(p.Healthy), c.name)
		}
	}
}

// Start implements election.Metrics: the candidate's gauges are served
// until stop is called, and every labelled series users alert on exists at
// 0 from the start, so that increase() and rate() see the first change:
// each reason, and each kind election.ErrorKind returns plus lease_lost.
func (m *Metrics) Start(cfg election.Config, progress func() election.Progress) (stop func()) {
	if m == nil {
		return func() {}
	}
	c := &candidate{name: cfg.Name, healthCheck: cfg.Health.Check != nil, progress: progress}
	m.mu.Lock()
	m.candidates[c] = struct{}{}
	m.mu.Unlock()
	m.changes.WithLabelValues(c.name, "elected")
	for _, r := range []election.Reason{election.ReasonResigned, election.ReasonLeaseLost, election.ReasonDeposed,
		election.ReasonError, election.ReasonUnhealthy, election.ReasonTransferred} {
		m.changes.WithLabelValues(c.name, string(r))
	}
	for _, k := range []string{"timeout", "connection", "deadlock", "lock_wait", "server", "access", "schema", "lease_lost"} {
		m.errors.WithLabelValues(c.name, k)
	}
	if c.healthCheck {
		m.health.WithLabelValues(c.name)
		m.healthTimeouts.WithLabelValues(c.name)
	}
	if cfg.Preference.Priority > 0 {
		m.prefers.WithLabelValues(c.name)
	}
	return func() {
		m.mu.Lock()
		delete(m.candidates, c)
		m.mu.Unlock()
	}
}

// Heartbeat implements election.Metrics: d is observed in
// sqlelect_heartbeat_duration_seconds when not zero, and an error counted
// in sqlelect_heartbeat_errors_total by its kind.
func (m *Metrics) Heartbeat(name string, d time.Duration, err error) {
	if m == nil {
		return
	}
	if d > 0 {
		m.duration.WithLabelValues(name).Observe(d.Seconds())
	}
	if err != nil {
		m.errors.WithLabelValues(name, election.ErrorKind(err)).Inc()
	}
}

// LeaseLost implements election.Metrics: counted in
// sqlelect_heartbeat_errors_total with kind lease_lost.
func (m *Metrics) LeaseLost(name string) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(name, "lease_lost").Inc()
}

// HealthCheck implements election.Metrics: failures are counted in
// sqlelect_health_check_failures_total, timeouts also in
// sqlelect_health_check_timeouts_total.
func (m *Metrics) HealthCheck(name string, err error, timedOut bool) {
	if m == nil || err == nil {
		return
	}
	m.health.WithLabelValues(name).Inc()
	if timedOut {
		m.healthTimeouts.WithLabelValues(name).Inc()
	}
}

// HandoverSkipped implements election.Metrics:
// sqlelect_fast_handover_skipped_total.
func (m *Metrics) HandoverSkipped(name string) {
	if m == nil {
		return
	}
	m.skips.WithLabelValues(name).Inc()
}

// Elected implements election.Metrics: sqlelect_leadership_changes_total
// with reason elected.
func (m *Metrics) Elected(name string, _ uint64) {
	if m == nil {
		return
	}
	m.changes.WithLabelValues(name, "elected").Inc()
}

// Demoted implements election.Metrics: sqlelect_leadership_changes_total
// by reason.
func (m *Metrics) Demoted(name string, r election.Reason) {
	if m == nil {
		return
	}
	m.changes.WithLabelValues(name, string(r)).Inc()
}

// PreferenceRequested implements election.Metrics:
// sqlelect_preference_requests_total.
func (m *Metrics) PreferenceRequested(name string) {
	if m == nil {
		return
	}
	m.prefers.WithLabelValues(name).Inc()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
