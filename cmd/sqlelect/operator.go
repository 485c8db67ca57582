package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

var assumeCmd = &command{
	name:    "assume",
	args:    "ELECTION ID [--yes]",
	summary: "force candidate ID to lead ELECTION (the operator's REPLACE)",
	detail: `Writes ID as the holder of ELECTION with a new, higher term. The current
leader's next renewal fails and it stands down; ID takes the row over at its
next look and leads after its lock delay, so the two never lead at once. If
no candidate ID is running, nobody leads until the lease runs out, and the
election then goes on.

Asks for confirmation on a terminal; without a terminal, --yes is required.
Exit code 6 when ELECTION has no row.`,
	example: `sqlelect assume web-primary web-2 --yes`,
	run:     (*cli).assume,
}

var reelectCmd = &command{
	name:    "reelect",
	args:    "ELECTION [--yes]",
	summary: "force a re-election of ELECTION (the operator's DELETE)",
	detail: `Deletes the election's row. The holder stands down at its next renewal; the
candidates then compete for the election again.

Asks for confirmation on a terminal; without a terminal, --yes is required.
Exit code 6 when ELECTION has no row.`,
	example: `sqlelect reelect web-primary --yes`,
	run:     (*cli).reelect,
}

// describeHolder says who held rec and how: "web-1 (term 123, live)".
func describeHolder(r election.Record) string {
	if r.ID == "" {
		return "nobody"
	}
	return fmt.Sprintf("%s (term %d, %s)", printable(r.ID), r.Term, state(r))
}

func (c *cli) assume(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return failf(exitUsage, "want ELECTION ID (see 'sqlelect assume --help')")
	}
	name, id := args[0], args[1]
	if err := errors.Join(election.ValidateName(name), election.ValidateID(id)); err != nil {
		return err
	}
	ctx := context.Background()
	db, err := co.connect(ctx, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	prev, err := lookupElection(ctx, db, co.table, name)
	if err != nil {
		return err
	}
	if err := c.confirm(fmt.Sprintf("Really make %s lead %s? (now: %s)", printable(id), name, describeHolder(prev)), *yes); err != nil {
		return err
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rec, err := election.Assume(qctx, db, co.table, name, id)
	if err != nil && !(errors.Is(err, election.ErrNoLeader) && rec.Term != 0) {
		return err
	}
	lease := rec.Lease.Round(time.Millisecond)
	fmt.Fprintf(c.stdout, "assumed %s: %s -> %s (term %d)\n", name, describeHolder(prev), printable(id), rec.Term)
	fmt.Fprintf(c.stdout, "%s takes over at its next look and leads after its lock delay (default: its lease, %v); "+
		"the old leader stands down at its next renewal\n", printable(id), lease)
	fmt.Fprintf(c.stdout, "if no candidate %s is running, nobody leads until the lease runs out (%v)\n", printable(id), lease)
	return nil
}

func (c *cli) reelect(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return failf(exitUsage, "want exactly one election (see 'sqlelect reelect --help')")
	}
	name := args[0]
	if err := election.ValidateName(name); err != nil {
		return err
	}
	ctx := context.Background()
	db, err := co.connect(ctx, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	prev, err := lookupElection(ctx, db, co.table, name)
	if err != nil {
		return err
	}
	if err := c.confirm(fmt.Sprintf("Really force a re-election of %s? (now: %s)", name, describeHolder(prev)), *yes); err != nil {
		return err
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	old, err := election.Reelect(qctx, db, co.table, name)
	if errors.Is(err, election.ErrNoLeader) {
		return failf(exitUnknown, "unknown election %q: no row in %s (deleted meanwhile?)", name, co.table)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "re-election of %s forced: deleted the row of %s\n", name, describeHolder(old))
	fmt.Fprintln(c.stdout, "the holder stands down at its next renewal; a candidate that wins a released row leads at once, "+
		"one that inserts a new row waits its lock delay (default: its lease)")
	return nil
}
