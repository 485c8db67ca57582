package history_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/history"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/netfault"
	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/operator"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var backends = []struct {
	name string
	new  func(*sql.DB, election.Config) (*election.Candidate, error)
}{
	{"table", election.NewTable},
	{"lock", election.NewLock},
}

// setup returns a context with the test's deadline, a migrated database of
// the test's own (its DSN and a pool) and a random election name.
func setup(t *testing.T) (context.Context, string, *sql.DB, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	var b [4]byte
	_, _ = rand.Read(b[:])
	return ctx, dsn, testdb.Open(t, dsn), "h-" + hex.EncodeToString(b[:])
}

// leaderships records every leadership the candidates reported: term →
// holder.
type leaderships struct {
	mu sync.Mutex
	m  map[uint64]string
}

func (l *leaderships) add(id string, term uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[term] = id
}

// start runs candidate id of election name until the test ends.
func start(t *testing.T, ctx context.Context, db *sql.DB, newC func(*sql.DB, election.Config) (*election.Candidate, error), name, id string, seen *leaderships) *election.Candidate {
	t.Helper()
	cfg := election.Config{Name: name, ID: id, LeaseDuration: time.Second,
		Tuning:    election.TuningConfig{RenewInterval: 100 * time.Millisecond, RetryInterval: 100 * time.Millisecond, QueryTimeout: 500 * time.Millisecond},
		Callbacks: election.Callbacks{OnElected: func(_ context.Context, l election.Leadership) { seen.add(id, l.Term) }}}
	c, err := newC(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// waitFor polls cond every 10 ms until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// exec runs each statement on db.
func exec(t *testing.T, ctx context.Context, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// list is the whole kept history of election name.
func list(t *testing.T, ctx context.Context, db *sql.DB, name string) []history.Term {
	t.Helper()
	hs, err := history.List(ctx, db, "", name, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// leader is the candidate of cs that leads, nil for none.
func leader(cs ...*election.Candidate) *election.Candidate {
	for _, c := range cs {
		if c.IsLeader() {
			return c
		}
	}
	return nil
}

// TestHistory drives one election through every way a term begins and
// ends, on both backends, and checks that the history says so: first, a
// transfer, a resignation, an operator's DELETE, an operator's Assume and
// its claim, and an expiry (the leader cut off from the database). Its
// terms increase with their starts, each ends between its start and the
// next one's, and every leadership the candidates reported is a term of
// the history with its holder.
func TestHistory(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx, dsn, db, name := setup(t)
			seen := &leaderships{m: map[uint64]string{}}
			op, err := operator.New(db, "")
			if err != nil {
				t.Fatal(err)
			}
			// Each candidate reaches the server through a proxy of its own,
			// which the expiry cuts.
			proxies := map[string]*netfault.Proxy{}
			run := func(id string) *election.Candidate {
				cfg, err := mysql.ParseDSN(dsn)
				if err != nil {
					t.Fatal(err)
				}
				p, err := netfault.Start(cfg.Addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				proxies[id], cfg.Addr = p, p.Addr()
				return start(t, ctx, testdb.Open(t, cfg.FormatDSN()), b.new, name, id, seen)
			}
			a := run("a")
			waitFor(t, ctx, "a leads", a.IsLeader)
			bb := run("b")
			cs := []*election.Candidate{a, bb}
			other := func(c *election.Candidate) *election.Candidate {
				return map[bool]*election.Candidate{true: bb, false: a}[c == a]
			}
			// next waits for a leader with a term above the current
			// leader's (or b's, before the first step), and returns it.
			term := uint64(0)
			next := func(what string) *election.Candidate {
				t.Helper()
				waitFor(t, ctx, what, func() bool { l := leader(cs...); return l != nil && l.Term() > term })
				l := leader(cs...)
				term = l.Term()
				return l
			}

			if err := a.Transfer(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			if l := next("b leads after the transfer"); l != bb {
				t.Fatalf("%s leads after the transfer to b", l.ID())
			}
			if err := bb.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			next("a leader after b resigned")
			if _, err := op.Reelect(ctx, name); err != nil {
				t.Fatal(err)
			}
			l := next("a leader after the DELETE")
			if _, err := op.Assume(ctx, name, other(l).ID()); err != nil {
				t.Fatal(err)
			}
			if l = next("the assumed candidate leads"); l == nil {
				t.Fatal("no leader")
			}
			proxies[l.ID()].Blackhole(true)
			next("the other candidate leads after the leader was cut off")
			proxies[l.ID()].Blackhole(false)

			hs := list(t, ctx, db, name)
			var got []string
			for i, h := range hs {
				got = append(got, h.Holder+":"+h.Began+">"+h.End)
				switch {
				case h.Election != name || h.Started.IsZero():
					t.Errorf("term %d: %+v", i, h)
				case i > 0 && (h.Term <= hs[i-1].Term || h.Started.Before(hs[i-1].Started)):
					t.Errorf("term %d does not follow term %d: %+v after %+v", i, i-1, h, hs[i-1])
				case i > 0 && (hs[i-1].Ended.IsZero() || hs[i-1].Ended.After(h.Started) || hs[i-1].Ended.Before(hs[i-1].Started)):
					t.Errorf("term %d ended at %v, not between its start and term %d's start %v", i-1, hs[i-1].Ended, i, h.Started)
				}
			}
			// How each step's term began, and how it says the term before
			// it ended, in order (others may come between: a candidate
			// that lost a take it had not yet led with, say).
			want := [][2]string{{"first", ""}, {"transferred", "transferred"}, {"released", "resigned"}, {"insert", "deleted"},
				{"operator", "replaced"}, {"claimed", "claimed"}, {"expired", "expired"}}
			i := 0
			for j, h := range hs {
				w := want[min(i, len(want)-1)]
				if b.name == "lock" && i == len(want)-1 && h.Began == "lock" {
					w = [2]string{"lock", "lost"} // the lock's holder left without a release
				}
				if i < len(want) && h.Began == w[0] && (j == 0 || hs[j-1].End == w[1]) {
					i++
				}
				// A holder that let go wrote its own end, in its release's
				// transaction: before the next term began (the next holder
				// would have written that term's start).
				if j > 0 && (h.Began == "transferred" || h.Began == "released") && !hs[j-1].Ended.Before(h.Started) {
					t.Errorf("term %d (%s) ended at %v, the next one's start: its holder did not record its own end", j-1, hs[j-1].End, hs[j-1].Ended)
				}
			}
			if i < len(want) || hs[len(hs)-1].End != "" {
				t.Errorf("history (holder:began>end): %s\nwant, in order, each began>end pair of the term before: %v", strings.Join(got, " "), want)
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			terms := map[uint64]string{}
			for _, h := range hs {
				terms[h.Term] = h.Holder
			}
			for term, id := range seen.m {
				if terms[term] != id {
					t.Errorf("%s led term %d, which the history gives to %q", id, term, terms[term])
				}
			}
		})
	}
}

// TestHistoryKeepsTheLast: a term goes over the oldest of the election's
// floor.HistoryKeep terms, and leaves other elections' alone.
func TestHistoryKeepsTheLast(t *testing.T) {
	ctx, _, db, name := setup(t)
	var vals []string
	for i := range floor.HistoryKeep {
		vals = append(vals, fmt.Sprintf("('%s', %d, %d, 'old', 'insert', %d, %d, 'expired'), ('other', %d, %d, 'old', 'insert', %d, %d, 'expired')",
			name, i, i+1, i+1, i+2, i, i+1, i+1, i+2))
	}
	exec(t, ctx, db,
		"INSERT INTO service_election_history (anchor, slot, term, holder, began, started_at, ended_at, ended) VALUES "+strings.Join(vals, ", "),
		fmt.Sprintf("UPDATE service_election_history SET ended_at = NULL, ended = NULL WHERE anchor = '%s' AND term = %d", name, floor.HistoryKeep),
		fmt.Sprintf("INSERT INTO service_election_floor (anchor, term_floor, terms) VALUES ('%s', %d, %d)", name, floor.HistoryKeep, floor.HistoryKeep-1))
	c := start(t, ctx, db, election.NewTable, name, "a", &leaderships{m: map[uint64]string{}})
	waitFor(t, ctx, "a leads", c.IsLeader)
	hs := list(t, ctx, db, name)
	if len(hs) != floor.HistoryKeep || hs[0].Term != 2 || hs[len(hs)-1].Term != c.Term() || hs[len(hs)-1].Holder != "a" {
		t.Fatalf("%d terms, from %d to %d, want %d from 2 to a's %d", len(hs), hs[0].Term, hs[len(hs)-1].Term, floor.HistoryKeep, c.Term())
	}
	if hs[len(hs)-2].End != "deleted" {
		t.Errorf("the term before a's ended %q, want deleted (a inserted the row)", hs[len(hs)-2].End)
	}
	if others := list(t, ctx, db, "other"); len(others) != floor.HistoryKeep {
		t.Fatalf("other election: %d terms, want %d", len(others), floor.HistoryKeep)
	}
	since, err := history.List(ctx, db, "", "other", time.UnixMicro(floor.HistoryKeep))
	if err != nil || len(since) != 2 {
		t.Fatalf("other election since its 999th term's end: %d terms (%v), want 2", len(since), err)
	}
}

// TestHistoryEnds: a new term ends an open term, and one whose recorded end
// comes after the new term's start (a holder's own end, stamped when it
// ran, that committed after the next holder's take but before it ended the
// terms before it), at its start; and after an operator deleted the
// election's floor row, the history goes on over its oldest slot instead
// of starting again from the first.
func TestHistoryEnds(t *testing.T) {
	ctx, _, db, name := setup(t)
	// Slot 1 holds the newest term; slot 0 the oldest.
	exec(t, ctx, db, fmt.Sprintf("INSERT INTO service_election_history (anchor, slot, term, holder, began, started_at, ended_at, ended) VALUES "+
		"('%[1]s', 0, 10, 'old', 'insert', 10, 11, 'expired'), ('%[1]s', 1, 20, 'late', 'insert', 20, 4102444800000000, 'resigned')", name))
	c := start(t, ctx, db, election.NewTable, name, "a", &leaderships{m: map[uint64]string{}})
	waitFor(t, ctx, "a leads", c.IsLeader)
	hs := list(t, ctx, db, name)
	if len(hs) != 3 || hs[1].Holder != "late" || hs[1].Ended.After(hs[2].Started) || hs[1].End != "deleted" || hs[2].Holder != "a" {
		t.Fatalf("history %+v: want old, late (ended at a's start, deleted: a inserted the row) and a", hs)
	}
}

// TestHistoryAfterFloorTruncated: after an operator's TRUNCATE of the
// floor table, the floor rows written again (the marker's seed) go on
// counting where the history left off: the next term is added, over no
// kept term.
func TestHistoryAfterFloorTruncated(t *testing.T) {
	ctx, _, db, name := setup(t)
	op, err := operator.New(db, "")
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, ctx, db, election.NewTable, name, "a", &leaderships{m: map[uint64]string{}})
	waitFor(t, ctx, "a leads", c.IsLeader)
	count := func() int { return len(list(t, ctx, db, name)) }
	assume := func() {
		t.Helper()
		term := c.Term()
		if _, err := op.Assume(ctx, name, "a"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "a leads again", func() bool { return c.IsLeader() && c.Term() > term })
	}
	assume()
	before := count() // first or insert, operator, claimed
	exec(t, ctx, db, "TRUNCATE TABLE service_election_floor")
	assume()
	if got := count(); got != before+2 {
		t.Fatalf("%d terms after the TRUNCATE and an Assume and its claim, want %d: kept terms were written over", got, before+2)
	}
}
