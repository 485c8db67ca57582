package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/operator"
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
	args:    "ELECTION [--graceful [--wait D]] [--yes]",
	summary: "force a re-election of ELECTION (the operator's DELETE), or ask its leader to step down (--graceful)",
	detail: `Deletes the election's row. The holder stands down at its next renewal; the
candidates then compete for the election again. A candidate that inserts the
new row waits its lock delay (default: its lease) before it leads: use this
for a leader that is dead or hung.

With --graceful, asks the live leader to step down instead (sets the row's
transfer_to to '') and wakes it (see transfer): it stands down at once
(its demoted event says reason "transferred"), marks the row released and
wakes the followers, one of which takes over at once, with no lock delay.
The old leader sits out two retry intervals. Then waits up to --wait
(0: do not wait) for another candidate to lead, and says when it did. A
leader that does not run never acts on the request: its lease runs out and
the election goes on as after a crash.

Asks for confirmation on a terminal; without a terminal, --yes is required.
Exit code 6 when ELECTION has no row; 1 when --graceful finds no live
leader, or nobody else leads within --wait.`,
	example: `sqlelect reelect web-primary --graceful --yes`,
	run:     (*cli).reelect,
}

var transferCmd = &command{
	name:    "transfer",
	args:    "ELECTION ID [--wait D] [--yes]",
	summary: "hand the leadership of ELECTION to candidate ID (the live leader hands over at once)",
	detail: `Asks the live leader of ELECTION to hand over to candidate ID (sets the row's
transfer_to), and wakes it: a KILL QUERY ends the SELECT SLEEP its bell
connection waits in (a user may end its own user's statements; another
user's need CONNECTION_ADMIN or SUPER). The leader renews at once (unwoken,
at its next renewal), finds the request, stands down
(its demoted event says reason "transferred"), marks the row released and
reserved for ID, and wakes the followers: ID takes over at once, with no
lock delay, and no other candidate may take the row during the transfer
window (two retry intervals). If ID does not run, the election falls back to
a normal one when the window ends. Then waits up to --wait (0: do not wait)
for ID to lead, and says when it did.

In plain SQL: UPDATE service_election SET transfer_to = 'ID' WHERE anchor =
'ELECTION' AND released = 0; then KILL QUERY IS_USED_LOCK(CONCAT(
'sqlelect.bell#', LEFT(SHA2(CONCAT(DATABASE(), CHAR(0), 'service_election',
CHAR(0), 'ELECTION'), 256), 50))); see docs/operations.md.

For a leader that is dead or hung, use assume: it cannot know the old leader
stopped, so ID waits its lock delay.

Asks for confirmation on a terminal; without a terminal, --yes is required.
Exit code 6 when ELECTION has no row; 1 when it has no live leader, or ID
does not lead within --wait.`,
	example: `sqlelect transfer web-primary web-2 --yes`,
	run:     (*cli).transfer,
}

// defaultWait is how long transfer and reelect --graceful wait for the
// next leader by default: the default lease, well past a renewal and a
// transfer window with the default timings.
const defaultWait = election.DefaultLeaseDuration

func (c *cli) transfer(cmd *command, args []string) error {
	var wait time.Duration
	return c.operate(cmd, args, "ELECTION ID",
		func(fs *pflag.FlagSet) {
			fs.DurationVar(&wait, "wait", defaultWait, "how long to wait for ID to lead (0: do not wait)")
		},
		func(args []string) error { return cmp.Or(ident.Name(args[0]), ident.ID(args[1])) },
		func(args []string, prev election.Record) string {
			return fmt.Sprintf("Really hand %s to %s? (now: %s)", args[0], printable(args[1]), describeHolder(prev))
		},
		func(ctx context.Context, op *operator.Operator, args []string, prev election.Record) error {
			name, to := args[0], args[1]
			if prev.Live() && prev.ID == to {
				fmt.Fprintf(c.stdout, "%s already leads %s (term %d): nothing to do\n", printable(to), name, prev.Term)
				return nil
			}
			start := time.Now()
			if _, err := op.Transfer(ctx, name, to); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "asked %s to hand %s to %s; it does at its next renewal\n", describeHolder(prev), name, printable(to))
			return c.awaitLeader(op, name, prev, to, start, wait)
		})
}

// awaitLeader waits up to wait after start for a live holder other than
// prev: candidate to, or any when to is empty. It reports who leads, or
// fails with exit 1 when the wait ends first or someone else took over.
func (c *cli) awaitLeader(op *operator.Operator, name string, prev election.Record, to string, start time.Time, wait time.Duration) error {
	if wait <= 0 {
		return nil
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
		rec, err := op.Status(ctx, name)
		cancel()
		if err != nil && !errors.Is(err, election.ErrNoLeader) {
			return err
		}
		switch {
		case rec.Live() && (rec.ID != prev.ID || rec.Term != prev.Term) && (to == "" || rec.ID == to):
			fmt.Fprintf(c.stdout, "%s leads %s (term %d, acquired %s) %v after the request\n",
				printable(rec.ID), name, rec.Term, rec.Acquired, time.Since(start).Round(time.Millisecond))
			return nil
		case rec.Live() && (rec.ID != prev.ID || rec.Term != prev.Term):
			return failf(exitError, "%s took %s over (term %d), not %s: the transfer window ran out before %s took the row (is it running?)",
				printable(rec.ID), name, rec.Term, printable(to), printable(to))
		case time.Since(start) > wait:
			return failf(exitError, "nobody else leads %s %v after the request (now: %s)", name, wait, describeHolder(rec))
		}
		time.Sleep(20 * time.Millisecond)
	}
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
func (c *cli) operate(cmd *command, args []string, want string, flags func(fs *pflag.FlagSet), validate func(args []string) error,
	question func(args []string, prev election.Record) string,
	act func(ctx context.Context, op *operator.Operator, args []string, prev election.Record) error) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	if flags != nil {
		flags(fs)
	}
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
	op, err := operator.New(db, co.table)
	if err != nil {
		return err
	}
	return act(qctx, op, args, prev)
}

func (c *cli) assume(cmd *command, args []string) error {
	return c.operate(cmd, args, "ELECTION ID", nil,
		func(args []string) error { return cmp.Or(ident.Name(args[0]), ident.ID(args[1])) },
		func(args []string, prev election.Record) string {
			return fmt.Sprintf("Really make %s lead %s? (now: %s)", printable(args[1]), args[0], describeHolder(prev))
		},
		func(ctx context.Context, op *operator.Operator, args []string, prev election.Record) error {
			name, id := args[0], printable(args[1])
			rec, err := op.Assume(ctx, name, args[1])
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
	var graceful bool
	var wait time.Duration
	return c.operate(cmd, args, "ELECTION",
		func(fs *pflag.FlagSet) {
			fs.BoolVar(&graceful, "graceful", false, "ask the live leader to step down (woken at once; no lock delay) instead of deleting the row")
			fs.DurationVar(&wait, "wait", defaultWait, "with --graceful: how long to wait for another candidate to lead (0: do not wait)")
		},
		func(args []string) error { return ident.Name(args[0]) },
		func(args []string, prev election.Record) string {
			if graceful {
				return fmt.Sprintf("Really ask the leader of %s to step down? (now: %s)", args[0], describeHolder(prev))
			}
			return fmt.Sprintf("Really force a re-election of %s? (now: %s)", args[0], describeHolder(prev))
		},
		func(ctx context.Context, op *operator.Operator, args []string, prev election.Record) error {
			if graceful {
				start := time.Now()
				if _, err := op.StepDown(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(c.stdout, "asked %s to step down from %s; it does at its next renewal and a follower takes over at once\n",
					describeHolder(prev), args[0])
				return c.awaitLeader(op, args[0], prev, "", start, wait)
			}
			old, err := op.Reelect(ctx, args[0])
			if errors.Is(err, election.ErrNoLeader) && !errors.Is(err, election.ErrNoSuchElection) {
				// Reelect's documented "there was no row".
				return fmt.Errorf("%w: %q in %s (deleted meanwhile)", election.ErrNoSuchElection, args[0], op.Table())
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
