package electionprom

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlelect/sqlelect/members"
)

// Members is a collector of the gauge sqlelect_members_live (label
// election): the live members (package members) of each of its elections,
// read from the members table at each scrape, one query per election, each
// bounded by a timeout. A read that fails fails the scrape with its error.
type Members struct {
	db        *sql.DB
	table     string
	timeout   time.Duration
	elections []string
	desc      *prometheus.Desc
}

// NewMembers returns the collector of the live members of elections in
// election table table (default service_election) on db.
func NewMembers(db *sql.DB, table string, timeout time.Duration, elections ...string) *Members {
	return &Members{db: db, table: table, timeout: timeout, elections: elections,
		desc: prometheus.NewDesc("sqlelect_members_live", "Live members of the election (package members).", []string{"election"}, nil)}
}

// Describe implements prometheus.Collector.
func (m *Members) Describe(ch chan<- *prometheus.Desc) { ch <- m.desc }

// Collect implements prometheus.Collector.
func (m *Members) Collect(ch chan<- prometheus.Metric) {
	for _, e := range m.elections {
		ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
		ms, err := members.List(ctx, m.db, m.table, e)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(m.desc, err)
			continue
		}
		live := 0
		for _, mb := range ms {
			if mb.Live {
				live++
			}
		}
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, float64(live), e)
	}
}
