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
//	sqlelect_fast_handover_skipped_total     handover hints (table backend) and leaders' transfer bells skipped, the pool having no connection to spare
//	sqlelect_last_attempt_age_seconds        time since the campaign loop last began a step (a heartbeat, a stand-down)
//	sqlelect_wedged                          1 while Run runs but its loop is stuck (see electionhttp.HealthzHandler), else 0
//	sqlelect_healthy                         with Config.Health.Check: 1 while its latest result is a pass (or none yet), else 0
//	sqlelect_health_check_failures_total     with Config.Health.Check: failed or timed-out checks
//	sqlelect_health_check_timeouts_total     with Config.Health.Check: checks that did not answer within Health.Timeout
//	sqlelect_preference_requests_total       with Config.Preference.Priority: requests this follower wrote for a lower-priority leader to hand over to it
//	sqlelect_members_live                    not from Metrics but from the collector NewMembers returns (the CLI registers it with
//	                                         --metrics-addr): the live members of an election (package members), read at each scrape
type Metrics struct {
	counters [numCounters]*prometheus.CounterVec
	duration *prometheus.HistogramVec

	leaderDesc, termDesc, leftDesc, ageDesc *prometheus.Desc
	attemptDesc, wedgedDesc, healthyDesc    *prometheus.Desc

	candidates sync.Map // the running candidates, *candidate keys
}

// The counters, indexes of Metrics.counters.
const (
	changes         = iota // sqlelect_leadership_changes_total, by reason
	heartbeatErrors        // sqlelect_heartbeat_errors_total, by kind
	handoverSkips          // sqlelect_fast_handover_skipped_total
	healthFailures         // sqlelect_health_check_failures_total
	healthTimeouts         // sqlelect_health_check_timeouts_total (also failures)
	preferRequests         // sqlelect_preference_requests_total
	numCounters
)

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
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sqlelect_heartbeat_duration_seconds",
			Help:    "Duration of heartbeat statements (renewals, and followers' looks).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, l),
		attemptDesc: prometheus.NewDesc("sqlelect_last_attempt_age_seconds", "Time since the campaign loop last began a step (a heartbeat statement, a stand-down), by the local clock.", l, nil),
		wedgedDesc:  prometheus.NewDesc("sqlelect_wedged", "1 while Run runs but its campaign loop has made no progress for more than the renew deadline past when it was due, else 0.", l, nil),
		healthyDesc: prometheus.NewDesc("sqlelect_healthy", "With Config.Health.Check: 1 while its last check passed, else 0.", l, nil),
		leaderDesc:  prometheus.NewDesc("sqlelect_leader", "1 while this process leads the election, else 0.", l, nil),
		termDesc:    prometheus.NewDesc("sqlelect_term", "The fencing term while this process leads, else 0.", l, nil),
		leftDesc:    prometheus.NewDesc("sqlelect_lease_remaining_seconds", "Time left before this leader must stand down without a renewal (local monotonic clock), else 0.", l, nil),
		ageDesc:     prometheus.NewDesc("sqlelect_last_renewal_age_seconds", "Time since this process's last successful renewal or acquisition.", l, nil),
	}
	// counter makes counter i, labelled by election and label, if any.
	counter := func(i int, name, help string, label ...string) {
		m.counters[i] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"election"}, label...))
	}
	counter(changes, "sqlelect_leadership_changes_total", "Leadership changes of this process, by reason (elected, resigned, lease_lost, deposed, error, unhealthy, transferred).", "reason")
	counter(heartbeatErrors, "sqlelect_heartbeat_errors_total", "Failed heartbeats, by kind (timeout, connection, deadlock, lock_wait, server, access, schema, lease_lost). deadlock counts deadlocks and the write conflicts of Galera and Group Replication (certification).", "kind")
	counter(handoverSkips, "sqlelect_fast_handover_skipped_total", "Times the fast handover hint (table backend: a held or awaited GET_LOCK) or a leader's transfer bell was skipped because the connection pool had no connection to spare (see Config.Tuning.DisableFastHandover).")
	counter(healthFailures, "sqlelect_health_check_failures_total", "Config.Health.Check calls that failed or did not answer in time.")
	counter(healthTimeouts, "sqlelect_health_check_timeouts_total", "Config.Health.Check calls that did not answer within Health.Timeout (also counted as failures).")
	counter(preferRequests, "sqlelect_preference_requests_total", "With Config.Preference.Priority: requests this follower wrote asking a leader of lower priority to hand over to it.")
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.counters {
		c.Describe(ch)
	}
	m.duration.Describe(ch)
	for _, d := range []*prometheus.Desc{m.attemptDesc, m.wedgedDesc, m.healthyDesc, m.leaderDesc, m.termDesc, m.leftDesc, m.ageDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.counters {
		c.Collect(ch)
	}
	m.duration.Collect(ch)
	m.candidates.Range(func(k, _ any) bool {
		c := k.(*candidate)
		p := c.progress() // Term and LeaseLeft are zero unless Leading
		ch <- prometheus.MustNewConstMetric(m.leaderDesc, prometheus.GaugeValue, b2f(p.Leading), c.name)
		ch <- prometheus.MustNewConstMetric(m.termDesc, prometheus.GaugeValue, float64(p.Term), c.name)
		ch <- prometheus.MustNewConstMetric(m.leftDesc, prometheus.GaugeValue, p.LeaseLeft.Seconds(), c.name)
		if !p.LastRenewal.IsZero() {
			ch <- prometheus.MustNewConstMetric(m.ageDesc, prometheus.GaugeValue, p.Now.Sub(p.LastRenewal).Seconds(), c.name)
		}
		ch <- prometheus.MustNewConstMetric(m.attemptDesc, prometheus.GaugeValue, p.Now.Sub(p.LastStep).Seconds(), c.name)
		ch <- prometheus.MustNewConstMetric(m.wedgedDesc, prometheus.GaugeValue, b2f(p.Wedged), c.name)
		if c.healthCheck {
			ch <- prometheus.MustNewConstMetric(m.healthyDesc, prometheus.GaugeValue, b2f(p.Healthy), c.name)
		}
		return true
	})
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
	m.candidates.Store(c, nil)
	for _, r := range []election.Reason{"elected", election.ReasonResigned, election.ReasonLeaseLost, election.ReasonDeposed,
		election.ReasonError, election.ReasonUnhealthy, election.ReasonTransferred} {
		m.counters[changes].WithLabelValues(c.name, string(r))
	}
	for _, k := range []string{"timeout", "connection", "deadlock", "lock_wait", "server", "access", "schema", "lease_lost"} {
		m.counters[heartbeatErrors].WithLabelValues(c.name, k)
	}
	if c.healthCheck {
		m.counters[healthFailures].WithLabelValues(c.name)
		m.counters[healthTimeouts].WithLabelValues(c.name)
	}
	if cfg.Preference.Priority > 0 {
		m.counters[preferRequests].WithLabelValues(c.name)
	}
	return func() { m.candidates.Delete(c) }
}

// inc adds one to the series of counter i with labels; a nil m records
// nothing.
func (m *Metrics) inc(i int, labels ...string) {
	if m != nil {
		m.counters[i].WithLabelValues(labels...).Inc()
	}
}

// Heartbeat implements election.Metrics: d is observed in
// sqlelect_heartbeat_duration_seconds when not zero, and an error counted
// in sqlelect_heartbeat_errors_total by its kind.
func (m *Metrics) Heartbeat(name string, d time.Duration, err error) {
	if m != nil && d > 0 {
		m.duration.WithLabelValues(name).Observe(d.Seconds())
	}
	if err != nil {
		m.inc(heartbeatErrors, name, election.ErrorKind(err))
	}
}

// LeaseLost implements election.Metrics: counted in
// sqlelect_heartbeat_errors_total with kind lease_lost.
func (m *Metrics) LeaseLost(name string) { m.inc(heartbeatErrors, name, "lease_lost") }

// HealthCheck implements election.Metrics: failures are counted in
// sqlelect_health_check_failures_total, timeouts also in
// sqlelect_health_check_timeouts_total.
func (m *Metrics) HealthCheck(name string, err error, timedOut bool) {
	if err != nil {
		m.inc(healthFailures, name)
	}
	if err != nil && timedOut {
		m.inc(healthTimeouts, name)
	}
}

// HandoverSkipped implements election.Metrics:
// sqlelect_fast_handover_skipped_total.
func (m *Metrics) HandoverSkipped(name string) { m.inc(handoverSkips, name) }

// Elected implements election.Metrics: sqlelect_leadership_changes_total
// with reason elected.
func (m *Metrics) Elected(name string, _ uint64) { m.inc(changes, name, "elected") }

// Demoted implements election.Metrics: sqlelect_leadership_changes_total
// by reason.
func (m *Metrics) Demoted(name string, r election.Reason) { m.inc(changes, name, string(r)) }

// PreferenceRequested implements election.Metrics:
// sqlelect_preference_requests_total.
func (m *Metrics) PreferenceRequested(name string) { m.inc(preferRequests, name) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
