package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
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

// operate is what assume and reelect share: it parses ELECTION and the
// other arguments (want names them), validates them, connects, reads the
// election's record (exit 6 without a row), asks question(args, prev)
// unless --yes, and calls act with a query deadline.
func (c *cli) operate(cmd *command, args []string, want string, validate func(args []string) error,
	question func(args []string, prev election.Record) string,
	act func(ctx context.Context, db *sql.DB, table string, args []string, prev election.Record) error) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(args) != strings.Count(want, " ")+1 {
		return failf(exitUsage, "want %s (see 'sqlelect %s --help')", want, cmd.name)
	}
	if err := validate(args); err != nil {
		return err
	}
	ctx := context.Background()
	db, prev, err := co.open(ctx, args[0])
	if err != nil {
		return err
	}
	defer db.Close()
	if err := c.confirm(question(args, prev), *yes); err != nil {
		return err
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return act(qctx, db, co.table, args, prev)
}

func (c *cli) assume(cmd *command, args []string) error {
	return c.operate(cmd, args, "ELECTION ID",
		func(args []string) error { return cmp.Or(election.ValidateName(args[0]), election.ValidateID(args[1])) },
		func(args []string, prev election.Record) string {
			return fmt.Sprintf("Really make %s lead %s? (now: %s)", printable(args[1]), args[0], describeHolder(prev))
		},
		func(ctx context.Context, db *sql.DB, table string, args []string, prev election.Record) error {
			name, id := args[0], printable(args[1])
			rec, err := election.Assume(ctx, db, table, name, args[1])
			if err != nil && !errors.Is(err, election.ErrNoLiveLease) {
				return err
			}
			lease := rec.Lease.Round(time.Millisecond)
			fmt.Fprintf(c.stdout, "assumed %s: %s -> %s (term %d)\n", name, describeHolder(prev), id, rec.Term)
			fmt.Fprintf(c.stdout, "%s takes over at its next look and leads after its lock delay (default: its lease, %v); "+
				"the old leader stands down at its next renewal\n", id, lease)
			fmt.Fprintf(c.stdout, "if no candidate %s is running, nobody leads until the lease runs out (%v)\n", id, lease)
			return nil
		})
}

func (c *cli) reelect(cmd *command, args []string) error {
	return c.operate(cmd, args, "ELECTION",
		func(args []string) error { return election.ValidateName(args[0]) },
		func(args []string, prev election.Record) string {
			return fmt.Sprintf("Really force a re-election of %s? (now: %s)", args[0], describeHolder(prev))
		},
		func(ctx context.Context, db *sql.DB, table string, args []string, _ election.Record) error {
			old, err := election.Reelect(ctx, db, table, args[0])
			if errors.Is(err, election.ErrNoLeader) && !errors.Is(err, election.ErrNoSuchElection) {
				// Reelect's documented "there was no row".
				return fmt.Errorf("%w: %q in %s (deleted meanwhile)", election.ErrNoSuchElection, args[0], table)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "re-election of %s forced: deleted the row of %s\n", args[0], describeHolder(old))
			fmt.Fprintln(c.stdout, "the holder stands down at its next renewal; a candidate that wins a released row leads at once, "+
				"one that inserts a new row waits its lock delay (default: its lease)")
			return nil
		})
}
