package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sqlelect/sqlelect/history"
)

var historyCmd = &command{
	name:    "history",
	args:    "ELECTION [--since D] [--json]",
	summary: "show who led an election when, how each term began and how it ended",
	detail: `Every term a candidate takes is written into the election's history (package
history, migration 10: the table service_election_history) in the same
transaction that assigns it; a holder that resigns or hands over writes its
own end, and otherwise the next holder writes how it found the row. The last
1,000 terms of each election are kept.

Columns: the TERM; its HOLDER; how it BEGAN (first, insert: the row was
missing; expired, released, transferred, claimed, lock: the lock backend's
holder was gone; operator: an Assume); when it STARTED (UTC); its DURATION
(up to now, by the database clock, for the term that runs); how it ENDED
(resigned, transferred, expired, lost, deleted, replaced, claimed; blank
while it runs, or when nobody knows: a later term came from a candidate of
a version older than migration 10).

--since D shows the terms that ran during the last D (a Go duration: 1h,
30m). --json prints an array of objects: election, term, holder, began,
started, ended and end (RFC 3339, UTC; ended and end absent while the term
runs).

An election without history prints the header alone (with --json, []) and
exits 0. Exit code 5 when the history table is missing: run 'sqlelect
migrate up'.`,
	example: `sqlelect history web-primary
sqlelect history web-primary --since 24h --json`,
	json: true,
	run:  (*cli).history,
}

func (c *cli) history(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	since := fs.Duration("since", 0, "show only the terms that ran during this long before now (0: all kept)")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if err := oneElection(cmd, args); err != nil {
		return err
	}
	if *since < 0 {
		return failf(exitUsage, "--since %v: must not be negative", *since)
	}
	ctx := context.Background()
	db, err := co.connect(ctx, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	now, err := dbNow(qctx, db)
	if err != nil {
		return err
	}
	var from time.Time
	if *since > 0 {
		from = now.Add(-*since)
	}
	ts, err := history.List(qctx, db, co.table, args[0], from)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(append([]history.Term{}, ts...)) // [], not null
	}
	return printHistory(c.stdout, ts, now)
}

// printHistory prints terms as a table; now is the database clock, the end
// of the term that runs.
func printHistory(w io.Writer, ts []history.Term, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TERM\tHOLDER\tBEGAN\tSTARTED\tDURATION\tENDED")
	for i, t := range ts {
		d := "?"
		switch {
		case !t.Ended.IsZero():
			d = t.Ended.Sub(t.Started).Round(time.Millisecond).String()
		case i == len(ts)-1:
			d = now.Sub(t.Started).Round(time.Second).String() + " (runs)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.Term, printable(t.Holder), t.Began, fmtTime(t.Started), d, t.End)
	}
	return tw.Flush()
}
