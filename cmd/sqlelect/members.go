package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/members"
)

// membersMigration is the migration that creates the members table.
const membersMigration = 9

var membersCmd = &command{
	name:    "members",
	args:    "ELECTION [--json]",
	summary: "list the candidates that campaign and run registered in an election",
	detail: `Every candidate that campaign or run starts registers as a member of its
election (package members, migration 9: the table service_election_members),
refreshes its row every half lease and removes it when it exits.

Columns: the candidate's ID; STATE live (its last refresh is within its
lease, by the database clock) or gone (it stopped without removing its row:
killed, or cut off from the database); its VERSION (--app-version) and HOST;
its PRIORITY (--priority); HEALTHY, whether it campaigns (no for a moment
after it registered) and its latest --health-cmd passed (yes without one); when it STARTED (UTC); LAST-SEEN, how long ago by the
database clock for a live member, the time of its last refresh for one
gone.

--json prints an array of objects: election, id, incarnation (new for each
process), version, host, pid, priority, healthy, started and last_seen (RFC
3339, UTC) and live.

An election without members prints the header alone (with --json, []) and
exits 0. Exit code 5 when the members table is missing: run 'sqlelect
migrate up'.`,
	example: `sqlelect members web-primary
sqlelect members web-primary --json`,
	json: true,
	run:  (*cli).members,
}

func (c *cli) members(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if err := oneElection(cmd, args); err != nil {
		return err
	}
	ctx := context.Background()
	db, err := co.connect(ctx, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	ms, now, err := listMembers(ctx, db, co.table, args[0])
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(append([]members.Member{}, ms...)) // [], not null
	}
	return printMembers(c.stdout, ms, now)
}

// listMembers reads the members of election name, and the database clock
// to say how long ago each was last seen.
func listMembers(ctx context.Context, db *sql.DB, table, name string) ([]members.Member, time.Time, error) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	ms, err := members.List(qctx, db, table, name)
	if err != nil {
		return nil, time.Time{}, err
	}
	now, err := dbNow(qctx, db)
	return ms, now, err
}

// oneElection checks that cmd's arguments are one valid election name.
func oneElection(cmd *command, args []string) error {
	if len(args) != 1 {
		return failf(exitUsage, "want exactly one election (see 'sqlelect %s --help')", cmd.name)
	}
	return ident.Name(args[0])
}

// dbNow reads the database clock.
func dbNow(ctx context.Context, db *sql.DB) (time.Time, error) {
	var now int64
	if err := db.QueryRowContext(ctx, `SELECT `+dbclock.TermNow).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("reading the database clock: %w", err)
	}
	return time.UnixMicro(now), nil
}

// printMembers prints members as a table; now is the database clock.
func printMembers(w io.Writer, ms []members.Member, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tVERSION\tHOST\tPRIORITY\tHEALTHY\tSTARTED\tLAST-SEEN")
	for _, m := range ms {
		state, seen := "gone", fmtTime(m.LastSeen)
		if m.Live {
			state, seen = "live", now.Sub(m.LastSeen).Round(time.Second).String()+" ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", printable(m.ID), state, printable(m.Version), printable(m.Host),
			m.Priority, map[bool]string{true: "yes", false: "no"}[m.Healthy], fmtTime(m.Started), seen)
	}
	return tw.Flush()
}

// liveMembers counts the live members of election name for status: the
// count (nil when unknown) and the text of status's members line, which
// says why it is unknown.
func liveMembers(ctx context.Context, db *sql.DB, table, name string) (*int, string) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	ms, err := members.List(qctx, db, table, name)
	switch {
	case errors.Is(err, election.ErrTableMissing):
		return nil, fmt.Sprintf("unknown: no members table (migration %d: run `sqlelect migrate up`)", membersMigration)
	case err != nil:
		return nil, "unknown: " + err.Error()
	}
	n := 0
	for _, m := range ms {
		if m.Live {
			n++
		}
	}
	return &n, fmt.Sprintf("%d live", n)
}
