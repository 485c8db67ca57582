package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/testdb"
	"github.com/sqlelect/sqlelect/schema"
)

// TestAdoptLeaseOfTakenOverRows: during the adoption period, a recipe node
// that takes over a row a sqlelect holder wrote keeps that row's lease_ms
// (the recipe's statement sets only service_id and last_seen_active). A
// sqlelect candidate must still wait the recipe's timeout plus one second
// after the recipe holder's last renewal, so the lease sqlelect writes is
// at least the adopted one (issue 20, item 1's leftover).
//
// sqlelect-0 (the default 15 s lease, below the recipe's 20 s timeout)
// inserts the row and dies before it leads: its Run ends within its lock
// delay, which hands the row off unreleased with the rest of that delay as
// its lease. recipe-1 then runs the recipe's exact statement twice, each
// on a connection whose session clock is set as the test's timing trick:
// first 21 s ahead (the row looks old enough to take over: it takes it),
// then 5 s behind (its renewal, as if made 5 s ago, after which it froze).
// A new candidate, sqlelect-1, must not lead before 21 s after that
// renewal by the database clock. Before the fix the row's lease_ms was
// sqlelect-0's (15 s or less) and the table backend led 15 s after it; the
// lock backend took the row (its connection_id is sqlelect-0's, gone) and
// led after its LockDelay (15 s), taking the writer for a lock holder.
func TestAdoptLeaseOfTakenOverRows(t *testing.T) {
	t.Parallel() // its subtests wait on the recipe's timeouts, each on a database of its own
	const timeout, frozen = 20 * time.Second, 5 * time.Second
	for _, backend := range []string{"table", "lock"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			t.Cleanup(cancel)
			db, m, dsn := recipeDB(t, ctx)
			if _, err := m.Adopt(ctx, schema.AdoptOptions{RecipeTimeout: timeout}); err != nil {
				t.Fatal(err)
			}
			newElection := election.NewTable
			if backend == "lock" {
				newElection = election.NewLock
			}
			// Each leadership's start, by the database clock.
			type start struct {
				id string
				at time.Time
			}
			elected := make(chan start, 2)
			config := func(id string) election.Config {
				return election.Config{
					Name: "1", ID: id, Tuning: election.TuningConfig{RetryInterval: 200 * time.Millisecond, QueryTimeout: 2 * time.Second}, Callbacks: election.Callbacks{OnElected: func(ctx context.Context, l election.Leadership) {
						var at time.Time
						_ = db.QueryRowContext(ctx, "SELECT SYSDATE(6)").Scan(&at) // zero on error: fails the check
						elected <- start{id, at}
						<-ctx.Done()
					}},
				}
			}

			// sqlelect-0 holds the row, then its Run ends within its
			// lock delay (15 s): it never leads.
			e0, err := newElection(db, config("sqlelect-0"))
			if err != nil {
				t.Fatal(err)
			}
			rctx0, rcancel0 := context.WithCancel(ctx)
			done0 := make(chan error, 1)
			go func() { done0 <- e0.Run(rctx0) }()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				var n int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM service_election WHERE anchor = '1' AND service_id = 'sqlelect-0'").Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 1 {
					break
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
					t.Fatal("sqlelect-0 never wrote the row")
				}
			}
			rcancel0()
			if err := <-done0; err != nil {
				t.Fatalf("Run(sqlelect-0): %v", err)
			}
			select {
			case s := <-elected:
				t.Fatalf("%s led: the test needs a holder that dies first", s.id)
			default:
			}
			var handed int64
			if err := db.QueryRowContext(ctx, "SELECT lease_ms FROM service_election WHERE anchor = '1' AND service_id = 'sqlelect-0' AND released = 0").Scan(&handed); err != nil {
				t.Fatalf("sqlelect-0's row, unreleased: %v", err)
			}

			// recipe-1 takes it over, renews once more, and freezes.
			recipe := func(shift string) {
				t.Helper()
				c := testdb.Open(t, dsn)
				c.SetMaxOpenConns(1)
				if _, err := c.ExecContext(ctx, "SET @@timestamp = UNIX_TIMESTAMP() "+shift); err != nil {
					t.Fatal(err)
				}
				if _, err := c.ExecContext(ctx, recipeAttempt20, "recipe-1"); err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			recipe(fmt.Sprintf("+ %d", int((timeout+time.Second)/time.Second)))
			recipe(fmt.Sprintf("- %d", int(frozen/time.Second)))
			var last time.Time
			var lease int64
			if err := db.QueryRowContext(ctx, "SELECT last_seen_active, lease_ms FROM service_election WHERE anchor = '1' AND service_id = 'recipe-1'").
				Scan(&last, &lease); err != nil {
				t.Fatalf("recipe-1 did not take the row over: %v", err)
			}

			e1, err := newElection(db, config("sqlelect-1"))
			if err != nil {
				t.Fatal(err)
			}
			rctx1, rcancel1 := context.WithCancel(ctx)
			done1 := make(chan error, 1)
			go func() { done1 <- e1.Run(rctx1) }()
			t.Cleanup(func() {
				rcancel1()
				if err := <-done1; err != nil {
					t.Errorf("Run(sqlelect-1): %v", err)
				}
			})
			var led start
			select {
			case led = <-elected:
			case <-ctx.Done():
				t.Fatalf("sqlelect-1 never led; the row's lease_ms is %d", lease)
			}
			var acquired string
			if err := db.QueryRowContext(ctx, "SELECT acquired FROM service_election WHERE anchor = '1' AND service_id = 'sqlelect-1'").
				Scan(&acquired); err != nil {
				t.Fatal(err)
			}
			after := led.at.Sub(last)
			t.Logf("sqlelect-0 handed the row off with lease_ms %d; recipe-1 took it over (lease_ms %d); sqlelect-1 took it (%s) and led %v after recipe-1's last renewal",
				handed, lease, acquired, after.Round(time.Millisecond))
			if limit := timeout + time.Second; after < limit {
				t.Errorf("sqlelect-1 led %v after recipe-1's last renewal (lease_ms %d), sooner than the recipe timeout + 1 s, %v: both led for %v",
					after.Round(time.Millisecond), lease, limit, (timeout + time.Second - after).Round(time.Millisecond))
			}
			if limit := timeout + 4*time.Second; after > limit {
				t.Errorf("sqlelect-1 led %v after recipe-1's last renewal, later than %v", after, limit)
			}
		})
	}
}

// TestAdoptionRefusesALongRenewDeadline: during an adoption period a recipe
// node takes the row over once last_seen_active is older than its timeout,
// whatever lease_ms says, so Run refuses (ErrInvalidConfig, at once, on both
// backends) a renew deadline a leader could still be leading at by then;
// one well within it runs.
func TestAdoptionRefusesALongRenewDeadline(t *testing.T) {
	t.Parallel() // its subtests wait on the recipe's timeouts, each on a database of its own

	const timeout = 3 * time.Second // adopted lease 4 s: renew deadlines up to 2 s
	for _, backend := range []string{"table", "lock"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			t.Cleanup(cancel)
			db, m, _ := recipeDB(t, ctx)
			if _, err := m.Adopt(ctx, schema.AdoptOptions{RecipeTimeout: timeout}); err != nil {
				t.Fatal(err)
			}
			newElection := election.NewTable
			if backend == "lock" {
				newElection = election.NewLock
			}
			for _, tc := range []struct {
				deadline time.Duration
				refused  bool
			}{{2500 * time.Millisecond, true}, {2 * time.Second, false}} {
				elected := make(chan struct{}, 1)
				e, err := newElection(db, election.Config{Name: "adopt-deadline", ID: "c", LeaseDuration: 4 * time.Second,
					Tuning: election.TuningConfig{RenewDeadline: tc.deadline, RetryInterval: 100 * time.Millisecond, DisableLockDelay: true}, Callbacks: election.Callbacks{OnElected: func(context.Context, election.Leadership) {
						select {
						case elected <- struct{}{}:
						default:
						}
					}}})
				if err != nil {
					t.Fatal(err)
				}
				rctx, rcancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- e.Run(rctx) }()
				if tc.refused {
					if err := <-done; !errors.Is(err, election.ErrInvalidConfig) {
						t.Errorf("renew deadline %v: Run = %v, want ErrInvalidConfig", tc.deadline, err)
					}
					rcancel()
					continue
				}
				select {
				case <-elected:
				case err := <-done:
					t.Fatalf("renew deadline %v: Run = %v before leading", tc.deadline, err)
				case <-ctx.Done():
					t.Fatalf("renew deadline %v: not elected", tc.deadline)
				}
				rcancel()
				if err := <-done; err != nil {
					t.Errorf("renew deadline %v: Run = %v", tc.deadline, err)
				}
			}
		})
	}
}
