//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/schema"
)

// Fault kinds of TestChaosRecipeAdoption: recipe nodes writing during an
// adoption period.
const (
	// kindRecipeInsert: an operator deletes the row (the recipe's "force
	// re-elections"), a recipe node inserts it with its election
	// statement and leads, then freezes for just under its timeout.
	kindRecipeInsert = "recipe_insert"
	// kindRecipeReplace: an operator makes a recipe node leader with the
	// recipe's REPLACE, and that node freezes for just under its timeout.
	kindRecipeReplace = "recipe_replace"
)

// The recipe as its author published it, with a 16 s timeout: above 15 s,
// the lease migration 3 gives to rows written without lease_ms, so that a
// row that missed the adopted lease shows as an overlap. Its nodes poll
// every 500 ms (the recipe says once a second).
const (
	chaosRecipeTimeout  = 16 * time.Second
	chaosRecipeInterval = 500 * time.Millisecond
	chaosRecipeFreeze   = chaosRecipeTimeout - time.Second
	chaosRecipeTable    = `CREATE TABLE service_election (
  anchor tinyint(3) unsigned NOT NULL,
  service_id varchar(128) NOT NULL,
  last_seen_active timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (anchor)
)`
	chaosRecipeAttempt = `insert ignore into service_election (
	anchor, service_id, last_seen_active
) values (
	1, ?, now()
) on duplicate key update
	service_id = if(last_seen_active < now() - interval 16 second, values(service_id), service_id),
	last_seen_active = if(service_id = values(service_id), values(last_seen_active), last_seen_active)`
	chaosRecipeAmI    = `select count(*) as is_leader from service_election where anchor=1 and service_id=?`
	chaosRecipeAssume = `replace into service_election (
        anchor, service_id, last_seen_active
    ) values (
        1, ?, now()
    )`
	chaosRecipeReelect = `delete from service_election`
)

// TestChaosRecipeAdoption: recipe nodes keep writing the row during an
// adoption period, as docs/adopting.md's steps allow, while sqlelect candidates
// campaign on the adopted table. Two recipe nodes run the recipe's exact
// statements; the recipe's table is adopted under them; two sqlelect
// candidates start; then each fault of this class makes a recipe node
// write the row afresh (an INSERT after the operator's DELETE, or the
// operator's REPLACE naming it), lead, and freeze for a second less than
// the recipe's timeout, as the frozen recipe holder. A recipe node
// leads from the poll whose "am I the leader" says 1 to the next poll that
// says otherwise (frozen, it still believes it leads); a sqlelect
// candidate from OnElected to the end of its context. The check: no
// recipe node and sqlelect candidate lead at one instant, nor two sqlelect
// candidates (two recipe nodes may, briefly, after the operator's REPLACE:
// the recipe's own behaviour). Both backends run at once, in two databases
// of one server: about 45 s. The history (migration 10) is not checked
// here: the recipe nodes' terms are not in it, and this test keeps its own
// timeline rather than the checker's records (cluster.finish).
func TestChaosRecipeAdoption(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite takes minutes; skipped under -short")
	}
	rounds(t)
	faults := selectFaults(t, []fault{{kind: kindRecipeInsert}, {kind: kindRecipeReplace}})
	// A server of its own, and it waits on leases more than it computes:
	// beside the suite's other short tests once TestChaos and the cluster
	// tests (run one at a time before them) have ended.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	srv := startServer(t, ctx)
	for _, backend := range []string{"table", "lock"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			chaosRecipe(t, ctx, srv, backend, faults)
		})
	}
}

// span is one leadership, as its holder believed it, on this process's
// monotonic clock; end is zero while it lasts.
type span struct {
	who        string
	start, end time.Time
}

// timeline records every node's leaderships, recipe nodes and sqlelect
// candidates alike, and signals every change.
type timeline struct {
	mu      sync.Mutex
	spans   []span
	open    map[string]int
	changed chan struct{} // closed and replaced at every change
}

func newTimeline() *timeline {
	return &timeline{open: map[string]int{}, changed: make(chan struct{})}
}

func (tl *timeline) notify() {
	close(tl.changed)
	tl.changed = make(chan struct{})
}

func (tl *timeline) begin(who string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.open[who]; ok {
		return
	}
	tl.open[who] = len(tl.spans)
	tl.spans = append(tl.spans, span{who: who, start: time.Now()})
	tl.notify()
}

func (tl *timeline) end(who string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if i, ok := tl.open[who]; ok {
		tl.spans[i].end = time.Now()
		delete(tl.open, who)
		tl.notify()
	}
}

// waitFor waits until cond holds of the nodes that lead now.
func (tl *timeline) waitFor(ctx context.Context, cond func(leaders []string) bool) error {
	for {
		tl.mu.Lock()
		var ls []string
		for who := range tl.open {
			ls = append(ls, who)
		}
		ch := tl.changed
		tl.mu.Unlock()
		sort.Strings(ls)
		if cond(ls) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("leaders %v: %w", ls, ctx.Err())
		}
	}
}

// overlaps returns the pairs of spans that intersect, but for two recipe
// nodes, and the longest intersection.
func (tl *timeline) overlaps() ([]string, time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	now := time.Now()
	var out []string
	var worst time.Duration
	for i, x := range tl.spans {
		for _, y := range tl.spans[i+1:] {
			if x.who == y.who || isRecipeNode(x.who) && isRecipeNode(y.who) {
				continue
			}
			xe, ye := x.end, y.end
			if xe.IsZero() {
				xe = now
			}
			if ye.IsZero() {
				ye = now
			}
			from, to := x.start, xe
			if y.start.After(from) {
				from = y.start
			}
			if ye.Before(to) {
				to = ye
			}
			if from.Before(to) {
				out = append(out, fmt.Sprintf("%s and %s both led for %v", x.who, y.who, to.Sub(from).Round(time.Millisecond)))
				worst = max(worst, to.Sub(from))
			}
		}
	}
	return out, worst
}

func isRecipeNode(who string) bool { return strings.HasPrefix(who, "recipe-") }

// recipeNode is a node running the recipe, driven by the harness: it polls
// every chaosRecipeInterval, at once when poked, and freezes when told.
type recipeNode struct {
	id     string
	poke   chan struct{}
	freeze chan time.Duration // unbuffered: a send returns once the node is frozen
	polled chan bool          // each poll's answer, when someone listens
}

func startRecipeNode(t *testing.T, ctx context.Context, db *sql.DB, tl *timeline, id string) *recipeNode {
	n := &recipeNode{id: id, poke: make(chan struct{}, 1), freeze: make(chan time.Duration), polled: make(chan bool)}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer tl.end(id)
		tick := time.NewTicker(chaosRecipeInterval)
		defer tick.Stop()
		for {
			qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
			is := 0
			_, err := db.ExecContext(qctx, chaosRecipeAttempt, id)
			if err == nil {
				err = db.QueryRowContext(qctx, chaosRecipeAmI, id).Scan(&is)
			}
			qcancel()
			if ctx.Err() != nil {
				return
			}
			// The recipe's rule: it leads while its last answer says so
			// (an error counts as no).
			if err == nil && is == 1 {
				tl.begin(id)
			} else {
				tl.end(id)
			}
			select {
			case n.polled <- err == nil && is == 1:
			default:
			}
			select {
			case <-ctx.Done():
				return
			case d := <-n.freeze:
				// Frozen (a stand-in for SIGSTOP, a GC pause): no
				// statement, and the belief of the last poll stays.
				frozen := time.NewTimer(d)
				select {
				case <-ctx.Done():
					frozen.Stop()
					return
				case <-frozen.C:
				}
			case <-n.poke:
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// pollNow makes n poll at once and returns whether it then leads.
func (n *recipeNode) pollNow(ctx context.Context) (bool, error) {
	select {
	case n.poke <- struct{}{}:
	default:
	}
	for {
		select {
		case leads := <-n.polled:
			return leads, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

func chaosRecipe(t *testing.T, ctx context.Context, srv *mysqld.Server, backend string, faults []fault) {
	name := "recipe_" + backend
	root, err := sql.Open("mysql", srv.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(srv.DSN(name))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime, cfg.Loc = true, time.UTC
	dsn := cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(ctx, chaosRecipeTable); err != nil {
		t.Fatal(err)
	}
	tl := newTimeline()
	recipe := []*recipeNode{startRecipeNode(t, ctx, db, tl, "recipe-1"), startRecipeNode(t, ctx, db, tl, "recipe-2")}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := tl.waitFor(wctx, func(ls []string) bool { return len(ls) == 1 }); err != nil {
		t.Fatalf("no recipe leader: %v", err)
	}

	hs, err := schema.New(db).Adopt(ctx, schema.AdoptOptions{RecipeTimeout: chaosRecipeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: adopted: %+v", backend, hs)

	newElection := election.NewTable
	if backend == "lock" {
		newElection = election.NewLock
	}
	for i := 1; i <= 2; i++ {
		id := fmt.Sprintf("sqlelect-%d", i)
		e, err := newElection(db, election.Config{
			Name: "1", ID: id, Tuning: election.TuningConfig{RetryInterval: 200 * time.Millisecond, RenewInterval: 500 * time.Millisecond, QueryTimeout: 2 * time.Second}, Callbacks: election.Callbacks{OnElected: func(ctx context.Context, l election.Leadership) {
				tl.begin(id)
				<-ctx.Done()
				tl.end(id)
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.Run(rctx) }()
		t.Cleanup(func() {
			rcancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: Run: %v", id, err)
			}
		})
	}

	for i, f := range faults {
		n := recipe[i%len(recipe)]
		var stmt string
		switch f.kind {
		case kindRecipeInsert:
			stmt = chaosRecipeReelect
		case kindRecipeReplace:
			stmt = chaosRecipeAssume
		}
		fctx, fcancel := context.WithTimeout(ctx, chaosRecipeTimeout+10*time.Second)
		var args []any
		if f.kind == kindRecipeReplace {
			args = append(args, n.id)
		}
		if _, err := db.ExecContext(fctx, stmt, args...); err != nil {
			fcancel()
			t.Fatalf("%s: %s: %v", backend, f.kind, err)
		}
		leads, err := n.pollNow(fctx)
		if err != nil {
			fcancel()
			t.Fatalf("%s: %s: %v", backend, f.kind, err)
		}
		if !leads {
			// A sqlelect candidate inserted the row first: this round
			// tests nothing of this class.
			t.Logf("%s: %s: %s does not lead after the write; round skipped", backend, f.kind, n.id)
			fcancel()
			continue
		}
		var lease int64
		if err := db.QueryRowContext(fctx, "SELECT lease_ms FROM service_election WHERE anchor = '1'").Scan(&lease); err != nil {
			t.Fatal(err)
		}
		// Freeze it (the send returns once it is frozen), and wait for its
		// first poll after the freeze: it either still holds the row and
		// renews it, or finds it lost.
		select {
		case n.freeze <- chaosRecipeFreeze:
			select {
			case <-n.polled:
			case <-fctx.Done():
				err = fctx.Err()
			}
		case <-fctx.Done():
			err = fctx.Err()
		}
		fcancel()
		if err != nil {
			t.Fatalf("%s: %s: waiting for %s's poll after its freeze: %v", backend, f.kind, n.id, err)
		}
		ov, worst := tl.overlaps()
		t.Logf("%s: %s: %s wrote the row (lease_ms %d), led, froze %v; overlaps so far: %d (longest %v)",
			backend, f.kind, n.id, lease, chaosRecipeFreeze, len(ov), worst.Round(time.Millisecond))
	}
	if ov, worst := tl.overlaps(); len(ov) > 0 {
		t.Errorf("%s: two leaders at one instant (longest %v): %s", backend, worst.Round(time.Millisecond), strings.Join(ov, "; "))
	}
}
