package shards_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/netfault"
	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/members"
	"github.com/sqlelect/sqlelect/operator"
	"github.com/sqlelect/sqlelect/shards"
)

func TestMain(m *testing.M) { slog.SetLogLoggerLevel(slog.LevelDebug); testdb.Main(m) }

// watch records, per shard, the leaderships the processes' callbacks
// report: who leads it now (OnElected runs), how many began (elected), and
// any that began while another was still running (overlaps).
type watch struct {
	mu       sync.Mutex
	active   map[string][]string
	elected  map[string]int
	overlaps []string
}

func (w *watch) onElected(id string) func(context.Context, string, election.Leadership) {
	return func(ctx context.Context, shard string, l election.Leadership) {
		w.mu.Lock()
		if len(w.active[shard]) > 0 {
			w.overlaps = append(w.overlaps, fmt.Sprintf("%s elected for shard %s (term %d) while %v leads it", id, shard, l.Term, w.active[shard]))
		}
		w.active[shard] = append(w.active[shard], id)
		w.elected[shard]++
		w.mu.Unlock()
		<-ctx.Done()
		w.mu.Lock()
		w.active[shard] = slices.DeleteFunc(w.active[shard], func(s string) bool { return s == id })
		w.mu.Unlock()
	}
}

// leaders returns how many shards each process leads, and whether every
// shard has one leader.
func (w *watch) leaders(keys []string) (map[string]int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, all := map[string]int{}, true
	for _, k := range keys {
		all = all && len(w.active[k]) == 1
		for _, id := range w.active[k] {
			n[id]++
		}
	}
	return n, all
}

// moves returns how many leaderships began since the last call, and the
// most of one shard.
func (w *watch) moves() (n, most int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range w.elected {
		n, most = n+k, max(most, k)
	}
	clear(w.elected)
	return n, most
}

// group is a shard group's processes in one test: each runs shards.Run on
// a pool of its own, through a proxy of its own (which a crash cuts).
type group struct {
	t       *testing.T
	ctx     context.Context
	dsn     string
	name    string
	keys    []string
	w       *watch
	proxies map[string]*netfault.Proxy
	stops   map[string]func()
	crashed map[string]bool // its Run's error at the end is expected
	every   time.Duration   // Options.Interval
	lease   time.Duration   // Config.LeaseDuration: 1 s unless set
}

func newGroup(t *testing.T, ctx context.Context, shardCount int) *group {
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	g := &group{t: t, ctx: ctx, dsn: dsn, name: "g-" + hex.EncodeToString(b),
		w: &watch{active: map[string][]string{}, elected: map[string]int{}}, proxies: map[string]*netfault.Proxy{}, stops: map[string]func(){}, crashed: map[string]bool{}}
	for i := range shardCount {
		g.keys = append(g.keys, fmt.Sprint(i))
	}
	t.Cleanup(func() {
		g.w.mu.Lock()
		defer g.w.mu.Unlock()
		for _, o := range g.w.overlaps {
			t.Error("two leaders: " + o)
		}
	})
	return g
}

// join starts process id.
func (g *group) join(id string) {
	t := g.t
	db, p := testdb.Proxied(t, g.dsn)
	g.proxies[id] = p
	ctx, cancel := context.WithCancel(g.ctx)
	done := make(chan error, 1)
	go func() {
		done <- shards.Run(ctx, db, shards.Options{Group: g.name, Shards: len(g.keys), OnElected: g.w.onElected(id),
			Interval: g.every, Config: election.Config{ID: id, LeaseDuration: cmp.Or(g.lease, time.Second)}})
	}()
	g.stops[id] = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil && !g.crashed[id] {
			t.Errorf("process %s: Run: %v", id, err)
		}
	})
	t.Cleanup(g.stops[id]) // before its pool closes
}

// start starts processes ids and waits until they lead their shares.
func (g *group) start(ids ...string) {
	for _, id := range ids {
		g.join(id)
	}
	g.balanced("start", ids...)
}

// leave stops process id: Run resigns its shards and returns.
func (g *group) leave(id string) {
	g.stops[id]()
	delete(g.stops, id)
}

// crash cuts process id off the database for good: its leases run out.
func (g *group) crash(id string) {
	g.crashed[id] = true
	g.proxies[id].Blackhole(true)
}

// balanced waits until each shard has one leader (its OnElected runs),
// and each of the processes ids leads its share of the shards, nobody else
// any.
func (g *group) balanced(what string, ids ...string) {
	t := g.t
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		last, ok := g.w.leaders(g.keys)
		ok = ok && len(last) == len(ids)
		for _, id := range ids {
			ok = ok && last[id] >= len(g.keys)/len(ids) && last[id] <= (len(g.keys)+len(ids)-1)/len(ids)
		}
		if ok {
			return
		}
		select {
		case <-tick.C:
		case <-g.ctx.Done():
			t.Fatalf("%s: never balanced over %v: leaders %v", what, ids, fmt.Sprint(g.w.leaders(g.keys)))
		}
	}
}

// countingLease is the lease of the tests that count the shards a change
// moves: a lease lost to a stall of the machine moves more, and 1 s leases
// were lost so (renewals past their 667 ms deadline) with the election
// package's tests six at once beside them (go test -parallel 6).
const countingLease = 3 * time.Second

// TestShardGroup: 12 shards over 3 processes, then a fourth joins, one
// leaves, and one crashes: after each change every live process leads its
// share (within one of the others), a join moves no more shards than
// balancing needs (each once), and no shard ever has two leaders at once.
func TestShardGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g := newGroup(t, ctx, 12)
	g.lease = countingLease
	g.start("a", "b", "c")
	g.w.moves()

	g.join("d")
	g.balanced("d joined", "a", "b", "c", "d")
	if n, most := g.w.moves(); n != 3 || most != 1 {
		t.Errorf("d joined: %d shards moved, one %d times; want 3, each once", n, most)
	}

	g.leave("a")
	g.balanced("a left", "b", "c", "d")
	g.w.moves()

	g.crash("b")
	g.balanced("b crashed", "c", "d")
	if n, most := g.w.moves(); n != 4 || most != 1 {
		t.Errorf("b crashed: %d shards moved, one %d times; want its 4, each once", n, most)
	}
}

// TestShardGroupRings: with an interval that never comes, the members'
// bells alone balance the group: a joining process rings the others, which
// hand it its share and ring it; a leaving one hands its shards to the
// others and rings them. Each shard moves once, and never has two leaders.
// A rung taker campaigns for its shards from its read of the rows handed
// over to it alone (group.takeHanded): the full balancing that its last
// interval allows never comes here.
func TestShardGroupRings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := newGroup(t, ctx, 12)
	g.every, g.lease = time.Hour, countingLease
	g.join("a")
	g.balanced("a started", "a")
	g.w.moves()

	for _, tc := range []struct {
		join, leave string
		now         []string
		moved       int
	}{
		{join: "b", now: []string{"a", "b"}, moved: 6},
		{join: "c", now: []string{"a", "b", "c"}, moved: 4},
		{leave: "a", now: []string{"b", "c"}, moved: 4},
	} {
		what := tc.join + " joined"
		if tc.join != "" {
			g.join(tc.join)
		} else {
			what = tc.leave + " left"
			g.leave(tc.leave)
		}
		g.balanced(what, tc.now...)
		if n, most := g.w.moves(); n != tc.moved || most != 1 {
			t.Errorf("%s: %d shards moved, one %d times; want %d, each once", what, n, most, tc.moved)
		}
	}
}

// TestPlan: a member campaigns for the shards it holds or that are handed
// to it, and for those it should take from a member that died (listed, not
// live) or from nobody; not for those a live member, or one that left
// cleanly (no member row), will hand it, nor for an operator's row naming
// no member; and it gives what it holds above its share.
func TestPlan(t *testing.T) {
	keys := []string{"0", "1", "2", "3", "4", "5"}
	all := func(id string) map[string]string {
		h := map[string]string{}
		for _, k := range keys {
			h[k] = id
		}
		return h
	}
	for _, c := range []struct {
		name      string
		live      []string
		listed    []string
		holders   map[string]string
		wantB     []string // the shards b campaigns for
		wantGives int      // the moves of a
	}{
		{"a live giver", []string{"a", "b"}, []string{"a", "b"}, all("a"), nil, 3},
		{"handed over", []string{"a", "b"}, []string{"a", "b"}, map[string]string{"0": "b", "1": "b", "2": "b", "3": "a", "4": "a", "5": "a"}, []string{"0", "1", "2"}, 0},
		{"left cleanly", []string{"b"}, []string{"b"}, all("a"), nil, 0},
		{"died", []string{"b"}, []string{"a", "b"}, all("a"), keys, 0},
		// Listed, not live and healthy: its shards are planned away at once.
		{"unhealthy", []string{"b"}, []string{"a", "b"}, map[string]string{"0": "a", "1": "a", "2": "a", "3": "b", "4": "b", "5": "b"}, keys, 0},
		{"unheld", []string{"b"}, []string{"b"}, map[string]string{}, keys, 0},
		{"an operator's row", []string{"b"}, []string{"b"}, all("ops"), nil, 0},
	} {
		listed := map[string]bool{}
		for _, id := range c.listed {
			listed[id] = true
		}
		want, _ := shards.Plan("b", keys, c.live, listed, c.holders)
		var got []string
		for _, k := range keys {
			if want[k] {
				got = append(got, k)
			}
		}
		if !slices.Equal(got, c.wantB) {
			t.Errorf("%s: b campaigns for %v, want %v", c.name, got, c.wantB)
		}
		if _, gives := shards.Plan("a", keys, c.live, listed, c.holders); len(gives) != c.wantGives && slices.Contains(c.live, "a") {
			t.Errorf("%s: a gives %v, want %d moves", c.name, gives, c.wantGives)
		}
	}
	// A row of group G/x, which G's read finds too: not one of G's shards.
	if want, _ := shards.Plan("b", keys, []string{"b"}, map[string]bool{"b": true}, map[string]string{"x/0": "b"}); want["x/0"] {
		t.Error("b campaigns for x/0, a shard of another group")
	}
}

// TestSteadyRead: while a group is as a steady balancing left it (no move
// planned), a balancing reads no shard's holder (group.unchanged); any
// change of a shard's row or of the live members makes it read them all
// again, so that the change is balanced at the next interval, not a lease
// later.
func TestSteadyRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := newGroup(t, ctx, 6)
	g.lease = countingLease
	g.start("a", "b")
	db := testdb.Open(t, g.dsn)
	op, err := operator.New(db, "")
	if err != nil {
		t.Fatal(err)
	}
	r := shards.NewReader(db, election.DefaultTable, g.name, "z", len(g.keys), time.Minute)
	for _, tc := range []struct {
		name   string
		change func() error
		now    []string
	}{
		{"shard 0 deleted", func() error { _, err := op.Reelect(ctx, g.name+"/0"); return err }, []string{"a", "b"}},
		{"shard 1 replaced", func() error {
			r, err := op.Status(ctx, g.name+"/1")
			if err == nil {
				_, err = op.Assume(ctx, g.name+"/1", map[string]string{"a": "b", "b": "a"}[r.ID])
			}
			return err
		}, []string{"a", "b"}},
		{"c joined", func() error { g.join("c"); return nil }, []string{"a", "b", "c"}},
	} {
		steady(t, ctx, r, "before "+tc.name)
		if err := tc.change(); err != nil {
			t.Fatal(err)
		}
		if tc.name == "c joined" { // until c is a live member (and leads its share)
			g.balanced(tc.name, tc.now...)
		}
		if skips, err := r.Skips(ctx); err != nil || skips {
			t.Errorf("%s: the next balancing skips its read (%v)", tc.name, err)
		}
		g.balanced(tc.name, tc.now...)
	}
}

// steady waits until a full read of r finds the group steady, then the
// next read skips.
func steady(t *testing.T, ctx context.Context, r *shards.Reader, what string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := r.Full(ctx); err != nil {
			t.Fatal(err)
		}
		if skips, err := r.Skips(ctx); err != nil {
			t.Fatal(err)
		} else if skips {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: a balancing never skipped its read", what)
		}
	}
}

// TestSteadyReadMembers: a live member that joins or leaves makes the next
// balancing read every holder, even when no shard's row changed: here a
// member of the group's election that runs no shard, in a group whose
// processes balance only when rung (an hour's interval), so that nothing
// moves while the test looks. And with nothing changed, a balancing reads
// every holder again once the last such read is a lease old, not before.
func TestSteadyReadMembers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := newGroup(t, ctx, 4)
	g.every, g.lease = time.Hour, countingLease
	g.start("a", "b")
	db := testdb.Open(t, g.dsn)
	r := shards.NewReader(db, election.DefaultTable, g.name, "z", len(g.keys), time.Minute)
	steady(t, ctx, r, "before m joined")

	cfg := election.Config{Name: g.name, ID: "m", LeaseDuration: countingLease}
	c, err := election.NewTable(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- members.Run(mctx, db, c, cfg, members.Options{}) }()
	left := false
	leave := func() {
		if !left {
			left = true
			stop()
			if err := <-done; err != nil {
				t.Errorf("member m: %v", err)
			}
		}
	}
	t.Cleanup(leave)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ms, err := members.List(ctx, db, election.DefaultTable, g.name)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ms, func(m members.Member) bool { return m.ID == "m" && m.Live && m.Healthy }) {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("m never became a live, healthy member")
		}
	}
	if skips, err := r.Skips(ctx); err != nil || skips {
		t.Errorf("m joined: the next balancing skips its read (%v)", err)
	}
	leave()
	steady(t, ctx, r, "after m left")

	const lease = 2 * time.Second // the shards' lease, as r2 sees it
	r2 := shards.NewReader(db, election.DefaultTable, g.name, "y", len(g.keys), lease)
	start := time.Now() // before the full read steady ends with
	steady(t, ctx, r2, "a lease before")
	for {
		skips, err := r2.Skips(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !skips {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("a steady group's holders were never read again")
		}
	}
	if d := time.Since(start); d < lease {
		t.Errorf("the holders were read again %v after a full read, within the lease (%v)", d, lease)
	}
	g.balanced("m left", "a", "b")
}

// TestShardGroupFaults (issue 36: chaos per shard): 12 shards over three
// processes go through the faults one election is tested under, on
// shards: a process stalls past the lease (its link cut for good measure,
// then healed), an operator replaces one shard's row naming another
// process (Assume) and deletes another's (Reelect), a statement and its
// reply are lost (and the link with them, until healed), and a process
// dies.
// After each, every shard has one leader and the live processes lead their
// shares; no shard ever has two leaders at once.
func TestShardGroupFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	g := newGroup(t, ctx, 12)
	g.start("a", "b", "c")

	g.proxies["b"].Blackhole(true)
	g.balanced("b stalled", "a", "c")
	g.proxies["b"].Blackhole(false)
	g.balanced("b back", "a", "b", "c")

	op, err := operator.New(testdb.Open(t, g.dsn), "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := op.Status(ctx, g.name+"/0")
	if err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"a": "b", "b": "c", "c": "a"}[r.ID]
	if _, err := op.Assume(ctx, g.name+"/0", other); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Reelect(ctx, g.name+"/1"); err != nil {
		t.Fatal(err)
	}
	g.balanced("shard 0 assumed by "+other+", shard 1 deleted", "a", "b", "c")

	// The next statement a sends on the election tables (a renewal, a
	// look, a member's refresh) never reaches the server, and nothing
	// after it, nor any reply, until healed.
	select {
	case <-g.proxies["a"].BlackholeOn([]byte("service_election")):
	case <-ctx.Done():
		t.Fatal("a sent nothing")
	}
	g.balanced("a's statement lost", "b", "c")
	g.proxies["a"].Blackhole(false)
	g.balanced("a back", "a", "b", "c")

	g.crash("c")
	g.balanced("c crashed", "a", "b")
}

// TestOptions: a group without a name or shards is refused before anything
// runs, naming the problem.
func TestOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		o    shards.Options
		want string
	}{
		{shards.Options{Shards: 3}, "no Group"},
		{shards.Options{Group: "g"}, "no Shards nor Keys"},
		{shards.Options{Group: "g", Shards: 2, Keys: []string{"x"}}, "2 Shards and 1 Keys"},
		{shards.Options{Group: "g", Keys: []string{"x", "y z"}}, `key "y z": election: invalid config: election name "g/y z"`},
		{shards.Options{Group: "g", Keys: []string{"x", "x"}}, `key "x" listed twice`},
		{shards.Options{Group: "g h", Shards: 1}, `Group: election: invalid config: election name "g h"`},
	} {
		err := shards.Run(ctx, new(sql.DB), tc.o)
		if !errors.Is(err, election.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("group %q, %d shards, keys %q: %v, want an error naming %q", tc.o.Group, tc.o.Shards, tc.o.Keys, err, tc.want)
		}
	}
}

// TestShardGroupAdmits: a process alone with more shards than it runs
// candidates for at once (maxPending) leads them all with no balancing
// after its first (an hour's interval): the shards queued start as the
// others are elected. The library's default lease (15 s, so 5 s for a
// statement): with 1 s (667 ms), 1,000 first elections under the race
// detector on a loaded machine ran past their batches' deadlines, and 173
// of 2,100 were led after 2 minutes.
func TestShardGroupAdmits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	g := newGroup(t, ctx, 2*shards.MaxPending+100)
	g.every, g.lease = time.Hour, 15*time.Second
	g.start("a")
}

// TestReadHolders: a shard's holder is its row's live leader, or the
// member a transfer reserved the row for while the reservation lasts; the
// plan then counts the shard as that member's, so that the member takes
// it at once and no other plan sends it elsewhere.
func TestReadHolders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := newGroup(t, ctx, 3)
	db := testdb.Open(t, g.dsn)
	// A long lease: the transfer's reservation (twice the retry interval)
	// lasts 16 s.
	lead := func(key, id string) *election.Candidate {
		elected := make(chan struct{})
		once := sync.OnceFunc(func() { close(elected) }) // a takes shard 1 back once the reservation ends
		c, err := election.NewTable(db, election.Config{Name: g.name + "/" + key, ID: id, LeaseDuration: time.Minute,
			Callbacks: election.Callbacks{OnElected: func(context.Context, election.Leadership) { once() }}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(rctx) }()
		t.Cleanup(func() { stop(); <-done })
		select {
		case <-elected:
		case <-ctx.Done():
			t.Fatalf("%s never led shard %s", id, key)
		}
		return c
	}
	lead("0", "a")
	if err := lead("1", "a").Transfer(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	got, err := shards.NewReader(db, election.DefaultTable, g.name, "b", 3, time.Minute).Full(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"0": "a", "1": "c"}; !maps.Equal(got, want) {
		t.Errorf("holders %v, want %v (shard 1 handed to c)", got, want)
	}
}
