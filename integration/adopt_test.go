package integration

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/testdb"
	"github.com/sqlelect/sqlelect/schema"
)

// The MySQL-table recipe (the seed this project grows out of), with a 3 s
// timeout and a poll every 250 ms instead of 20 s and 1 s, so that the test
// takes seconds. Its table and statements are verbatim otherwise.
const (
	recipeTimeout  = 3 * time.Second
	recipeInterval = 250 * time.Millisecond
	recipeTable    = `CREATE TABLE service_election (
  anchor tinyint(3) unsigned NOT NULL,
  service_id varchar(128) NOT NULL,
  last_seen_active timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (anchor)
)`
	recipeAttempt = `insert ignore into service_election (
	anchor, service_id, last_seen_active
) values (
	1, ?, now()
) on duplicate key update
	service_id = if(last_seen_active < now() - interval 3 second, values(service_id), service_id),
	last_seen_active = if(service_id = values(service_id), values(last_seen_active), last_seen_active)`
	recipeAmI = `select count(*) as is_leader from service_election where anchor=1 and service_id=?`
)

// belief is a span during which a node believed it led. end is zero while
// it still does.
type belief struct {
	node       string
	start, end time.Time
}

// beliefs records every node's spans, recipe nodes and sqlelect candidates
// alike, on this process's monotonic clock.
type beliefs struct {
	mu    sync.Mutex
	spans []belief
	open  map[string]int
	sent  map[string]time.Time // a recipe node's last renewal as holder, when it was sent
}

func (b *beliefs) renewed(node string, sent time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sent == nil {
		b.sent = map[string]time.Time{}
	}
	b.sent[node] = sent
}

func (b *beliefs) lastRenewal(node string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent[node]
}

func (b *beliefs) begin(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open = map[string]int{}
	}
	b.open[node] = len(b.spans)
	b.spans = append(b.spans, belief{node: node, start: time.Now()})
}

func (b *beliefs) finish(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i, ok := b.open[node]; ok {
		b.spans[i].end = time.Now()
		delete(b.open, node)
	}
}

// leaders returns the nodes that believe they lead now.
func (b *beliefs) leaders() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ls []string
	for n := range b.open {
		ls = append(ls, n)
	}
	sort.Strings(ls)
	return ls
}

// count returns how many spans node had.
func (b *beliefs) count(node string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.spans {
		if s.node == node {
			n++
		}
	}
	return n
}

// takeover returns when the first span of a node accepted by kind began
// after t, and the order in which nodes led.
func (b *beliefs) takeover(t time.Time, kind func(string) bool) (time.Time, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first time.Time
	var order []string
	for _, s := range b.spans {
		order = append(order, s.node)
		if kind(s.node) && s.start.After(t) && first.IsZero() {
			first = s.start
		}
	}
	return first, strings.Join(order, " -> ")
}

// overlaps returns every pair of spans of different nodes that intersect,
// and the longest intersection.
func (b *beliefs) overlaps() ([]string, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var out []string
	var worst time.Duration
	for i, x := range b.spans {
		for _, y := range b.spans[i+1:] {
			xe, ye := x.end, y.end
			if xe.IsZero() {
				xe = now
			}
			if ye.IsZero() {
				ye = now
			}
			from, to := later(x.start, y.start), earlier(xe, ye)
			if x.node != y.node && from.Before(to) {
				out = append(out, fmt.Sprintf("%s and %s both led for %v", x.node, y.node, to.Sub(from)))
				worst = max(worst, to.Sub(from))
			}
		}
	}
	return out, worst
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// fleet starts and stops recipe nodes and sqlelect candidates.
type fleet struct {
	t   *testing.T
	db  *sql.DB
	b   *beliefs
	mu  sync.Mutex
	off map[string]func()
}

// recipeNode runs the recipe as published: every interval, the election
// statement, then "am I the leader"; it believes the last answer (an error
// counts as "no", as in integration/bench/seedcandidate) until the next,
// and stops believing when it stops.
func (f *fleet) recipeNode(id string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.b.finish(id)
		tick := time.NewTicker(recipeInterval)
		defer tick.Stop()
		leading := false
		for {
			qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
			n := 0
			sent := time.Now()
			_, err := f.db.ExecContext(qctx, recipeAttempt, id)
			if err == nil {
				err = f.db.QueryRowContext(qctx, recipeAmI, id).Scan(&n)
			}
			qcancel()
			if ctx.Err() != nil {
				return
			}
			if err == nil && n == 1 {
				f.b.renewed(id, sent)
			}
			switch {
			case err == nil && n == 1 && !leading:
				leading = true
				f.b.begin(id)
			case (err != nil || n != 1) && leading:
				leading = false
				f.b.finish(id)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	f.add(id, func() { cancel(); <-done })
}

// candidate runs a sqlelect table-backend candidate on election "1" (the
// recipe's anchor 1) with a 3 s lease: its renew deadline, 2 s, is below
// the recipe's timeout.
func (f *fleet) candidate(id string) {
	e, err := election.NewTable(f.db, election.Config{
		Name: "1", ID: id, LeaseDuration: 3 * time.Second, Tuning: election.TuningConfig{RenewDeadline: 2 * time.Second, RenewInterval: 200 * time.Millisecond, RetryInterval: 200 * time.Millisecond, QueryTimeout: time.Second},
		Callbacks: election.Callbacks{OnElected: func(ctx context.Context, l election.Leadership) {
			f.b.begin(id)
			<-ctx.Done()
			f.b.finish(id)
		}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	f.add(id, func() {
		cancel()
		if err := <-done; err != nil && err != context.Canceled {
			f.t.Errorf("%s: Run: %v", id, err)
		}
	})
}

func (f *fleet) add(id string, stop func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off[id] = stop
}

func (f *fleet) stop(id string) {
	f.mu.Lock()
	stop := f.off[id]
	delete(f.off, id)
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	ids := make([]string, 0, len(f.off))
	for id := range f.off {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.stop(id)
	}
}

// waitLeader waits until exactly one node believes it leads, and returns it.
func (f *fleet) waitLeader(ctx context.Context, within time.Duration, accept func(string) bool) string {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if ls := f.b.leaders(); len(ls) == 1 && accept(ls[0]) {
			return ls[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatalf("no single leader of the expected kind within %v; leaders %v", within, f.b.leaders())
	return ""
}

func isRecipe(id string) bool   { return strings.HasPrefix(id, "recipe-") }
func isSqlelect(id string) bool { return strings.HasPrefix(id, "sqlelect-") }

// recipeDB returns a new database holding the recipe's table, a Migrator
// on it and its DSN.
func recipeDB(t *testing.T, ctx context.Context) (*sql.DB, *schema.Migrator, string) {
	t.Helper()
	dsn := testdb.DSN(t)
	db := testdb.Open(t, dsn)
	if _, err := db.ExecContext(ctx, recipeTable); err != nil {
		t.Fatal(err)
	}
	return db, schema.New(db), dsn
}

func newFleet(t *testing.T) (context.Context, *fleet, *schema.Migrator) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	db, m, _ := recipeDB(t, ctx)
	f := &fleet{t: t, db: db, b: &beliefs{}, off: map[string]func(){}}
	t.Cleanup(f.stopAll)
	return ctx, f, m
}

// TestAdoptRecipeWhileRunning moves a running recipe deployment to sqlelect
// as docs/adopting.md ("Moving from the MySQL-table recipe") says: with the recipe's
// nodes running, adopt the table; the recipe's holder keeps leading; start
// sqlelect candidates, which follow; stop the recipe's nodes, the holder
// last (or first: its followers may then take over by the recipe's rule,
// which is safe too); a sqlelect candidate takes over once the holder's
// lease (the recipe's timeout) has run out. At no instant do two nodes of
// either kind believe they lead.
func TestAdoptRecipeWhileRunning(t *testing.T) {
	t.Parallel() // its subtests wait on the recipe's timeouts, each on a database of its own
	for _, holderLast := range []bool{true, false} {
		t.Run(fmt.Sprintf("holder-last=%v", holderLast), func(t *testing.T) {
			t.Parallel() // a fleet and a database of its own; it waits on the recipe's timeouts
			ctx, f, m := newFleet(t)
			for i := 1; i <= 3; i++ {
				f.recipeNode(fmt.Sprintf("recipe-%d", i))
			}
			holder := f.waitLeader(ctx, 3*recipeInterval+time.Second, isRecipe)
			time.Sleep(2 * recipeInterval)

			hs, err := m.Adopt(ctx, schema.AdoptOptions{RecipeTimeout: recipeTimeout})
			if err != nil {
				t.Fatal(err)
			}
			if len(hs) != 1 || hs[0].Election != "1" || hs[0].ID != holder || hs[0].LeaseLeft <= 0 {
				t.Fatalf("Adopt kept %+v, want election 1 held by %s, live", hs, holder)
			}
			for i := 1; i <= 3; i++ {
				f.candidate(fmt.Sprintf("sqlelect-%d", i))
			}
			// Two recipe timeouts: the recipe's holder keeps leading,
			// without a break, and the candidates follow.
			time.Sleep(2 * recipeTimeout)
			if ls := f.b.leaders(); len(ls) != 1 || ls[0] != holder || f.b.count(holder) != 1 {
				t.Fatalf("after adopt and the candidates' start: leaders %v (%d spans of %s), want %s throughout",
					ls, f.b.count(holder), holder, holder)
			}

			var stopped time.Time
			if holderLast {
				for i := 1; i <= 3; i++ {
					if id := fmt.Sprintf("recipe-%d", i); id != holder {
						f.stop(id)
					}
				}
				stopped = time.Now()
				f.stop(holder)
			} else {
				stopped = time.Now()
				f.stop(holder)
				time.Sleep(recipeTimeout + 2*time.Second) // a recipe follower may take over
				for i := 1; i <= 3; i++ {
					f.stop(fmt.Sprintf("recipe-%d", i))
				}
			}
			// The holder's lease: the recipe's timeout from its last renewal
			// (whole seconds, by the recipe's NOW()), then a retry interval.
			winner := f.waitLeader(ctx, 2*recipeTimeout+2*time.Second, isSqlelect)
			at, order := f.b.takeover(stopped, isSqlelect)
			last := f.b.lastRenewal(holder)
			t.Logf("%s led %v after the recipe's holder %s stopped, %v after its last renewal was sent; leaders in order: %s",
				winner, at.Sub(stopped).Round(time.Millisecond), holder, at.Sub(last).Round(time.Millisecond), order)
			// The lease carries on: no sqlelect candidate leads sooner than
			// the recipe's timeout after the holder's last renewal.
			if holderLast && at.Sub(last) < recipeTimeout {
				t.Errorf("%s led %v after %s's last renewal, sooner than the recipe's timeout %v", winner, at.Sub(last), holder, recipeTimeout)
			}
			time.Sleep(time.Second)
			f.stopAll()
			if ov, worst := f.b.overlaps(); len(ov) > 0 {
				t.Errorf("two leaders at once (longest %v): %s", worst, strings.Join(ov, "; "))
			}
		})
	}
}

// TestAdoptRecipeHazard shows the overlap docs/adopting.md warns about, so that the
// warning stays true: a sqlelect leader that resigns (released = 1) while a
// recipe node still runs and no other candidate is there; the recipe node
// takes the row by its own rule, which leaves released = 1; a sqlelect
// candidate that starts then wins the released row at once, while the
// recipe node believes it leads until its next poll. The documented order
// (stop every recipe node before a sqlelect candidate can hold the row)
// never gets here.
func TestAdoptRecipeHazard(t *testing.T) {
	ctx, f, m := newFleet(t)
	f.recipeNode("recipe-1")
	f.waitLeader(ctx, 3*recipeInterval+time.Second, isRecipe)
	if _, err := m.Adopt(ctx, schema.AdoptOptions{RecipeTimeout: recipeTimeout}); err != nil {
		t.Fatal(err)
	}
	f.candidate("sqlelect-1")
	f.stop("recipe-1")
	f.waitLeader(ctx, 2*recipeTimeout+2*time.Second, isSqlelect)
	f.recipeNode("recipe-2")
	time.Sleep(time.Second)
	f.stop("sqlelect-1") // resigns: released = 1
	f.waitLeader(ctx, 2*recipeTimeout+2*time.Second, isRecipe)
	// Start sqlelect-2 just after one of recipe-2's polls: it takes the
	// released row at its first look, a few milliseconds later, and
	// recipe-2 believes it leads until its next poll, a recipe interval
	// after the last. Started at a random moment instead, the takeover
	// could land between recipe-2's poll and sqlelect-2's OnElected (which
	// records the belief), and no overlap would show.
	for last := f.b.lastRenewal("recipe-2"); f.b.lastRenewal("recipe-2").Equal(last); time.Sleep(time.Millisecond) {
		if ctx.Err() != nil {
			t.Fatal("recipe-2 stopped polling")
		}
	}
	f.candidate("sqlelect-2")
	f.waitLeader(ctx, 2*recipeTimeout, isSqlelect)
	time.Sleep(2 * recipeInterval)
	f.stopAll()
	ov, worst := f.b.overlaps()
	if len(ov) == 0 {
		t.Fatal("no overlap: docs/adopting.md's warning about resigning while recipe nodes run is out of date")
	}
	if worst > recipeInterval+500*time.Millisecond {
		t.Errorf("overlap %v, longer than the recipe's poll interval %v (+500ms): %s", worst, recipeInterval, strings.Join(ov, "; "))
	}
	t.Logf("the hazard, as documented: %s", strings.Join(ov, "; "))
}
