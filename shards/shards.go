// Package shards runs a shard group (issue 36): processes that join group
// G share its shards, each shard an election of its own (named G/<shard>),
// and each process leads a fair share: ⌊N/M⌋ or ⌈N/M⌉ of N shards over M
// live, healthy members. Everything package election guarantees holds per
// shard (at most one holder, stand-down by the monotonic clock, a fencing
// term, an operator's REPLACE and DELETE); this package only decides which
// process campaigns for which shard, so it cannot make two holders of one.
//
// Each process registers as a member of election G (package members, with
// G's own candidate, whose leadership means nothing here) and, every
// interval, reads the group's live members and its shards' holders and
// balances them by internal/balance's rule: a member above its share
// transfers its extra shards (Election.Transfer, no lease waited out), a
// shard of no live member (it left, or died and its lease ran out) goes to
// a member below its share (each filled up to it, in the order of their
// IDs), and a process runs a candidate only for the shards it leads or
// should take, at most 1,000 at once that were never elected yet (the
// next start as those are elected). So the first survivor to look does not
// take a dead member's shards all: each takes its own, and keeps it. While
// the group is as a balancing with no move left it, a balancing reads a
// one-row print of the group's rows, not every shard's holder, and every
// holder again once that balancing is a lease old (group.unchanged).
//
// A change of members does not wait for the intervals. Each process keeps
// a bell (internal/getlock's, named after the group and its ID) that the
// others ring: a process that finds itself a live, healthy member for the
// first time rings the others, which transfer its share to it at once and
// then ring it, and it campaigns for the shards so handed over (a transfer
// reserves a shard for its taker); a process that leaves removes its
// member row, transfers each shard it leads to the member the others' plan
// designates, and rings them. A giver rings its taker after 256 transfers
// too, and again each time their number doubles, and a taker campaigns
// only for the shards handed over to it, not for those a live member, or
// one that left cleanly, will hand over: so a taker takes the shards as
// they move. A rung process first reads only the rows handed over to it,
// and campaigns for them; it balances in full when there are none, or
// when its last balancing is an interval old. A ring that is lost only
// costs an interval.
//
// The CLI's `sqlelect shards` runs Run, and `sqlelect status G` shows a
// group's balance. docs/shards.md has the long form.
package shards

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/balance"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/members"
)

// Options describe a process's membership of a shard group.
type Options struct {
	// Group names the group: its members are those of election Group, and
	// its shards are the elections Group + "/" + key. Required.
	Group string
	// Shards is the number of shards, keyed "0" to "Shards-1", unless
	// Keys lists the keys.
	Shards int
	Keys   []string
	// Config is every shard candidate's Config but Name, Callbacks and
	// Batcher (the group's own): ID, Table, LeaseDuration, Tuning and the
	// rest. It is copied.
	Config election.Config
	// OnElected and OnDemoted are each shard's election.Callbacks, with the
	// shard's key; they may run for many shards at once.
	OnElected func(ctx context.Context, shard string, l election.Leadership)
	OnDemoted func(shard string, d election.Demotion)
	// Interval is the wait between two balancings (a ring, see above,
	// starts one at once; a ring answered by the rows handed over alone
	// starts the wait again). Default Config.Tuning.RetryInterval (2/15 of
	// the lease by default).
	Interval time.Duration
}

// Run joins the group and leads this process's share of its shards until
// ctx ends. It then leaves: its member row goes first, then it hands each
// shard it leads to the member the plan without it designates (a transfer,
// and a ring of that member's bell: see group.give), resigns the rest, and
// returns nil once every candidate it started has returned. It returns
// early with the error of a candidate that stopped (election's, such as a
// missing table), or of its member registration in election Group (a
// *members.DuplicateError when a live member of the group has this ID). A
// failed read of the group is logged and tried again at the next
// interval, as a candidate tries a failed statement again.
func Run(parent context.Context, db *sql.DB, o Options) error {
	keys, isKey, err := o.keys()
	if err != nil {
		return err
	}
	cfg := o.Config
	cfg.Table = cmp.Or(cfg.Table, election.DefaultTable)
	cfg.ID = cmp.Or(cfg.ID, election.DefaultID())
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, 15*time.Second)
	eb, err := election.NewBatcher(db, election.BatcherOptions{Table: cfg.Table, QueryTimeout: cfg.Tuning.QueryTimeout})
	if err != nil {
		return err
	}
	mb, err := members.NewBatcher(db, cfg.Table)
	if err != nil {
		return err
	}
	cfg.Tuning.Batcher = eb
	gcfg := cfg
	gcfg.Name, gcfg.Callbacks = o.Group, election.Callbacks{}
	gc, err := election.NewTable(db, gcfg)
	if err != nil {
		return err
	}
	dcfg, err := gcfg.WithDefaults() // valid: NewTable took it
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	g := &group{db: db, o: o, cfg: cfg, keys: keys, isKey: isKey, run: map[string]*shard{}, fail: cancel, log: dcfg.Tuning.Logger,
		clock: dcfg.Tuning.Clock, timeout: dcfg.Tuning.QueryTimeout, poll: min(dcfg.Tuning.RetryInterval/10, 20*time.Millisecond), rang: make(chan struct{}, 1), sem: make(chan struct{}, transfers)}
	stopBell := g.keepBell(dcfg)
	mctx, leave := context.WithCancel(context.WithoutCancel(ctx)) // ended before the shards are handed off
	var member sync.WaitGroup
	member.Go(func() {
		if err := members.Run(mctx, db, gc, gcfg, members.Options{Batcher: mb}); err != nil {
			cancel(err)
		}
	})
	g.loop(ctx, cmp.Or(o.Interval, dcfg.Tuning.RetryInterval))
	leave()
	member.Wait() // its row is gone: the others plan without it
	if parent.Err() != nil {
		g.handOff(parent)
	}
	g.stopAll()
	// What it resigned (a transfer that failed, a shard not yet led, or
	// every shard when a candidate's error ended Run): the others take it
	// at once, not at their next interval.
	g.ringOthers(context.WithoutCancel(parent))
	stopBell()
	if parent.Err() != nil {
		return nil
	}
	return context.Cause(ctx)
}

// keys returns the shards' keys, as a list and as a set, or an error wrapping
// election.ErrInvalidConfig: each shard's election name, the group's too,
// must be valid (election.Config.Name), and no key listed twice.
func (o Options) keys() ([]string, map[string]bool, error) {
	keys := slices.Clone(o.Keys)
	switch {
	case o.Group == "":
		return nil, nil, fmt.Errorf("%w: shards: no Group", election.ErrInvalidConfig)
	case len(keys) > 0 && o.Shards > 0 && o.Shards != len(keys):
		return nil, nil, fmt.Errorf("%w: shards: %d Shards and %d Keys", election.ErrInvalidConfig, o.Shards, len(keys))
	case len(keys) == 0 && o.Shards <= 0:
		return nil, nil, fmt.Errorf("%w: shards: no Shards nor Keys", election.ErrInvalidConfig)
	}
	for i := len(keys); i < o.Shards; i++ {
		keys = append(keys, strconv.Itoa(i))
	}
	if err := ident.Name(o.Group); err != nil {
		return nil, nil, fmt.Errorf("shards: Group: %w", err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if err := ident.Name(o.Group + "/" + k); err != nil {
			return nil, nil, fmt.Errorf("shards: key %q: %w", k, err)
		}
		if seen[k] {
			return nil, nil, fmt.Errorf("%w: shards: key %q listed twice", election.ErrInvalidConfig, k)
		}
		seen[k] = true
	}
	return keys, seen, nil
}

// keepBell keeps this process's bell (see bellName) until the returned
// func is called; it then stops the bell and frees what it left on the
// server.
func (g *group) keepBell(cfg election.Config) (stop func()) {
	bell := &getlock.Bell{Hint: getlock.Hint{DB: g.db, Log: g.log, Election: bellName(g.o.Group, g.cfg.ID), Metrics: cfg.Metrics, Timeout: g.timeout},
		Table: g.cfg.Table, Every: cfg.Tuning.RenewInterval,
		Sleep: func(ctx context.Context, d time.Duration) bool { g.wait(ctx, d, nil); return ctx.Err() == nil }}
	stopBell := bell.Start(g.rang)
	return func() {
		stopBell()
		bell.Free(context.Background())
	}
}

// loop balances the group until ctx ends: at once, then every interval
// or when its bell rings; until this process is a live, healthy member,
// every poll during its first interval, then every tenth of the interval
// (see balance).
func (g *group) loop(ctx context.Context, interval time.Duration) {
	var last time.Time // the last balancing
	for start, rung := g.clock.Now(), false; ctx.Err() == nil; {
		var err error
		// A ring's cheap answer first (takeHanded), while a full balancing
		// is less than an interval old.
		if !rung || g.clock.Now().Sub(last) >= interval || !g.takeHanded(ctx) {
			last, err = g.clock.Now(), g.balance(ctx)
		}
		if err != nil && ctx.Err() == nil {
			g.log.Warn("shards: balancing the group failed: trying again", "group", g.o.Group, "err", err)
		}
		d := interval
		switch {
		case g.joined:
		case g.clock.Now().Sub(start) < interval: // joining: soon
			d = min(interval, g.poll)
		default: // not healthy yet
			d = interval / 10
		}
		rung = g.wait(ctx, d, g.rang)
	}
}

// transfers is how many transfers a process runs at once: a batch of its
// Batcher's, whose hand-overs give their rows up many in one transaction
// (at 8 at once, each gave its row up alone: a leave of 1,667 shards took
// 2.4 s).
const transfers = 500

// bellName names the bell of member id of group (getlock.Bell): a
// process keeps it while it runs, and the others ring it when it should
// balance at once (it joined, or they handed it shards). An election name
// has no '#', and the hex of the ID is safe in a SQL literal.
func bellName(group, id string) string { return group + "#" + hex.EncodeToString([]byte(id)) }

// group is one process's membership of a group: the candidates it runs,
// by shard key.
type group struct {
	db      *sql.DB
	o       Options
	cfg     election.Config
	keys    []string
	isKey   map[string]bool         // keys, as a set
	fail    context.CancelCauseFunc // ends Run with a candidate's error
	log     *slog.Logger
	clock   election.Clock
	timeout time.Duration // a statement's (Config.Tuning.QueryTimeout)
	poll    time.Duration // a tenth of the retry interval, at most 20 ms
	rang    chan struct{} // its bell was rung
	sem     chan struct{} // a slot of the transfers under way
	joined  bool          // it saw itself a live, healthy member, and rang the others
	full    time.Time     // when its last balancing read every shard's holder
	steady  *print        // what that balancing read, if its plan had no move (unchanged)
	mine    int           // the shards it held then
	gives   sync.WaitGroup

	mu      sync.Mutex
	run     map[string]*shard
	pending int      // candidates started and not yet settled (see shard)
	queued  []string // shards to campaign for, not yet started (admit)
}

// shard is a candidate this process runs for one shard.
type shard struct {
	c      *election.Candidate
	stop   context.CancelFunc
	done   chan struct{}
	moving bool // a transfer of it is under way
	// settled: elected once, or its Run returned; until then it counts
	// as pending (group.admit).
	settled bool
}

// read returns the group's live, healthy members, every member with a
// row (listed, live or not: a clean leave deletes its row), and each shard's holder
// (by key): the live holder of its row, or the member a hand-over reserves
// it for (a released row whose transfer_to names a member, while its lease
// lasts), which alone may take it then; and the print of the group so
// read. With quick, it returns no holders when the group is as its last
// steady balancing left it (unchanged).
func (g *group) read(ctx context.Context, quick bool) (live []string, listed map[string]bool, holders map[string]string, p print, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*g.timeout)
	defer cancel()
	ms, err := members.List(ctx, g.db, g.cfg.Table, g.o.Group)
	if err != nil {
		return nil, nil, nil, p, err
	}
	listed = map[string]bool{}
	for _, m := range ms {
		listed[m.ID] = true
		if m.Live && m.Healthy {
			live = append(live, m.ID)
		}
	}
	p.live = strings.Join(live, "\x00")
	if !g.joined && !slices.Contains(live, g.cfg.ID) || quick && g.unchanged(ctx, p.live) {
		return live, listed, nil, p, nil
	}
	holders, err = g.holders(ctx, &p)
	return live, listed, holders, p, err
}

// print is what a balancing sees of a group's state, but for the
// holders: its live members, and its rows' number, how many are released
// and their terms XORed. A row that is taken or handed over (a new term),
// released, replaced, deleted or added changes it; a renewal does not,
// nor an UPDATE of a row's service_id alone.
type print struct {
	live           string // the live members' IDs, in order, joined by NUL
	rows, released int64
	terms          uint64
}

// unchanged reports whether the group is as the last balancing left it
// when that balancing was steady (g.steady: its plan had no move), and
// this process as it was then: the same live members, the same rows' print
// (read in one statement, which reads no row's holder), and this process
// running a candidate for each shard it held then and no other, each
// leading. Then a balancing would change nothing. Reading every holder of
// 100,000 rows took the server about 98 ms of CPU (a quarter of a core
// for 5 processes every 2 s), the print 27 ms. False on an error, and
// once the steady balancing is a lease old: a change the print misses (a
// lease run out while its holder stays live and does not campaign again,
// an UPDATE of a row's service_id alone) waits a lease and an interval at
// most.
func (g *group) unchanged(ctx context.Context, live string) bool {
	was := g.steady
	if was == nil || was.live != live || g.clock.Now().Sub(g.full) >= g.cfg.LeaseDuration {
		return false
	}
	g.mu.Lock()
	ok := len(g.run) == g.mine && len(g.queued) == 0 && g.pending == 0
	for _, s := range g.run {
		ok = ok && !s.moving && s.c.IsLeader()
	}
	g.mu.Unlock()
	if !ok {
		return false
	}
	_, rows, err := g.selectRows(ctx, `COUNT(*), COALESCE(SUM(released <> 0), 0), BIT_XOR(term)`, "")
	if err != nil {
		return false
	}
	defer rows.Close()
	now := print{live: live}
	if !rows.Next() || rows.Scan(&now.rows, &now.released, &now.terms) != nil {
		return false
	}
	return rows.Err() == nil && now == *was
}

// takeHanded campaigns for the shards handed over to this process (a
// released row whose transfer_to names it, while its lease lasts), which
// it alone may take, and reports whether there were any: a ring's
// cheap answer when a giver rang (see loop), which reads those rows alone,
// not the group's every row and member, nor plans. At 10,000 shards over
// 5 processes, with rings every 64 transfers, a clean leave took
// 0.77–0.90 s with a full balancing per ring and 0.64–0.69 s with this
// read (integration/bench/results/shards-2026-12-02/summary.md). False,
// for a full balancing (which reports an error of the database), when it
// has not joined yet, or on an error.
func (g *group) takeHanded(ctx context.Context) bool {
	if !g.joined {
		return false
	}
	qctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	prefix, rows, err := g.selectRows(qctx, `anchor`, ` AND released <> 0 AND transfer_to = ? AND `+probe.LeaseLeft+` > 0`, g.cfg.ID)
	if err != nil {
		return false
	}
	defer rows.Close()
	var handed []string
	for rows.Next() {
		var anchor string
		if rows.Scan(&anchor) != nil {
			return false
		}
		if key := strings.TrimPrefix(anchor, prefix); g.isKey[key] {
			handed = append(handed, key)
		}
	}
	if rows.Err() != nil || len(handed) == 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queued = append(handed, g.queued...) // admit skips those it runs
	if err := g.admit(ctx); err != nil {
		g.fail(err)
	}
	return true
}

// selectRows selects cols of the group's rows (anchors from prefix, the
// group's name and '/', to the group's name and '0', which follows '/')
// that also match cond (empty, or " AND ..." with args).
func (g *group) selectRows(ctx context.Context, cols, cond string, args ...any) (prefix string, rows *sql.Rows, err error) {
	prefix = g.o.Group + "/"
	rows, err = g.db.QueryContext(ctx, `SELECT `+cols+` FROM `+ident.Quote(g.cfg.Table)+` WHERE anchor >= ? AND anchor < ?`+cond,
		append([]any{prefix, g.o.Group + "0"}, args...)...)
	return prefix, rows, err
}

// holders reads each shard's holder, by key, and the rows' part of p (see
// print), in one statement: the live
// leader of its row, or the member a transfer reserves the row for (a
// released row whose transfer_to names it, while its lease lasts). It
// reads the group's rows alone, and of each only what the plan needs: at
// 10,000 shards a seventh of the time that reading them as Records took.
func (g *group) holders(ctx context.Context, p *print) (map[string]string, error) {
	prefix, rows, err := g.selectRows(ctx, `anchor, service_id, released <> 0, COALESCE(transfer_to, ''), `+probe.LeaseLeft+` > 0, term`, "")
	if err != nil {
		return nil, fmt.Errorf("shards: reading group %s: %w", g.o.Group, err)
	}
	defer rows.Close()
	holders := map[string]string{}
	for rows.Next() {
		var anchor, id, to string
		var released, live bool
		var term uint64
		if err := rows.Scan(&anchor, &id, &released, &to, &live, &term); err != nil {
			return nil, fmt.Errorf("shards: reading group %s: %w", g.o.Group, err)
		}
		p.rows, p.terms = p.rows+1, p.terms^term
		if released {
			p.released++
		}
		key := strings.TrimPrefix(anchor, prefix)
		switch {
		case !live:
		case !released && id != "":
			holders[key] = id
		case released && to != "":
			holders[key] = to // reserved for it
		}
	}
	return holders, rows.Err()
}

// remember keeps the print p of a balancing that read the group at start
// (see unchanged), when its plan has no move (steady), and the shards this
// process held then.
func (g *group) remember(start time.Time, holders map[string]string, p print, steady bool) {
	g.steady, g.full, g.mine = nil, start, 0
	if steady {
		g.steady = &p
		for _, key := range g.keys {
			if holders[key] == g.cfg.ID {
				g.mine++
			}
		}
	}
}

// balance acts on this process's part of the plan of the group as read
// (plan): it starts candidates for the shards it should campaign for; it
// transfers those it should give; and it stops the candidates of shards it
// neither leads nor should take. Until
// this process is a live, healthy member it does nothing; the first time
// it is, it rings the others' bells, so that they give it its share at once.
func (g *group) balance(ctx context.Context) error {
	start := g.clock.Now()
	live, listed, holders, p, err := g.read(ctx, true)
	if err != nil || holders == nil {
		return err
	}
	if !g.joined {
		g.joined = true
		g.gives.Go(func() { g.ringOthers(ctx) })
	}
	want, gives, moves := plan(g.cfg.ID, g.keys, live, listed, holders)
	g.remember(start, holders, p, moves == 0)
	g.give(ctx, gives)
	// To campaign for: first those it may take at once (no holder, or
	// handed to it), then those of members that died (their leases run
	// out first).
	var keys, later []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if h := holders[key]; h == "" || h == g.cfg.ID {
			keys = append(keys, key)
		} else {
			later = append(later, key)
		}
	}
	keys = append(keys, later...)
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, s := range g.run {
		if !want[key] && !s.moving && !s.c.IsLeader() && holders[key] != g.cfg.ID {
			s.stop() // not ours, not to be ours: its Run returns (see start)
		}
	}
	g.queued = g.queued[:0]
	for _, key := range keys {
		if want[key] && g.run[key] == nil {
			g.queued = append(g.queued, key)
		}
	}
	return g.admit(ctx)
}

// maxPending is how many candidates a process runs at once that were
// never elected yet (a candidate counts until its first election: one
// demoted later campaigns again without waiting); the others wait in
// group.queued, and start as those are elected or stop (admit). Started
// all at once, the 16,667 candidates of a join at 100,000 shards queued
// for the Batcher's takes, one batch of up to 500 at a time, past their
// statements' deadlines, and retried at their next interval
// (BENCHMARKS.md, "Shard groups").
const maxPending = 1000

// admit starts candidates for the shards queued, in order, while fewer
// than maxPending are pending, until ctx ends; g.mu is held.
func (g *group) admit(ctx context.Context) error {
	for g.pending < maxPending && len(g.queued) > 0 && ctx.Err() == nil {
		key := g.queued[0]
		g.queued = g.queued[1:]
		if g.run[key] == nil {
			if err := g.start(ctx, key); err != nil {
				return fmt.Errorf("shards: shard %s: %w", key, err)
			}
		}
	}
	return nil
}

// settle counts s, pending until then, as no longer pending (elected for
// the first time, or its Run returned) and admits the next; g.mu is held.
func (g *group) settle(ctx context.Context, s *shard) {
	if !s.settled {
		s.settled = true
		g.pending--
		if err := g.admit(ctx); err != nil {
			g.fail(err)
		}
	}
}

// plan is member me's part of the plan (internal/balance) of a group of
// shards keys, read as live members, listed members (live or not) and
// holders (see read): the shards it should campaign for (want), those it
// holds among them, the moves it should make as giver (gives), and the
// number of moves in the whole plan (moves). It
// campaigns for a shard it should take from a member that is not live and
// healthy only when that member is listed (it died, and the shard is taken
// once its lease runs out; or it is unhealthy, and hands it over). A live giver hands its shards over (and rings), and so does
// one that left cleanly (its member row deleted): a candidate started
// before would look only at its next retry interval. A shard of a holder
// that never was a member (an operator's row) is planned anew once its
// row ends.
func plan(me string, keys, live []string, listed map[string]bool, holders map[string]string) (want map[string]bool, gives []balance.Move, moves int) {
	want = map[string]bool{}
	for _, key := range keys { // not a row of group G/x, which G's range reads too
		if h, ok := holders[key]; ok {
			want[key] = h == me
		}
	}
	all := balance.Plan(keys, live, holders)
	for _, m := range all {
		switch me {
		case m.To:
			want[m.Shard] = m.From == "" || !slices.Contains(live, m.From) && listed[m.From]
		case m.From:
			want[m.Shard] = false
			gives = append(gives, m)
		}
	}
	return want, gives, len(all)
}

// start runs a candidate for shard key until it is stopped (stopAll, at
// the latest); g.mu is held.
func (g *group) start(ctx context.Context, key string) error {
	cfg := g.cfg
	cfg.Name = g.o.Group + "/" + key
	s := &shard{done: make(chan struct{})}
	cfg.Callbacks = election.Callbacks{
		OnElected: func(lctx context.Context, l election.Leadership) {
			g.mu.Lock()
			g.settle(ctx, s)
			g.mu.Unlock()
			if g.o.OnElected != nil {
				g.o.OnElected(lctx, key, l)
			}
		},
		OnDemoted: func(d election.Demotion) {
			if g.o.OnDemoted != nil {
				g.o.OnDemoted(key, d)
			}
		},
	}
	c, err := election.NewTable(g.db, cfg)
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx)) // it outlives Run's loop: a leave hands it off
	s.c, s.stop = c, stop
	g.run[key] = s
	g.pending++
	go func() {
		defer close(s.done)
		if err := c.Run(rctx); err != nil {
			g.fail(fmt.Errorf("shards: shard %s: %w", key, err))
		}
		g.mu.Lock()
		if g.run[key] == s {
			delete(g.run, key)
		}
		g.settle(ctx, s)
		g.mu.Unlock()
	}()
	return nil
}

// give carries out moves, of shards this process should give, in
// goroutines (g.gives), transfers at most 500 at once: each shard it leads
// is transferred to its taker and its candidate stopped (nothing for one
// it does not lead, or one being moved). Once a taker's shards are handed
// over, it rings the taker's bell, so that the taker campaigns for them at
// once rather than at its next interval (the transfer reserves each for it
// meanwhile, for twice its retry interval); a long move rings it after
// ringFirst transfers too, and again each time their number doubles.
func (g *group) give(ctx context.Context, moves []balance.Move) {
	byTo := map[string]map[string]*shard{}
	g.mu.Lock()
	for _, m := range moves {
		if s := g.run[m.Shard]; s != nil && !s.moving && s.c.IsLeader() {
			s.moving = true
			if byTo[m.To] == nil {
				byTo[m.To] = map[string]*shard{}
			}
			byTo[m.To][m.Shard] = s
		}
	}
	g.mu.Unlock()
	for to, ss := range byTo {
		g.gives.Go(func() {
			var each sync.WaitGroup
			var done atomic.Int64
			for key, s := range ss {
				g.sem <- struct{}{}
				each.Go(func() {
					if err := s.c.Transfer(ctx, to); err != nil && ctx.Err() == nil {
						g.log.Info("shards: transfer failed", "shard", key, "to", to, "err", err)
					}
					s.stop()
					<-g.sem
					if n := done.Add(1); n >= ringFirst && n&(n-1) == 0 {
						g.ring(ctx, to) // it takes these while the rest move
					}
				})
			}
			each.Wait()
			g.ring(ctx, to)
		})
	}
}

// ringFirst is how many transfers to one taker a giver makes before it
// rings the taker's bell the first time, besides the ring after the last;
// it rings again at twice as many, and so on: the taker takes the shards
// handed over while the others are still moving, and each ring costs the
// taker a read of the group's rows (group.takeHanded), so their number
// grows with the logarithm of the move. At 10,000 shards over 5
// processes, in runs that logged every step, a clean leave (1,667 shards
// to 5 takers) took 0.42–0.54 s ringing at 256 and at the last, 0.51–0.65
// s every 128 and 0.64–0.69 s every 64 (BENCHMARKS.md, "Shard groups").
const ringFirst = 256

// handOff hands every shard this process leads to the member the plan of
// the others designates (give), and waits for it: a clean leave's shards
// move by transfer, at once. Its member row is gone by then, so the
// takers plan without it.
func (g *group) handOff(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*g.timeout)
	defer cancel()
	live, _, holders, _, err := g.read(ctx, false)
	if err != nil {
		g.log.Warn("shards: leaving: reading the group failed: resigning the shards instead", "group", g.o.Group, "err", err)
		return
	}
	live = slices.DeleteFunc(live, func(id string) bool { return id == g.cfg.ID }) // a row its removal missed
	var gives []balance.Move
	for _, m := range balance.Plan(g.keys, live, holders) {
		if m.From == g.cfg.ID {
			gives = append(gives, m)
		}
	}
	g.give(ctx, gives)
	g.gives.Wait()
}

// ringOthers rings the bell of every other live member.
func (g *group) ringOthers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*g.timeout)
	defer cancel()
	ms, err := members.List(ctx, g.db, g.cfg.Table, g.o.Group)
	if err != nil {
		g.log.Debug("shards: reading the members to ring failed", "group", g.o.Group, "err", err)
		return
	}
	var rings sync.WaitGroup
	for _, m := range ms {
		if m.Live && m.ID != g.cfg.ID {
			rings.Go(func() { g.ring(ctx, m.ID) })
		}
	}
	rings.Wait()
}

// ring rings member id's bell. A failure, or a ring that comes between
// two of the bell's waits, only costs speed: the member acts at its next
// interval.
func (g *group) ring(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if err := getlock.Ring(ctx, g.db, g.cfg.Table, bellName(g.o.Group, id)); err != nil {
		g.log.Debug("shards: ringing a member failed", "group", g.o.Group, "member", id, "err", err)
	}
}

// wait waits d by the group's clock, or until wake fires (nil: never) or
// ctx ends, and reports whether wake fired.
func (g *group) wait(ctx context.Context, d time.Duration, wake <-chan struct{}) (woke bool) {
	t := g.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-wake:
		return true
	case <-ctx.Done():
	}
	return false
}

// stopAll stops every candidate (each resigns what it leads), waits for
// their Runs to return, and for the transfers under way.
func (g *group) stopAll() {
	g.mu.Lock()
	var all []*shard
	for _, s := range g.run {
		s.stop()
		all = append(all, s)
	}
	g.mu.Unlock()
	for _, s := range all {
		<-s.done
	}
	g.gives.Wait()
}
