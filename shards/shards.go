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
// should take. So the first survivor to look does not take a dead member's
// shards all: each takes its own, and keeps it.
//
// Not yet (issue 36): a clean leave hands its shards over by transfer (it
// resigns them: the others take them at their next interval), the group's
// balance in `sqlelect status`, and a wake-up of the group on a change of
// members (a join waits for the intervals: BENCHMARKS.md, "Shard groups").
// The CLI's `sqlelect shards` runs Run.
package shards

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/balance"
	"github.com/sqlelect/sqlelect/internal/ident"
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
	// Interval is the time between two balancings. Default 2/15 of the
	// lease (Config.Tuning.RetryInterval's default).
	Interval time.Duration
}

// Run joins the group and leads this process's share of its shards until
// ctx ends; it then resigns every shard it leads and returns nil once every
// candidate it started has returned. It returns early with the error of a
// candidate that stopped (election's, such as a missing table), of a
// shard's member registration (a *members.DuplicateError when a live
// member of the group has this ID), or of reading the group.
func Run(parent context.Context, db *sql.DB, o Options) error {
	keys, err := o.keys()
	if err != nil {
		return err
	}
	cfg := o.Config
	cfg.Table = cmp.Or(cfg.Table, election.DefaultTable)
	cfg.ID = cmp.Or(cfg.ID, election.DefaultID())
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, 15*time.Second)
	interval := cmp.Or(o.Interval, cfg.LeaseDuration*2/15)
	eb, err := election.NewBatcher(db, election.BatcherOptions{Table: cfg.Table})
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
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	g := &group{db: db, o: o, cfg: cfg, keys: keys, run: map[string]*shard{}, fail: cancel,
		log: cmp.Or(cfg.Tuning.Logger, slog.Default())}
	var member sync.WaitGroup
	member.Go(func() {
		if err := members.Run(ctx, db, gc, gcfg, members.Options{Batcher: mb}); err != nil {
			cancel(err)
		}
	})
	for ctx.Err() == nil {
		if err := g.balance(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("shards: balancing the group failed: trying again", "group", o.Group, "err", err)
		}
		g.wait(ctx, interval)
	}
	g.stopAll()
	member.Wait()
	if parent.Err() != nil {
		return nil
	}
	return context.Cause(ctx)
}

// keys returns the shards' keys, or an error wrapping
// election.ErrInvalidConfig: each shard's election name, the group's too,
// must be valid (election.Config.Name), and no key listed twice.
func (o Options) keys() ([]string, error) {
	keys := slices.Clone(o.Keys)
	switch {
	case o.Group == "":
		return nil, fmt.Errorf("%w: shards: no Group", election.ErrInvalidConfig)
	case len(keys) > 0 && o.Shards > 0 && o.Shards != len(keys):
		return nil, fmt.Errorf("%w: shards: %d Shards and %d Keys", election.ErrInvalidConfig, o.Shards, len(keys))
	case len(keys) == 0 && o.Shards <= 0:
		return nil, fmt.Errorf("%w: shards: no Shards nor Keys", election.ErrInvalidConfig)
	}
	for i := len(keys); i < o.Shards; i++ {
		keys = append(keys, strconv.Itoa(i))
	}
	if err := ident.Name(o.Group); err != nil {
		return nil, fmt.Errorf("shards: Group: %w", err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if err := ident.Name(o.Group + "/" + k); err != nil {
			return nil, fmt.Errorf("shards: key %q: %w", k, err)
		}
		if seen[k] {
			return nil, fmt.Errorf("%w: shards: key %q listed twice", election.ErrInvalidConfig, k)
		}
		seen[k] = true
	}
	return keys, nil
}

// group is one process's membership of a group: the candidates it runs,
// by shard key.
type group struct {
	db   *sql.DB
	o    Options
	cfg  election.Config
	keys []string
	fail context.CancelCauseFunc // ends Run with a candidate's error
	log  *slog.Logger

	mu  sync.Mutex
	run map[string]*shard
}

// shard is a candidate this process runs for one shard.
type shard struct {
	c      *election.Candidate
	stop   context.CancelFunc
	done   chan struct{}
	moving bool // a transfer of it is under way
}

// balance reads the group's live, healthy members and its shards' holders,
// and acts on this process's part of the plan (internal/balance): it starts
// candidates for the shards it should take, transfers those it should give,
// and stops the candidates of shards it neither leads nor should take.
func (g *group) balance(ctx context.Context) error {
	ms, err := members.List(ctx, g.db, g.cfg.Table, g.o.Group)
	if err != nil {
		return err
	}
	var live []string
	for _, m := range ms {
		if m.Live && m.Healthy {
			live = append(live, m.ID)
		}
	}
	recs, err := election.ReadRecords(ctx, g.db, g.cfg.Table)
	if err != nil {
		return err
	}
	holders := map[string]string{}
	for _, r := range recs {
		if key, ok := strings.CutPrefix(r.Election, g.o.Group+"/"); ok && r.Live() && !r.Released {
			holders[key] = r.ID
		}
	}
	want := map[string]bool{}
	for key, h := range holders {
		want[key] = h == g.cfg.ID
	}
	for _, m := range balance.Plan(g.keys, live, holders) {
		switch g.cfg.ID {
		case m.To:
			want[m.Shard] = true
		case m.From:
			want[m.Shard] = false
			g.give(ctx, m.Shard, m.To)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, s := range g.run {
		if !want[key] && !s.moving && !s.c.IsLeader() && holders[key] != g.cfg.ID {
			s.stop() // not ours, not to be ours: its Run returns (see start)
		}
	}
	for key, ok := range want {
		if ok && g.run[key] == nil {
			if err := g.start(ctx, key); err != nil {
				return err
			}
		}
	}
	return nil
}

// start runs a candidate for shard key until it is stopped or ctx ends;
// g.mu is held.
func (g *group) start(ctx context.Context, key string) error {
	cfg := g.cfg
	cfg.Name = g.o.Group + "/" + key
	cfg.Callbacks = election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) {
			if g.o.OnElected != nil {
				g.o.OnElected(ctx, key, l)
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
	rctx, stop := context.WithCancel(ctx)
	s := &shard{c: c, stop: stop, done: make(chan struct{})}
	g.run[key] = s
	go func() {
		defer close(s.done)
		if err := c.Run(rctx); err != nil {
			g.fail(fmt.Errorf("shards: shard %s: %w", key, err))
		}
		g.mu.Lock()
		if g.run[key] == s {
			delete(g.run, key)
		}
		g.mu.Unlock()
	}()
	return nil
}

// give transfers shard key, which this process leads, to member to, and
// then stops its candidate; nothing when it runs none, or a transfer of it
// is under way.
func (g *group) give(ctx context.Context, key, to string) {
	g.mu.Lock()
	s := g.run[key]
	if s == nil || s.moving || !s.c.IsLeader() {
		g.mu.Unlock()
		return
	}
	s.moving = true
	g.mu.Unlock()
	go func() {
		if err := s.c.Transfer(ctx, to); err != nil && ctx.Err() == nil {
			g.log.Info("shards: transfer failed", "shard", key, "to", to, "err", err)
		}
		s.stop()
	}()
}

// wait waits d by the group's clock (Config.Tuning.Clock), or until ctx
// ends.
func (g *group) wait(ctx context.Context, d time.Duration) {
	var c <-chan time.Time
	if clock := g.cfg.Tuning.Clock; clock != nil {
		t := clock.NewTimer(d)
		defer t.Stop()
		c = t.C()
	} else {
		t := time.NewTimer(d)
		defer t.Stop()
		c = t.C
	}
	select {
	case <-c:
	case <-ctx.Done():
	}
}

// stopAll stops every candidate (each resigns what it leads) and waits
// for their Runs to return.
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
}
