package electiontest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// Driver changes who leads one election, for the callback-contract tests
// (RunContract). A real backend is driven through the database (operators'
// statements, a held row lock); the in-memory fake (package electionfake)
// through its methods. Its methods are called from the test's goroutine and
// fail the test (t.Fatal) when they cannot do what they promise.
type Driver interface {
	// Candidate returns a new candidate id of the election with callbacks
	// cb, not running: the test runs it.
	Candidate(id string, cb election.Callbacks) election.Election
	// Elect makes running candidate e lead, and returns once e.IsLeader().
	Elect(e election.Election)
	// Hand makes candidate to, which is not running, hold the election in
	// the place of running candidate e, with a higher term: when e leads it
	// is deposed (election.ReasonDeposed). Hand returns once e no longer
	// leads; e observes to later (OnLeaderChanged).
	Hand(e election.Election, to string)
	// LoseLease ends running leader e's leadership by its lease
	// (election.ReasonLeaseLost): no renewal succeeds until it stood down.
	LoseLease(e election.Election)
}

// contractWithin bounds each wait of the contract tests: a real backend's
// election takes up to a lock delay (one Lease) and a takeover.
const contractWithin = takeoverBound + Lease

// RunContract runs the tests of the callbacks' contract (see
// election.Callbacks) in parallel subtests, each on a Driver from open: the
// goroutine each callback runs on, their order, one OnDemoted per
// OnElected after OnElected returned, the elected context cancelled first,
// the demotion's reason, and IsLeader, Term, Resign and Fenced around them.
// Run runs them against the real backends; electionfake's tests against the
// fake.
func RunContract(t *testing.T, open func(t *testing.T) Driver) {
	tests := []struct {
		name string
		f    func(t *testing.T, d Driver)
	}{
		{"ElectedInItsOwnGoroutineThenResigned", testContractResign},
		{"DeposedThenSeesTheNewHolder", testContractDeposed},
		{"LeaseLost", testContractLeaseLost},
		{"ShutdownDemotesBeforeRunReturns", testContractShutdown},
		{"FollowerSeesEveryChange", testContractFollower},
		{"ResignWhenNotRunning", testContractNotRunning},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.f(t, open(t))
		})
	}
}

// event is one callback (or Run's return) as a contract test saw it.
type event struct {
	kind    string // elected, returned, demoted, changed, run returned
	gid     int64  // the goroutine it ran on
	at      time.Time
	term    uint64
	leader  bool            // elected: IsLeader() as OnElected began
	termNow uint64          // elected: Term() as OnElected began
	over    bool            // elected: not leading as OnElected began, and the context then cancelled
	reason  election.Reason // demoted
	until   time.Time       // demoted
	ctxDone bool            // demoted: the elected context was cancelled
	rec     election.Record // changed
	err     error           // run returned
}

func (ev event) String() string {
	switch ev.kind {
	case "demoted":
		return fmt.Sprintf("demoted(term %d, %s)", ev.term, ev.reason)
	case "changed":
		return fmt.Sprintf("changed(%q, term %d)", ev.rec.ID, ev.rec.Term)
	case "run returned":
		return fmt.Sprintf("run returned(%v)", ev.err)
	}
	return fmt.Sprintf("%s(term %d)", ev.kind, ev.term)
}

// contract is one candidate under a contract test: its callbacks record
// every event, and t.Cleanup stops it and checks the events.
type contract struct {
	t      *testing.T
	id     string
	e      election.Election
	runGID atomic.Int64
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	events  []event
	elected context.Context // the context of the last OnElected
}

// newContract creates candidate id through d, and runs it unless run is
// false.
func newContract(t *testing.T, d Driver, id string, run bool) *contract {
	c := &contract{t: t, id: id, done: make(chan error, 1)}
	c.e = d.Candidate(id, c.callbacks())
	if !run {
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	c.cancel = cancel
	go func() {
		c.runGID.Store(goid())
		err := c.e.Run(ctx)
		c.add(event{kind: "run returned", gid: goid(), err: err})
		c.done <- err
	}()
	t.Cleanup(func() {
		c.stop()
		c.check()
	})
	return c
}

func (c *contract) add(ev event) {
	if ev.at.IsZero() {
		ev.at = time.Now()
	}
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
}

func (c *contract) callbacks() election.Callbacks {
	return election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) {
			term := l.Term
			c.mu.Lock()
			c.elected = ctx
			c.mu.Unlock()
			ev := event{kind: "elected", gid: goid(), at: time.Now(), term: term, leader: c.e.IsLeader(), termNow: c.e.Term()}
			if !ev.leader || ev.termNow != term {
				// OnElected runs in a goroutine of its own: the leadership
				// may have ended before it began (IsLeader turns false
				// first, then the context is cancelled). It must be over,
				// then, not yet to come.
				select {
				case <-ctx.Done():
					ev.over = true
				case <-time.After(contractWithin):
				}
			}
			c.add(ev)
			<-ctx.Done()
			c.add(event{kind: "returned", gid: goid(), term: term})
		},
		OnDemoted: func(d election.Demotion) {
			c.mu.Lock()
			done := c.elected != nil && c.elected.Err() != nil
			c.mu.Unlock()
			c.add(event{kind: "demoted", gid: goid(), term: d.Term, reason: d.Reason, until: d.Until, ctxDone: done})
		},
		OnLeaderChanged: func(r election.Record) {
			c.add(event{kind: "changed", gid: goid(), rec: r, term: r.Term})
		},
	}
}

// stop cancels Run and waits for it to return nil.
func (c *contract) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	select {
	case err := <-c.done:
		if err != nil {
			c.t.Errorf("%s: Run returned %v on shutdown, want nil", c.id, err)
		}
	case <-time.After(10 * time.Second):
		c.t.Errorf("%s: Run did not return within 10s of cancel", c.id)
	}
	c.cancel = nil
}

// mark returns the number of events so far, for await.
func (c *contract) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// await waits for the first event from index from on that ok accepts, and
// returns it with its index.
func (c *contract) await(from int, what string, ok func(event) bool) (event, int) {
	c.t.Helper()
	var ev event
	at := -1
	if poll(contractWithin, time.Millisecond, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i := from; i < len(c.events); i++ {
			if ok(c.events[i]) {
				ev, at = c.events[i], i
				return true
			}
		}
		return false
	}) {
		return ev, at
	}
	c.t.Fatalf("%s: no %s within %v; events: %v", c.id, what, contractWithin, c.snapshot())
	return event{}, 0
}

func (c *contract) snapshot() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event(nil), c.events...)
}

func kind(k string) func(event) bool { return func(ev event) bool { return ev.kind == k } }

// check fails the test on every breach of the callbacks' contract in the
// events recorded.
func (c *contract) check() {
	c.t.Helper()
	evs := c.snapshot()
	r := replay{id: c.id, run: c.runGID.Load(), seenSelf: map[uint64]bool{}}
	for i, ev := range evs {
		r.bad = func(format string, args ...any) {
			c.t.Errorf("%s: event %d %v: %s", c.id, i, evs[i], fmt.Sprintf(format, args...))
		}
		r.event(ev)
	}
	c.t.Logf("%s: events %v", c.id, evs)
}

// replay walks the recorded events in order, reporting breaches to bad.
type replay struct {
	id       string
	run      int64
	bad      func(format string, args ...any)
	open     *event // the leadership under way
	returned bool
	seen     election.Record
	seenSelf map[uint64]bool // terms OnLeaderChanged saw this candidate hold
}

func (r *replay) event(ev event) {
	switch ev.kind {
	case "elected":
		r.elected(ev)
	case "returned":
		if r.open == nil || r.open.term != ev.term {
			r.bad("OnElected returned outside its leadership")
		}
		r.returned = true
	case "demoted":
		r.demoted(ev)
	case "changed":
		if ev.gid != r.run {
			r.bad("OnLeaderChanged did not run on Run's goroutine")
		}
		if ev.rec.ID == r.seen.ID && ev.rec.Term == r.seen.Term {
			r.bad("OnLeaderChanged without a change")
		}
		r.seen = ev.rec
		if ev.rec.ID == r.id {
			r.seenSelf[ev.rec.Term] = true
		}
	case "run returned":
		if r.open != nil {
			r.bad("Run returned before OnDemoted for term %d", r.open.term)
		}
	}
}

func (r *replay) elected(ev event) {
	if r.open != nil {
		r.bad("OnElected while term %d was not demoted", r.open.term)
	}
	if ev.gid == r.run {
		r.bad("OnElected ran on Run's goroutine")
	}
	if (!ev.leader || ev.termNow != ev.term) && !ev.over {
		r.bad("as OnElected began IsLeader() = %v, Term() = %d, and its context was not cancelled", ev.leader, ev.termNow)
	}
	// OnLeaderChanged named this candidate before OnElected was called; it
	// may have seen more since (it runs on Run's goroutine, OnElected on
	// another).
	if !r.seenSelf[ev.term] {
		r.bad("OnLeaderChanged did not name this candidate with its term first (last seen %q term %d)", r.seen.ID, r.seen.Term)
	}
	evc := ev
	r.open, r.returned = &evc, false
}

func (r *replay) demoted(ev event) {
	switch {
	case r.open == nil:
		r.bad("OnDemoted without OnElected")
	case r.open.term != ev.term:
		r.bad("OnDemoted for term %d, elected %d", ev.term, r.open.term)
	case !r.returned:
		r.bad("OnDemoted before OnElected returned")
	}
	if !ev.ctxDone {
		r.bad("the elected context was not cancelled before OnDemoted")
	}
	if ev.gid != r.run {
		r.bad("OnDemoted did not run on Run's goroutine")
	}
	if r.open != nil && (ev.until.Before(r.open.at.Add(-time.Second)) || ev.until.After(ev.at)) {
		r.bad("Demotion.Until %v outside the leadership %v..%v", ev.until, r.open.at, ev.at)
	}
	r.open = nil
}

// goid returns the current goroutine's id, read from its stack header.
func goid() int64 {
	var b [64]byte
	s := strings.TrimPrefix(string(b[:runtime.Stack(b[:], false)]), "goroutine ")
	id, _ := strconv.ParseInt(s[:max(strings.IndexByte(s, ' '), 0)], 10, 64)
	return id
}

func testContractResign(t *testing.T, d Driver) {
	c := newContract(t, d, "cand-1", true)
	d.Elect(c.e)
	el, _ := c.await(0, "OnElected", kind("elected"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	from := c.mark()
	if err := c.e.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	// Resign returns after the stand-down: OnElected returned, OnDemoted ran.
	if c.e.IsLeader() || c.e.Term() != 0 {
		t.Fatalf("after Resign: IsLeader() = %v, Term() = %d", c.e.IsLeader(), c.e.Term())
	}
	evs := c.snapshot()[from:]
	var dem []event
	for _, ev := range evs {
		if ev.kind == "demoted" {
			dem = append(dem, ev)
		}
	}
	if len(dem) != 1 || dem[0].term != el.term || dem[0].reason != election.ReasonResigned {
		t.Fatalf("OnDemoted calls before Resign returned: %v, want one for term %d, %s", dem, el.term, election.ReasonResigned)
	}
	if err := c.e.Fenced(ctx, nil); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Fenced after Resign: %v, want ErrNotLeader", err)
	}
	if err := c.e.Resign(ctx); err != nil {
		t.Fatalf("Resign when not leading: %v, want nil", err)
	}
}

func testContractDeposed(t *testing.T, d Driver) {
	c := newContract(t, d, "cand-1", true)
	d.Elect(c.e)
	el, _ := c.await(0, "OnElected", kind("elected"))
	other := "other-" + randHex(3)
	d.Hand(c.e, other)
	dem, i := c.await(0, "OnDemoted", kind("demoted"))
	if dem.reason != election.ReasonDeposed || dem.term != el.term {
		t.Fatalf("%v, want demoted(term %d, %s)", dem, el.term, election.ReasonDeposed)
	}
	ch, _ := c.await(i, "OnLeaderChanged naming "+other, func(ev event) bool { return ev.kind == "changed" && ev.rec.ID == other })
	if ch.rec.Term <= el.term {
		t.Fatalf("%s's term %d, not above the deposed term %d", other, ch.rec.Term, el.term)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.e.Fenced(ctx, nil); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Fenced after deposition: %v, want ErrNotLeader", err)
	}
	if rec, err := c.e.Leader(ctx); err != nil || rec.ID != other {
		t.Fatalf("Leader() = %q, %v; want %s", rec.ID, err, other)
	}
}

func testContractLeaseLost(t *testing.T, d Driver) {
	c := newContract(t, d, "cand-1", true)
	d.Elect(c.e)
	el, _ := c.await(0, "OnElected", kind("elected"))
	d.LoseLease(c.e)
	dem, _ := c.await(0, "OnDemoted", kind("demoted"))
	if dem.reason != election.ReasonLeaseLost || dem.term != el.term {
		t.Fatalf("%v, want demoted(term %d, %s)", dem, el.term, election.ReasonLeaseLost)
	}
}

func testContractShutdown(t *testing.T, d Driver) {
	c := newContract(t, d, "cand-1", true)
	d.Elect(c.e)
	el, _ := c.await(0, "OnElected", kind("elected"))
	c.stop() // check (t.Cleanup) sees OnDemoted before Run returned
	dem, _ := c.await(0, "OnDemoted", kind("demoted"))
	if dem.reason != election.ReasonResigned || dem.term != el.term {
		t.Fatalf("%v, want demoted(term %d, %s)", dem, el.term, election.ReasonResigned)
	}
	if c.e.IsLeader() {
		t.Fatal("IsLeader() after Run returned")
	}
}

func testContractFollower(t *testing.T, d Driver) {
	c := newContract(t, d, "cand-1", true)
	a, b := "other-"+randHex(3), "other-"+randHex(3)
	d.Hand(c.e, a)
	ca, i := c.await(0, "OnLeaderChanged naming "+a, func(ev event) bool { return ev.kind == "changed" && ev.rec.ID == a })
	d.Hand(c.e, b)
	cb, _ := c.await(i, "OnLeaderChanged naming "+b, func(ev event) bool { return ev.kind == "changed" && ev.rec.ID == b })
	if cb.rec.Term <= ca.rec.Term || !ca.rec.Live() || !cb.rec.Live() || cb.rec.Election != c.e.Name() {
		t.Fatalf("records %+v then %+v: want live records of %s with increasing terms", ca.rec, cb.rec, c.e.Name())
	}
	if c.e.IsLeader() || c.e.Term() != 0 {
		t.Fatalf("follower: IsLeader() = %v, Term() = %d", c.e.IsLeader(), c.e.Term())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.e.Fenced(ctx, nil); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Fenced by a follower: %v, want ErrNotLeader", err)
	}
}

func testContractNotRunning(t *testing.T, d Driver) {
	c := newContract(t, d, "cand-1", false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.e.Resign(ctx); !errors.Is(err, election.ErrNotRunning) {
		t.Fatalf("Resign without Run: %v, want ErrNotRunning", err)
	}
	if c.e.IsLeader() || c.e.Term() != 0 || c.e.ID() != "cand-1" {
		t.Fatalf("not running: IsLeader() = %v, Term() = %d, ID() = %q", c.e.IsLeader(), c.e.Term(), c.e.ID())
	}
}

// dbDriver drives a real backend's election through the database.
type dbDriver struct{ c *cluster }

// driver returns a Driver on a fresh database of the suite's backend.
func (s Suite) driver(t *testing.T) Driver { return &dbDriver{c: newCluster(t, s, true)} }

func (d *dbDriver) Candidate(id string, cb election.Callbacks) election.Election {
	return d.c.candidate(id, func(cfg *election.Config) { cfg.Callbacks = cb }, nil).e
}

// Elect names e with an operator's Assume; e leads after its lock delay.
func (d *dbDriver) Elect(e election.Election) {
	d.c.t.Helper()
	if !e.IsLeader() {
		if _, err := ops(d.c.admin).Assume(d.c.ctx, d.c.name, e.ID()); err != nil {
			d.c.t.Fatal(err)
		}
	}
	d.until(e, true, contractWithin)
}

// Hand names to with an operator's Assume: e's next renewal fails. The
// row keeps the old lease (a second here), which could run out before e
// observes to or the test reads the row on a loaded machine: to gets a
// minute, so that it holds the election while the test looks.
func (d *dbDriver) Hand(e election.Election, to string) {
	d.c.t.Helper()
	if _, err := ops(d.c.admin).Assume(d.c.ctx, d.c.name, to); err != nil {
		d.c.t.Fatal(err)
	}
	if _, err := d.c.admin.ExecContext(d.c.ctx, "UPDATE service_election SET lease_ms = 60000 WHERE anchor = ? AND service_id = ?", d.c.name, to); err != nil {
		d.c.t.Fatal(err)
	}
	d.until(e, false, RenewDeadline+time.Second)
}

// LoseLease stalls e's renewals: a transaction holds the row's lock until
// e stood down by its clock, and a renew deadline longer.
func (d *dbDriver) LoseLease(e election.Election) {
	d.c.t.Helper()
	tx, err := d.c.admin.BeginTx(d.c.ctx, nil)
	if err != nil {
		d.c.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(d.c.ctx, "SELECT term FROM service_election WHERE anchor = ? FOR UPDATE", d.c.name); err != nil {
		d.c.t.Fatal(err)
	}
	d.until(e, false, Lease)
	// Held until the lease is over by the database clock too: e's
	// renewals, once the lock is gone, find an expired row.
	d.c.awaitLeaseOver(takeoverBound)
}

// until waits until e.IsLeader() is leader.
func (d *dbDriver) until(e election.Election, leader bool, within time.Duration) {
	d.c.t.Helper()
	if !poll(within, time.Millisecond, func() bool { return e.IsLeader() == leader }) {
		d.c.t.Fatalf("%s: IsLeader() not %v within %v", e.ID(), leader, within)
	}
}
