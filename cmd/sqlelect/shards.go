package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/members"
	"github.com/sqlelect/sqlelect/shards"
)

var shardsCmd = &command{
	name:    "shards",
	args:    "GROUP --shards N [flags]",
	summary: "join a shard group and lead a fair share of its shards; print leadership events as JSON lines",
	detail: `Joins shard group GROUP (package shards) as a member, with --id, and leads
a fair share of its N shards: each shard is an election of its own, named
GROUP/0 to GROUP/N-1, and each live member leads N/M of them, rounded up or
down, over the M live members. A member that joins gets its share by
transfers from those above theirs; a member that is killed loses its shards
after their lease, and the others each take their part of them.

It prints the JSON lines of campaign, elected and demoted (with until and
reason), one per shard's leadership, with the shard's election in election:

  {"event":"elected","election":"GROUP/3","id":ID,"term":T,"time":...}

A member that joins rings the others' bells, and they hand it its share at
once; on SIGINT or SIGTERM it leaves the group, hands every shard it leads
to the members the others' plan designates, and exits 0. 'sqlelect status
GROUP' shows the group's balance. It takes campaign's connection, ID,
timing and log flags, and refuses its others (--backend, --value, the
health, preference, version and HTTP flags).`,
	example: `sqlelect shards orders --shards 64 --id worker-1
# {"event":"elected","election":"orders/0","id":"worker-1","term":1763790000123456,"time":"..."}`,
	run: (*cli).shards,
}

// shardsOnly are campaign's flags that shards refuses (hidden from its
// help).
var shardsOnly = []string{"backend", "value", "metrics-addr", "http-addr", "health-cmd", "health-interval", "health-timeout",
	"health-hold-down", "priority", "preference-tenure", "app-version", "follow-version"}

// shardsConns bounds a shards process's pool, open and idle: its
// Batcher's batches (up to 4 of renewals, of reads and of give-ups, 1 of
// takes), its bell (2), a balancing, rings; 6 processes stay below the
// server's default max_connections (151).
const shardsConns = 20

// boundPool bounds a shards process's pool to shardsConns, open and idle.
// A group's statements come in its Batcher's batches, but a failed batch's
// elections each send alone, hundreds at once: an unbounded pool, which
// keeps 2 idle connections, then dials one for each, more than the
// server's backlog of new connections holds, and the dials that time out
// starve the renewals (docs/shards.md).
func boundPool(db *sql.DB) {
	db.SetMaxOpenConns(shardsConns)
	db.SetMaxIdleConns(shardsConns)
}

func (c *cli) shards(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var n int
	fs.IntVar(&n, "shards", 0, "the group's number of shards `N`, keyed 0 to N-1 (required)")
	f := new(campaignFlags)
	f.register(fs)
	for _, name := range shardsOnly {
		_ = fs.MarkHidden(name)
	}
	names, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 || n <= 0 {
		return failf(exitUsage, "want one group and --shards N, N at least 1 (see 'sqlelect shards --help')")
	}
	for _, name := range shardsOnly {
		if f.set(name) {
			return failf(exitUsage, "--%s does not apply to shards", name)
		}
	}
	cfg, log, err := f.config(names[0], c.stderr)
	if err != nil {
		return err
	}
	signal.Ignore(syscall.SIGPIPE) // as campaign: resign and exit 1 when nobody reads the events
	ctx, stopSignals := signalContext(context.Background())
	defer stopSignals()
	db, err := f.connect(ctx, log)
	if err != nil {
		return err
	}
	defer db.Close()
	boundPool(db)
	if err := preflight(ctx, db, cfg.Table, "table", cfg.Tuning.QueryTimeout); err != nil {
		return err
	}
	ev := newEvents(c.stdout, "", cfg.ID)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ev.setOnFail(cancel)
	group := cfg.Name
	cfg.Name = ""
	err = shards.Run(rctx, db, shards.Options{Group: group, Shards: n, Config: cfg,
		OnElected: func(_ context.Context, shard string, l election.Leadership) {
			ev.write(event{Event: "elected", Election: group + "/" + shard, Term: l.Term})
		},
		OnDemoted: func(shard string, d election.Demotion) {
			ev.write(event{Event: "demoted", Election: group + "/" + shard, Term: d.Term,
				Until: d.Until.UTC().Format(time.RFC3339Nano), Reason: string(d.Reason)})
		}})
	if err != nil {
		return election.Classify(err)
	}
	if err := ev.err(); err != nil {
		return wrapf(exitError, err, "cannot write events to stdout; resigned")
	}
	return nil
}

// groupStatus is a shard group's balance, as status shows it.
type groupStatus struct {
	Shards   int            `json:"shards"`  // the elections GROUP/… with a row
	Unled    int            `json:"unled"`   // of them, those no live holder leads
	Members  int            `json:"members"` // the group's live, healthy members
	Led      map[string]int `json:"led"`     // by leader
	Balanced bool           `json:"balanced"`
}

// String is status's shards line, or "" for none.
func (g *groupStatus) String() string {
	if g == nil {
		return ""
	}
	var led []string
	for _, id := range slices.Sorted(maps.Keys(g.Led)) {
		led = append(led, fmt.Sprintf("%s %d", printable(id), g.Led[id]))
	}
	verdict := "balanced"
	if !g.Balanced {
		verdict = "not balanced"
	}
	return fmt.Sprintf("shards: %d, %d unled, over %d members: %s (%s)\n", g.Shards, g.Unled, g.Members, strings.Join(led, ", "), verdict)
}

// groupBalance reads the balance of shard group name: each live, healthy
// member should lead ⌊N/M⌋ or ⌈N/M⌉ of its N shards, and nobody else any.
// nil when no election of the table is one of its shards, or the tables
// could not be read (status then has no shards line).
func groupBalance(ctx context.Context, db *sql.DB, table, name string) *groupStatus {
	recs, err := listRecords(ctx, db, table)
	if err != nil {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	ms, err := members.List(qctx, db, table, name)
	if err != nil && !errors.Is(err, election.ErrTableMissing) {
		return nil
	}
	g := &groupStatus{Led: map[string]int{}}
	for _, r := range recs {
		if !strings.HasPrefix(r.Election, name+"/") {
			continue
		}
		g.Shards++
		if r.Live() && !r.Released {
			g.Led[r.ID]++
		} else {
			g.Unled++
		}
	}
	if g.Shards == 0 {
		return nil
	}
	g.Balanced = g.Unled == 0
	held := 0
	for _, m := range ms {
		if m.Live && m.Healthy {
			g.Members++
			held += g.Led[m.ID]
		}
	}
	for _, m := range ms {
		if n := g.Led[m.ID]; m.Live && m.Healthy && (n < g.Shards/g.Members || n > (g.Shards+g.Members-1)/g.Members) {
			g.Balanced = false
		}
	}
	g.Balanced = g.Balanced && held == g.Shards
	return g
}
