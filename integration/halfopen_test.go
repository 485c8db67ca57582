package integration

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/testdb"
	"github.com/sqlelect/sqlelect/internal/netfault"
)

// TestHalfOpenConnectionsDoNotHangRun: a leader whose connections go
// half-open (a partition that drops every packet and closes nothing) stands
// down by its clock, and its Run goes on campaigning: every statement it
// sends on the way (the renewal, letting the handover lock go, the next
// looks) has a deadline. Once the network heals it leads again.
func TestHalfOpenConnectionsDoNotHangRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		new    func(*sql.DB, election.Config) (election.Election, error)
		fenced bool // the leader writes through Fenced in a loop while it leads
	}{
		{"table", election.NewTable, false},
		{"lock", election.NewLock, false},
		{"table fenced", election.NewTable, true},
		{"lock fenced", election.NewLock, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, p := proxiedDB(t)
			if _, err := db.Exec("CREATE TABLE writes (n INT AUTO_INCREMENT PRIMARY KEY, term BIGINT UNSIGNED NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			var e election.Election
			var once sync.Once
			cut := make(chan struct{}) // closed when the network was cut
			partition := func() { once.Do(func() { p.Blackhole(true); close(cut) }) }

			var demoted, elected = make(chan election.Reason, 4), make(chan uint64, 4)
			e, err := tc.new(db, election.Config{
				Name: "halfopen", ID: "node-1", LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond,
				RenewInterval: 100 * time.Millisecond, RetryInterval: 100 * time.Millisecond, QueryTimeout: 300 * time.Millisecond,
				Callbacks: election.Callbacks{
					OnElected: func(ctx context.Context, term uint64) {
						elected <- term
						for tc.fenced && ctx.Err() == nil {
							// A transaction in flight when the connection goes
							// half-open must not keep OnElected, and Run, waiting.
							_ = e.Fenced(ctx, func(tx *sql.Tx) error {
								if _, err := tx.ExecContext(ctx, "INSERT INTO writes (term) VALUES (?)", term); err != nil {
									return err
								}
								partition() // the COMMIT goes into the hole
								return nil
							})
							time.Sleep(5 * time.Millisecond)
						}
						<-ctx.Done()
					},
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

			if !tc.fenced {
				partition()
			}
			wait("the network cut", cut, 5*time.Second)
			cutAt := time.Now()
			stood := make(chan struct{})
			go func() { <-demoted; close(stood) }()
			wait("standing down in the partition", stood, 2*time.Second)
			t.Logf("stood down %v after the cut", time.Since(cutAt).Round(time.Millisecond))
			time.Sleep(time.Second) // Run tries its statements on half-open connections
			p.Blackhole(false)
			healed := time.Now()
			again := make(chan struct{})
			go func() { <-elected; close(again) }()
			wait("leading again after the network healed", again, 5*time.Second)
			t.Logf("leading again %v after the network healed", time.Since(healed).Round(time.Millisecond))
		})
	}
}

// proxiedDB gives a test a database with the election table, and a pool
// whose connections go through a netfault proxy of their own.
func proxiedDB(t *testing.T) (*sql.DB, *netfault.Proxy) {
	t.Helper()
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
	return testdb.Open(t, cfg.FormatDSN()), p
}
