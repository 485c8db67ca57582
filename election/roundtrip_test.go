package election_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestOneRoundTripPerStatement (issue 33, item 3): on a DSN without
// interpolateParams, a statement with arguments costs three round trips (a
// server-side prepare, an execute and a close). The library writes its
// values into its statements as literals (stmt.Bind), so a leader's
// renewals, a follower's looks and a takeover's statements take one round
// trip each on any DSN: while they campaign, on both backends, the server
// prepares nothing, nor at their preflights. A server of its own, whose
// Com_stmt_prepare counts only theirs.
func TestOneRoundTripPerStatement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, dsn := testdb.OwnServer(t, ctx)
	admin := testdb.Open(t, dsn)
	prepared := func() (n int64) {
		var name string
		if err := admin.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		backend string
		new     func(*sql.DB, election.Config) (*election.Candidate, error)
	}{
		{"table", election.NewTable},
		{"lock", election.NewLock},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			name := "round-trip-" + randHex(4)
			w := newOverlapWatch()
			start := prepared()
			var l *election.Candidate
			sawL := make(chan struct{})
			for _, id := range []string{"L", "F"} {
				cfg := sessionClockConfig(name, id)
				cfg.Callbacks = w.callbacks(id, func() []election.Election { return nil })
				if id == "F" {
					var once sync.Once
					cfg.Callbacks.OnLeaderChanged = func(r election.Record) {
						if r.ID == "L" {
							once.Do(func() { close(sawL) })
						}
					}
				}
				e, err := tc.new(testdb.Open(t, dsn), cfg)
				if err != nil {
					t.Fatal(err)
				}
				runElection(t, ctx, e)
				if id == "L" {
					w.waitElected(t, ctx, "L")
					l = e
				}
			}
			select { // F's preflight is done: it follows L
			case <-sawL:
			case <-ctx.Done():
				t.Fatal("F never saw L lead")
			}
			before := prepared()
			if n := before - start; n != 0 {
				t.Errorf("the server prepared %d statements over L's and F's preflights and L's election: want none", n)
			}
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			last, renewals := l.Progress().LastRenewal, 0
			for renewals < 3 {
				select {
				case <-tick.C:
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				}
				if r := l.Progress().LastRenewal; !r.Equal(last) {
					last, renewals = r, renewals+1
				}
			}
			if n := prepared() - before; n != 0 {
				t.Errorf("the server prepared %d statements over three of L's renewals and F's looks meanwhile: want none", n)
			}
			// L resigns and F takes over (the term floor's transaction).
			before = prepared()
			if err := l.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			w.waitElected(t, ctx, "F")
			if n := prepared() - before; n != 0 {
				t.Errorf("the server prepared %d statements over L's resignation and F's takeover: want none", n)
			}
		})
	}
}
