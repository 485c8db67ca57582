package election_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/examplefake"
)

// Most programs set Name and Callbacks, and maybe LeaseDuration, Value and
// Metrics; the durations left zero are derived from the lease.
func ExampleConfig() {
	cfg := election.Config{
		Name:          "orders-scheduler",
		Value:         "10.0.0.7:8080",
		LeaseDuration: 3 * time.Second,
	}
	d, err := cfg.WithDefaults() // what NewTable will use; cfg is not changed
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lease", d.LeaseDuration, "renew deadline", d.Tuning.RenewDeadline,
		"renewals every", d.Tuning.RenewInterval, "looks every", d.Tuning.RetryInterval)
	fmt.Println("table", d.Table, "lock delay", d.Tuning.LockDelay, "query timeout", d.Tuning.QueryTimeout)
	// Output:
	// lease 3s renew deadline 2s renewals every 400ms looks every 400ms
	// table service_election lock delay 3s query timeout 2s
}

// Validate names the first problem, wrapping ErrInvalidConfig; NewTable and
// NewLock return the same error.
func ExampleConfig_Validate() {
	err := election.Config{Name: "orders scheduler"}.Validate()
	fmt.Println(errors.Is(err, election.ErrInvalidConfig))
	// Output: true
}

// Tie leadership to the application's health: while Check fails, the leader
// stands down (ReasonUnhealthy) and a follower does not campaign. The fake
// runs the check when told to (CheckHealth), a real candidate every Interval.
func ExampleHealthConfig() {
	var broken atomic.Bool // the application's state
	cfg := election.Config{
		Name: "orders-scheduler",
		ID:   "web-1",
		Health: election.HealthConfig{
			Check: func(ctx context.Context) error {
				if broken.Load() {
					return errors.New("disk full")
				}
				return nil
			},
			Interval: 5 * time.Second, // default Tuning.RenewInterval (2 s)
		},
		Callbacks: election.Callbacks{OnDemoted: func(d election.Demotion) { fmt.Println("demoted:", d.Reason) }},
	}
	ctx, f, stop := examplefake.Leading(cfg)
	defer stop()
	broken.Store(true)
	fmt.Println("check:", f.CheckHealth(ctx) != nil, "leads:", f.IsLeader())
	// Output:
	// demoted: unhealthy
	// check: true leads: false
}

// Prefer a candidate: a healthy follower of higher Priority asks the leader
// to hand over once it has led for Tenure (default: one lease).
func ExamplePreferenceConfig() {
	cfg := election.Config{
		Name:       "orders-scheduler",
		Preference: election.PreferenceConfig{Priority: 10}, // the node next to the database, say
	}
	d, err := cfg.WithDefaults()
	fmt.Println("priority", d.Preference.Priority, "tenure", d.Preference.Tenure, err)
	// Output: priority 10 tenure 15s <nil>
}

// Tuning is best left zero unless you measured why; a logger is the usual
// exception. Given durations must keep RenewInterval < RenewDeadline <
// LeaseDuration <= LockDelay.
func ExampleTuningConfig() {
	cfg := election.Config{
		Name: "orders-scheduler",
		Tuning: election.TuningConfig{
			Logger:        slog.New(slog.DiscardHandler), // default slog.Default()
			RenewDeadline: 4 * time.Second,               // the lease is then 3/2 of it
		},
	}
	d, err := cfg.WithDefaults()
	fmt.Println("lease", d.LeaseDuration, "renewals every", d.Tuning.RenewInterval, err)
	// Output: lease 6s renewals every 800ms <nil>
}
