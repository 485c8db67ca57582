package main

import (
	"context"
	"os/signal"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/election"
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

On SIGINT or SIGTERM it resigns every shard it leads and exits 0. The
timing flags are campaign's; the others of campaign do not apply.`,
	example: `sqlelect shards orders --shards 64 --id worker-1
# {"event":"elected","election":"orders/0","id":"worker-1","term":1763790000123456,"time":"..."}`,
	run: (*cli).shards,
}

// shardsOnly are campaign's flags that shards refuses (hidden from its
// help).
var shardsOnly = []string{"backend", "value", "metrics-addr", "http-addr", "health-cmd", "health-interval", "health-timeout",
	"health-hold-down", "priority", "preference-tenure", "app-version", "follow-version"}

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
