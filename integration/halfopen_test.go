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
		new    func(*sql.DB, election.Config) (*election.Candidate, error)
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
			var cutAt time.Time        // when the network was cut; read after cut is closed
			cut := make(chan struct{}) // closed when the network was cut
			partition := func() { once.Do(func() { cutAt = time.Now(); p.Blackhole(true); close(cut) }) }

			// The callbacks' events, timed: each wait below looks for one
			// after the step it follows, so that an event from before
			// (a lease lost to a slow machine before the cut, say) cannot
			// answer for it, and a callback never blocks on a full channel.
			type event struct {
				kind string // elected, demoted
				at   time.Time
			}
			var mu sync.Mutex
			var events []event
			note := func(kind string) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, event{kind, time.Now()})
			}
			e, err := tc.new(db, election.Config{
				Name: "halfopen", ID: "node-1", LeaseDuration: time.Second, Tuning: election.TuningConfig{RenewDeadline: 600 * time.Millisecond, RenewInterval: 100 * time.Millisecond, RetryInterval: 100 * time.Millisecond, QueryTimeout: 300 * time.Millisecond},
				Callbacks: election.Callbacks{
					OnElected: func(ctx context.Context, l election.Leadership) {
						term := l.Term
						note("elected")
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
					OnDemoted: func(election.Demotion) { note("demoted") },
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
			// waitFor waits for the first event of kind at or after from,
			// and returns how long after from it came.
			waitFor := func(what, kind string, from time.Time, within time.Duration) time.Duration {
				t.Helper()
				for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
					mu.Lock()
					for _, ev := range events {
						if ev.kind == kind && !ev.at.Before(from) {
							mu.Unlock()
							return ev.at.Sub(from)
						}
					}
					mu.Unlock()
					if time.Now().After(deadline) {
						t.Fatalf("%s: not within %v", what, within)
					}
				}
			}
			waitFor("first election", "elected", time.Time{}, 10*time.Second)

			if !tc.fenced {
				partition()
			}
			select {
			case <-cut:
			case <-time.After(5 * time.Second):
				t.Fatal("the network cut: not within 5s")
			}
			d := waitFor("standing down in the partition", "demoted", cutAt, 2*time.Second)
			t.Logf("stood down %v after the cut", d.Round(time.Millisecond))
			time.Sleep(time.Second) // Run tries its statements on half-open connections
			healed := time.Now()
			p.Blackhole(false)
			d = waitFor("leading again after the network healed", "elected", healed, 5*time.Second)
			t.Logf("leading again %v after the network healed", d.Round(time.Millisecond))
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
