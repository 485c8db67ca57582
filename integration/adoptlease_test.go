package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/testdb"
	"github.com/sqlelect/sqlelect/schema"
)

// The recipe's statements with its usual 20 s timeout, verbatim: the
// election statement, and the operator's "forcibly assume leadership".
const (
	recipeAttempt20 = `insert ignore into service_election (
	anchor, service_id, last_seen_active
) values (
	1, ?, now()
) on duplicate key update
	service_id = if(last_seen_active < now() - interval 20 second, values(service_id), service_id),
	last_seen_active = if(service_id = values(service_id), values(last_seen_active), last_seen_active)`
	recipeAssume = `replace into service_election (
        anchor, service_id, last_seen_active
    ) values (
        1, ?, now()
    )`
)

// TestAdoptLeaseOfLaterRows: during the adoption period a row written
// without lease_ms, after adopt, gets the recipe's timeout as its lease
// (plus the second its whole-second NOW() may lose), whatever later
// migrations set: a recipe node that inserts the election's row (the table
// was empty, or an operator deleted the row) and leads, then freezes for
// less than its own timeout, is not overtaken by a sqlelect candidate; nor
// is a recipe node an operator made leader with the recipe's REPLACE.
//
// The recipe node's last statement is sent with a session clock 17 s in
// the past (SET @@timestamp, on a connection of its own): the row is then
// exactly what a node that renewed 17 s ago by the database clock and froze
// since would have left, and the test need not wait 17 s. With the
// recipe's 20 s timeout, a candidate must not take the row before 20 s
// after that renewal by the database clock (it takes it at 21 s, when
// the recipe's own nodes would); before the fix it took it at once, the
// row's lease being migration 3's default, 15 s.
func TestAdoptLeaseOfLaterRows(t *testing.T) {
	t.Parallel() // its subtests wait on the recipe's timeouts, each on a database of its own
	const timeout, frozen = 20 * time.Second, 17 * time.Second
	for _, backend := range []string{"table", "lock"} {
		for _, write := range []string{"recipe-insert", "recipe-insert-after-delete", "operator-replace"} {
			t.Run(backend+"/"+write, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				t.Cleanup(cancel)
				dsn := testdb.DSN(t)
				db := testdb.Open(t, dsn)
				if _, err := db.ExecContext(ctx, recipeTable); err != nil {
					t.Fatal(err)
				}
				if write == "recipe-insert-after-delete" {
					if _, err := db.ExecContext(ctx, recipeAttempt20, "recipe-0"); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := schema.New(db).Adopt(ctx, schema.AdoptOptions{RecipeTimeout: timeout}); err != nil {
					t.Fatal(err)
				}
				if write == "recipe-insert-after-delete" {
					if _, err := db.ExecContext(ctx, "delete from service_election"); err != nil { // the recipe's re-election
						t.Fatal(err)
					}
				}

				// The recipe node's (or operator's) statement, executed
				// `frozen` ago by the database clock, on a pool of its own
				// so that the session clock stays there.
				past := testdb.Open(t, dsn)
				past.SetMaxOpenConns(1)
				if _, err := past.ExecContext(ctx, fmt.Sprintf("SET @@timestamp = UNIX_TIMESTAMP() - %d", int(frozen/time.Second))); err != nil {
					t.Fatal(err)
				}
				stmt, want := recipeAttempt20, int64(1) // inserted: the recipe node holds the row
				if write == "operator-replace" {
					stmt = recipeAssume
				}
				res, err := past.ExecContext(ctx, stmt, "recipe-1")
				if err != nil {
					t.Fatal(err)
				}
				if n, err := res.RowsAffected(); err != nil || n != want {
					t.Fatalf("%s: %d rows affected, %v; want %d", write, n, err, want)
				}
				past.Close()
				var last time.Time
				var lease int64
				if err := db.QueryRowContext(ctx, "SELECT last_seen_active, lease_ms FROM service_election WHERE anchor = '1' AND service_id = 'recipe-1'").
					Scan(&last, &lease); err != nil {
					t.Fatal(err)
				}

				elected := make(chan uint64, 1)
				cfg := election.Config{
					Name: "1", ID: "sqlelect-1", Tuning: election.TuningConfig{RetryInterval: 200 * time.Millisecond, QueryTimeout: 2 * time.Second}, Callbacks: election.Callbacks{OnElected: func(ctx context.Context, l election.Leadership) {
						term := l.Term
						select {
						case elected <- term:
						default:
						}
						<-ctx.Done()
					}},
				}
				newElection := election.NewTable
				if backend == "lock" {
					newElection = election.NewLock
				}
				e, err := newElection(db, cfg)
				if err != nil {
					t.Fatal(err)
				}
				rctx, rcancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- e.Run(rctx) }()
				t.Cleanup(func() {
					rcancel()
					if err := <-done; err != nil && err != context.Canceled {
						t.Errorf("Run: %v", err)
					}
				})
				select {
				case <-elected:
				case <-ctx.Done():
					t.Fatalf("sqlelect-1 never led; the row's lease_ms is %d", lease)
				}
				var took time.Time
				var acquired string
				if err := db.QueryRowContext(ctx, "SELECT term_started_at, acquired FROM service_election WHERE anchor = '1' AND service_id = 'sqlelect-1'").
					Scan(&took, &acquired); err != nil {
					t.Fatal(err)
				}
				after := took.Sub(last)
				t.Logf("%s: the row written with lease_ms %d; sqlelect-1 took it (%s) %v after the recipe node's last renewal",
					write, lease, acquired, after.Round(time.Millisecond))
				if after < timeout {
					t.Errorf("%s: sqlelect-1 took the row %v after recipe-1's last renewal (lease_ms %d), "+
						"sooner than the adopted recipe timeout %v: both led for %v",
						write, after.Round(time.Millisecond), lease, timeout, (timeout - after).Round(time.Millisecond))
				}
				// Liveness: the lease is the recipe's timeout plus one
				// second, and the candidate wakes when it ends.
				if limit := timeout + 4*time.Second; after > limit {
					t.Errorf("%s: sqlelect-1 took the row %v after recipe-1's last renewal, later than %v", write, after, limit)
				}
			})
		}
	}
}
