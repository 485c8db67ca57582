package members_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/members"
)

// lastSeen returns the last_seen of every member row of the test's
// database, by election.
func lastSeen(t testing.TB, ctx context.Context, db *sql.DB) map[string]int64 {
	t.Helper()
	rows, err := db.QueryContext(ctx, `SELECT anchor, last_seen FROM service_election_members`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]int64{}
	for rows.Next() {
		var name string
		var at int64
		if err := rows.Scan(&name, &at); err != nil {
			t.Fatal(err)
		}
		seen[name] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return seen
}

// newBatcher returns a members.Batcher of the default table on db.
func newBatcher(t *testing.T, db *sql.DB) *members.Batcher {
	t.Helper()
	mb, err := members.NewBatcher(db, "")
	if err != nil {
		t.Fatal(err)
	}
	return mb
}

// TestBatcherRefreshes: the members of 50 elections run through one
// Batcher all register, stay live and refresh, each twice, with one
// statement for many members: at least five times fewer statements than
// refreshes, and none that falls back to a member's own. On both backends
// (the table backend's candidates share an election.Batcher too).
func TestBatcherRefreshes(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx, db := setup(t)
			mb := newBatcher(t, db)
			eb, err := election.NewBatcher(db, election.BatcherOptions{})
			if err != nil {
				t.Fatal(err)
			}
			const n = 50
			prefix := randName(t)
			for i := range n {
				cfg := config(fmt.Sprintf("%s-%d", prefix, i), "m")
				// No bells (two connections per leader): 50 lock-backend
				// leaders would need 150 connections of the shared server.
				cfg.Tuning.DisableFastHandover = true
				if be.name == "table" {
					cfg.Tuning.Batcher = eb
				}
				start(t, ctx, db, be.new, cfg, members.Options{Batcher: mb})
			}
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			var first map[string]int64
			for first = lastSeen(t, ctx, db); len(first) < n; first = lastSeen(t, ctx, db) {
				select {
				case <-tick.C:
				case <-ctx.Done():
					t.Fatalf("%d of %d members registered", len(first), n)
				}
			}
			before, _ := members.Counts(mb)
			// Count each member's refreshes until every one refreshed twice.
			prev, refreshed := first, map[string]int{}
			for done := 0; done < n; {
				select {
				case <-tick.C:
				case <-ctx.Done():
					t.Fatalf("%d of %d members refreshed twice", done, n)
				}
				done = 0
				for name, at := range lastSeen(t, ctx, db) {
					if at != prev[name] {
						refreshed[name]++
					}
					prev[name] = at
					if refreshed[name] >= 2 {
						done++
					}
				}
			}
			statements, fallbacks := members.Counts(mb)
			statements -= before
			total := 0
			for _, k := range refreshed {
				total += k
			}
			t.Logf("%d members: %d refreshes seen, %d batched statements", n, total, statements)
			if statements == 0 || statements*5 > uint64(total) || fallbacks != 0 {
				t.Errorf("%d statements for %d refreshes, %d members refreshed on their own; want at most one statement per 5 refreshes, none on their own",
					statements, total, fallbacks)
			}
			ms, err := members.List(ctx, db, "", prefix+"-0")
			if err != nil || len(ms) != 1 || !ms[0].Live {
				t.Fatalf("members %+v, %v; want one live", ms, err)
			}
		})
	}
}

// TestBatcherLostToAnotherIncarnation: a batched member whose row another
// incarnation took (as TestLostToAnotherIncarnation) falls back to its own
// refresh and stops with the DuplicateError; the other members of its
// Batcher stay live. On both backends.
func TestBatcherLostToAnotherIncarnation(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx, db := setup(t)
			mb := newBatcher(t, db)
			const n = 5
			prefix := randName(t)
			cs := make([]*election.Candidate, n)
			stops := make([]func() error, n)
			for i := range n {
				cs[i], stops[i] = start(t, ctx, db, be.new, config(fmt.Sprintf("%s-%d", prefix, i), "y"), members.Options{Host: "stalled", Batcher: mb})
			}
			lost := prefix + "-0"
			waitMembers(t, ctx, db, lost, "y live and campaigning", func(ms []members.Member) bool { return len(ms) == 1 && ms[0].Live && ms[0].Healthy })
			if _, err := db.ExecContext(ctx, `UPDATE service_election_members SET incarnation = 'feedfacefeedface', host = 'other'
WHERE anchor = ?`, lost); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, ctx, cs[0])
			var dup *members.DuplicateError
			if err := stops[0](); !errors.As(err, &dup) || dup.Other.Host != "other" {
				t.Fatalf("Run: %v; want a DuplicateError naming host other", err)
			}
			if _, fallbacks := members.Counts(mb); fallbacks == 0 {
				t.Error("no member refreshed on its own")
			}
			// The others refresh on.
			seen := lastSeen(t, ctx, db)
			for i := 1; i < n; i++ {
				name := fmt.Sprintf("%s-%d", prefix, i)
				waitMembers(t, ctx, db, name, name+" refreshed", func(ms []members.Member) bool {
					return len(ms) == 1 && ms[0].Live && ms[0].LastSeen.UnixMicro() > seen[name]
				})
				if !cs[i].Progress().Running {
					t.Errorf("%s stopped", name)
				}
			}
		})
	}
}

// TestBatcherOtherTable: a Batcher of another election table is refused
// before registering.
func TestBatcherOtherTable(t *testing.T) {
	t.Parallel()
	ctx, db := setup(t)
	mb, err := members.NewBatcher(db, "other_election")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(randName(t), "x")
	c, err := election.NewTable(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := members.Run(ctx, db, c, cfg, members.Options{Batcher: mb}); !errors.Is(err, election.ErrInvalidConfig) || c.Progress().Running {
		t.Fatalf("Run: %v; want ErrInvalidConfig", err)
	}
	if _, err := members.NewBatcher(db, "no-such table"); !errors.Is(err, election.ErrInvalidConfig) {
		t.Fatalf("NewBatcher with an invalid table: %v", err)
	}
}

// idle is a candidate that campaigns for nothing: it runs until its
// context ends, healthy, never leading, so that the members' statements
// are the only ones.
type idle struct{ name, id string }

func (c idle) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (c idle) Name() string                  { return c.name }
func (c idle) ID() string                    { return c.id }
func (c idle) Progress() election.Progress   { return election.Progress{Running: true, Healthy: true} }
func (c idle) IsLeader() bool                { return false }
func (c idle) Transfer(context.Context, string) error {
	return nil
}

// BenchmarkRefreshStatements measures the UPDATEs per second of 1,000
// members at a 2 s lease (a refresh every second each) on their own and
// through one Batcher, counted by the server (Com_update) over 5 s once
// all registered (BENCHMARKS.md, "The cost of members"):
//
//	go test -run '^$' -bench RefreshStatements ./members/
func BenchmarkRefreshStatements(b *testing.B) {
	for _, batched := range []bool{false, true} {
		b.Run(map[bool]string{false: "own", true: "batched"}[batched], func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(refreshRate(b, batched), "statements/s")
			}
		})
	}
}

func refreshRate(b *testing.B, batched bool) float64 {
	const n, window = 1000, 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(b)
	testdb.Migrate(b, dsn)
	db := testdb.Open(b, dsn)
	db.SetMaxOpenConns(50)
	var o members.Options
	if batched {
		var err error
		if o.Batcher, err = members.NewBatcher(db, ""); err != nil {
			b.Fatal(err)
		}
	}
	rctx, stop := context.WithCancel(ctx)
	errs := make(chan error, n)
	prefix := "bench"
	for i := range n {
		c := idle{fmt.Sprintf("%s-%d", prefix, i), "m"}
		cfg := election.Config{Name: c.name, ID: c.id, LeaseDuration: 2 * time.Second}
		go func() { errs <- members.Run(rctx, db, c, cfg, o) }()
	}
	defer func() {
		stop()
		for range n {
			if err := <-errs; err != nil {
				b.Error(err)
			}
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(lastSeen(b, ctx, db)) < n {
		select {
		case <-tick.C:
		case <-ctx.Done():
			b.Fatal("the members did not register")
		}
	}
	updates := func() (v int64) {
		var name string
		if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Com_update'").Scan(&name, &v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	from, t0 := updates(), time.Now()
	time.Sleep(window) // a measurement window, not a wait for a condition
	rate := float64(updates()-from) / time.Since(t0).Seconds()
	return rate
}

// TestBatcherStatementUsesKey: the batched UPDATE finds its rows by the
// primary key's ranges, for one member, two, a full batch and most of a
// table of 2,000 rows, where a scan would lock every row of the table.
// Without FORCE INDEX, MariaDB 11.8 scanned for 500 rows of 2,000; and it
// scans for a list of one row value, forced or not, which a batch of one
// therefore does not use.
func TestBatcherStatementUsesKey(t *testing.T) {
	t.Parallel()
	ctx, db := setup(t)
	var q strings.Builder
	q.WriteString(`INSERT INTO service_election_members (anchor, member_id, incarnation, started_at, last_seen, lease_ms) VALUES `)
	for i := range 2000 {
		if i > 0 {
			q.WriteByte(',')
		}
		fmt.Fprintf(&q, "('e-%d', 'm', '%016x', 1, 1, 1000)", i, i)
	}
	if _, err := db.ExecContext(ctx, q.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE service_election_members"); err != nil {
		t.Fatal(err)
	}
	explain := testdb.Explain(t, ctx, db)
	mb := newBatcher(t, db)
	for _, n := range []int{1, 2, 500, 1500} {
		query, args := members.RefreshStatement(mb, "e", n)
		for _, plan := range testdb.Rows(t, ctx, db, explain+query, args...) {
			if plan["key"] != "PRIMARY" || plan["type"] == "index" || plan["type"] == "ALL" {
				t.Errorf("%d members: the plan %v; want the primary key's range", n, plan)
			}
		}
	}
}
