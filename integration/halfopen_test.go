package integration

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/netfault"
	"github.com/sqlelect/sqlelect/integration/testdb"
)

// TestHalfOpenConnectionsDoNotHangRun: a leader whose connections go
// half-open (a partition that drops every packet and closes nothing) stands
// down by its clock, and its Run goes on campaigning: every statement it
// sends on the way (the renewal, letting the handover lock go, the next
// looks) has a deadline. Once the network heals it leads again.
func TestHalfOpenConnectionsDoNotHangRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(*sql.DB, election.Config) (election.Election, error)
	}{
		{"table", election.NewTable},
		{"lock", election.NewLock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSN(t)
			testdb.Migrate(t, dsn)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			p, err := netfault.Start(cfg.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			cfg.Addr = p.Addr()
			db := testdb.Open(t, cfg.FormatDSN())

			var demoted, elected = make(chan election.Reason, 4), make(chan uint64, 4)
			e, err := tc.new(db, election.Config{
				Name: "halfopen", ID: "node-1", LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond,
				RenewInterval: 100 * time.Millisecond, RetryInterval: 100 * time.Millisecond, QueryTimeout: 300 * time.Millisecond,
				Callbacks: election.Callbacks{
					OnElected: func(ctx context.Context, term uint64) { elected <- term; <-ctx.Done() },
					OnDemoted: func(d election.Demotion) { demoted <- d.Reason },
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Error("Run did not return within 10s of its context's end")
				}
			})
			wait := func(what string, ch <-chan struct{}, within time.Duration) {
				t.Helper()
				select {
				case <-ch:
				case <-time.After(within):
					t.Fatalf("%s: not within %v", what, within)
				}
			}
			first := make(chan struct{})
			go func() { <-elected; close(first) }()
			wait("first election", first, 10*time.Second)

			p.Blackhole(true)
			stood := make(chan struct{})
			go func() { <-demoted; close(stood) }()
			wait("standing down in the partition", stood, 2*time.Second)
			time.Sleep(time.Second) // Run tries its statements on half-open connections
			p.Blackhole(false)
			again := make(chan struct{})
			go func() { <-elected; close(again) }()
			wait("leading again after the network healed", again, 5*time.Second)
		})
	}
}
