package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/sqlelect/sqlelect/election"
)

// queryTimeout bounds the statements of status, watch, assume and reelect.
const queryTimeout = 10 * time.Second

var statusCmd = &command{
	name:    "status",
	args:    "[ELECTION] [--json]",
	summary: "show who leads an election, or every election in the table",
	detail: `Columns: the holder (LEADER) and its fencing TERM, when the term began (SINCE)
and the holder last renewed (LAST-RENEWAL), in UTC; the lease left by the
database clock (negative: expired that long ago); STATE live, expired or
released; the VALUE the holder published; the BACKEND (table or lock).

--json prints an array of objects: election, id, term, since, last_renewal,
lease and lease_left (Go durations in nanoseconds), released, acquired
(how the term began), value, backend, connection_id, live and state.

Exit code 6 when ELECTION has no row.`,
	example: `sqlelect status
sqlelect status web-primary --json`,
	run: (*cli).status,
}

// state names a record's state: live, expired or released.
func state(r election.Record) string {
	switch {
	case r.Live():
		return "live"
	case r.Released:
		return "released"
	}
	return "expired"
}

// jsonRecord is a Record as status --json prints it.
type jsonRecord struct {
	election.Record
	Live  bool   `json:"live"`
	State string `json:"state"`
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeFormat)
}

// printable quotes s when it is empty, or has spaces or control characters.
func printable(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 || s == "-" {
		return strconv.Quote(s)
	}
	return s
}

// lookupElection reads one election's record; an election with no row is
// exit code 6.
func lookupElection(ctx context.Context, db *sql.DB, table, name string) (election.Record, error) {
	if err := election.ValidateName(name); err != nil {
		return election.Record{}, err
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rec, err := election.Status(qctx, db, table, name)
	switch {
	case err == nil:
		return rec, nil
	case errors.Is(err, election.ErrNoLeader) && rec.Term == 0:
		// Status says "no row" with a zero record: every row has a term.
		return rec, failf(exitUnknown, "unknown election %q: no row in %s", name, table)
	case errors.Is(err, election.ErrNoLeader):
		return rec, nil // a row, but no live lease
	}
	return rec, err
}

func (c *cli) status(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		return failf(exitUsage, "too many arguments %q: want at most one election", args)
	}
	if len(args) == 1 {
		if err := election.ValidateName(args[0]); err != nil {
			return err
		}
	}
	ctx := context.Background()
	db, err := co.connect(ctx, nil)
	if err != nil {
		return err
	}
	defer db.Close()

	var recs []election.Record
	if len(args) == 1 {
		rec, err := lookupElection(ctx, db, co.table, args[0])
		if err != nil {
			return err
		}
		recs = []election.Record{rec}
	} else {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		recs, err = election.List(qctx, db, co.table)
		cancel()
		if err != nil {
			return err
		}
	}

	if *asJSON {
		out := make([]jsonRecord, len(recs))
		for i, r := range recs {
			out[i] = jsonRecord{Record: r, Live: r.Live(), State: state(r)}
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(recs) == 0 {
		fmt.Fprintf(c.stderr, "no elections in %s\n", co.table)
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ELECTION\tLEADER\tTERM\tSINCE\tLAST-RENEWAL\tLEASE-LEFT\tSTATE\tVALUE\tBACKEND")
	for _, r := range recs {
		left := "-"
		if !r.Released {
			left = r.LeaseLeft.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Election, printable(r.ID), r.Term, fmtTime(r.Since), fmtTime(r.LastRenewal),
			left, state(r), printable(r.Value), r.Backend)
	}
	return tw.Flush()
}

var watchCmd = &command{
	name:    "watch",
	args:    "ELECTION [--interval 500ms]",
	summary: "print a line each time the leader or the term of an election changes",
	detail: `Polls the election every --interval and prints one line per change, the
first at once:

  TIME leader=ID term=TERM state=STATE

TIME is when the change was seen (RFC 3339, UTC). leader is (none) when
nobody holds a live lease; STATE is live, expired, released, or deleted
(the row is gone, e.g. after reelect). Runs until SIGINT or SIGTERM (exit
0). Database errors while watching are reported on stderr and retried.
Exit code 6 when ELECTION has no row at the start.`,
	example: `sqlelect watch web-primary --interval 1s`,
	run:     (*cli).watch,
}

func (c *cli) watch(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	var interval time.Duration
	durationFlag(fs, &interval, "interval", 500*time.Millisecond, "`interval` between two looks")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return failf(exitUsage, "want exactly one election (see 'sqlelect watch --help')")
	}
	name := args[0]
	if err := election.ValidateName(name); err != nil {
		return err
	}
	if interval <= 0 {
		return failf(exitUsage, "--interval %v: must be positive", interval)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, err := co.connect(ctx, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := lookupElection(ctx, db, co.table, name); err != nil {
		return err
	}

	type seen struct {
		leader string
		term   uint64
		state  string
	}
	var last *seen
	var lastErr string
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		rec, err := election.Status(qctx, db, co.table, name)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now().UTC()
		switch {
		case err != nil && !errors.Is(err, election.ErrNoLeader):
			if code, _ := describe(err); code == exitAccess || code == exitTable {
				return err
			}
			if msg := err.Error(); msg != lastErr {
				fmt.Fprintf(c.stderr, "%s error (retrying): %v\n", now.Format(time.RFC3339Nano), err)
				lastErr = msg
			}
		default:
			lastErr = ""
			s := seen{leader: "(none)", term: rec.Term, state: state(rec)}
			if rec.Live() {
				s.leader = rec.ID
			}
			if rec.Term == 0 {
				s.state = "deleted"
			}
			if last == nil || s.leader != last.leader || s.term != last.term {
				leader := s.leader
				if leader != "(none)" {
					leader = printable(leader)
				}
				fmt.Fprintf(c.stdout, "%s leader=%s term=%d state=%s\n", now.Format(time.RFC3339Nano), leader, s.term, s.state)
				last = &s
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
