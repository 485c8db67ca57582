package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/operator"
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
released; the VALUE the holder published; the BACKEND (table or lock); the
holder's PRIORITY (its --priority; 0, no preference, in a row written with
plain SQL until its holder renews it). For one ELECTION, a last line counts
its live members (members: 2 live; see 'sqlelect members'), or says why it
cannot (members: unknown: no members table, before migration 9). When
ELECTION is a shard group (sqlelect shards), a line more shows its balance:
its shards (elections ELECTION/… with a row), how many no live member
leads, what each leader leads, and whether each live, healthy member leads
its share and nobody else any:

  shards: 6, 0 unled, over 3 members: p1 2, p2 2, p3 2 (balanced)

--json prints an array of objects: election, id, term, since, last_renewal
(RFC 3339), lease_ms and lease_left_ms (milliseconds), released, acquired
(how the term began), value, backend, connection_id, transfer and
transfer_to (a planned change pending), priority, live and state, and for
one ELECTION members_live (left out when unknown) and, for a shard group,
shards: {shards, unled, members, led (by leader), balanced}.

Exit code 6 when ELECTION has no row.`,
	example: `sqlelect status
sqlelect status web-primary --json`,
	json: true,
	run:  (*cli).status,
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

// jsonRecord is a Record as status --json prints it: the Record's own JSON
// (durations in milliseconds, with the unit in the name) followed by live,
// state and, when known, members_live.
type jsonRecord struct {
	rec         election.Record
	membersLive *int         // the election's live members; nil: unknown
	shards      *groupStatus // the balance of group rec.Election; nil: no shards
}

// MarshalJSON appends "live", "state" and "members_live" to the Record's
// JSON object.
func (j jsonRecord) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(j.rec)
	if err != nil {
		return nil, err
	}
	extra, err := json.Marshal(struct {
		Live        bool         `json:"live"`
		State       string       `json:"state"`
		MembersLive *int         `json:"members_live,omitempty"`
		Shards      *groupStatus `json:"shards,omitempty"`
	}{j.rec.Live(), state(j.rec), j.membersLive, j.shards})
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
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

// lookupElection reads one election's record, live or not; an election
// with no row is an error wrapping election.ErrNoSuchElection (exit 6).
func lookupElection(ctx context.Context, db *sql.DB, table, name string) (election.Record, error) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	op, err := operator.New(db, table)
	if err != nil {
		return election.Record{}, err
	}
	rec, err := op.Status(qctx, name)
	if errors.Is(err, election.ErrNoLiveLease) {
		return rec, nil
	}
	return rec, err
}

// open connects and, when name is not empty, reads that election's record
// (see lookupElection).
func (co *common) open(ctx context.Context, name string) (*sql.DB, election.Record, error) {
	if name != "" {
		if err := ident.Name(name); err != nil {
			return nil, election.Record{}, err
		}
	}
	db, err := co.connect(ctx, nil)
	if err != nil || name == "" {
		return db, election.Record{}, err
	}
	rec, err := lookupElection(ctx, db, co.table, name)
	if err != nil {
		db.Close()
		return nil, rec, err
	}
	return db, rec, nil
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
	ctx := context.Background()
	var name string
	if len(args) == 1 {
		// An empty name is a mistake (an unset shell variable), not "all".
		if err := ident.Name(args[0]); err != nil {
			return err
		}
		name = args[0]
	}
	db, rec, err := co.open(ctx, name)
	if err != nil {
		return err
	}
	defer db.Close()
	recs := []election.Record{rec}
	if name == "" {
		if recs, err = listRecords(ctx, db, co.table); err != nil {
			return err
		}
	}
	c.noteCannotCampaign(ctx, db, co.table)
	var live *int
	var line string        // status's members line
	var group *groupStatus // the shards of group name, if any
	if name != "" {
		live, line = liveMembers(ctx, db, co.table, name)
		group = groupBalance(ctx, db, co.table, name)
	}
	if *asJSON {
		if line != "" && live == nil {
			fmt.Fprintf(c.stderr, "note: members %s\n", line)
		}
		out := make([]jsonRecord, len(recs))
		for i, r := range recs {
			out[i] = jsonRecord{rec: r, membersLive: live, shards: group}
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if err := c.printRecords(recs, co.table); err != nil || line == "" {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "members: %s\n%s", line, group)
	return err
}

// listRecords reads the records of every election in table.
func listRecords(ctx context.Context, db *sql.DB, table string) ([]election.Record, error) {
	op, err := operator.New(db, table)
	if err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return op.List(qctx)
}

// noteCannotCampaign warns when the user of db could never take over: the
// operator often runs status with the candidates' credentials (Run refuses
// them at start).
func (c *cli) noteCannotCampaign(ctx context.Context, db *sql.DB, table string) {
	pctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	if err := doctor.CheckPrivileges(pctx, db, table); errors.Is(err, election.ErrAccessDenied) {
		fmt.Fprintf(c.stderr, "note: this user cannot campaign (run and campaign refuse it): %v\n", err)
	}
}

// printRecords prints records as status's table.
func (c *cli) printRecords(recs []election.Record, table string) error {
	if len(recs) == 0 {
		fmt.Fprintf(c.stderr, "no elections in %s\n", table)
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ELECTION\tLEADER\tTERM\tSINCE\tLAST-RENEWAL\tLEASE-LEFT\tSTATE\tVALUE\tBACKEND\tPRIORITY")
	for _, r := range recs {
		left := "-"
		if !r.Released {
			left = r.LeaseLeft.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n",
			r.Election, printable(r.ID), r.Term, fmtTime(r.Since), fmtTime(r.LastRenewal),
			left, state(r), printable(r.Value), r.Backend, r.Priority)
	}
	return tw.Flush()
}

var watchCmd = &command{
	name:    "watch",
	args:    "ELECTION [--interval 500ms] [--json]",
	summary: "print a line each time the leader, the term or the leader's value changes",
	detail: `Polls the election every --interval and prints one line per change of
leader, term, or value the leader publishes (its --value, or a Proclaim),
the first at once:

  TIME leader=ID term=TERM state=STATE priority=P value=VALUE

TIME is when the change was seen (RFC 3339, UTC). leader is (none) when
nobody holds a live lease; STATE is live, expired, released, or deleted
(the row is gone, e.g. after reelect); P is the holder's --priority (- when
nobody leads); VALUE is - when empty or when nobody leads (quoted when it
has spaces). --json
prints each change as a JSON line instead, the leader event of campaign
without id, with the state:

  {"event":"leader","election":E,"term":T,"time":TIME,"leader":ID,"value":V,"state":STATE,"priority":P}

(leader "" and priority left out when nobody leads; value left out when
empty). Runs until SIGINT
or SIGTERM (exit 0; 130, or 143 for SIGTERM, when the signal came before
the first line). Database errors while watching are reported on stderr and
retried (with --json also as a line {"event":"error","election":E,"term":0,
"time":TIME,"err":MESSAGE} on stdout). --interval is at least 10ms. Exit code 6 when ELECTION has no row
at the start.`,
	example: `sqlelect watch web-primary --interval 1s
sqlelect watch web-primary --json`,
	json: true,
	run:  (*cli).watch,
}

// minWatchInterval is the shortest --interval of watch.
const minWatchInterval = 10 * time.Millisecond

func (c *cli) watch(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	interval := fs.Duration("interval", 500*time.Millisecond, "time between two looks, at least 10ms")
	asJSON := fs.Bool("json", false, "print JSON lines instead of text")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if err := oneElection(cmd, args); err != nil {
		return err
	}
	if *interval < minWatchInterval {
		return failf(exitUsage, "--interval %v: must be at least %v", *interval, minWatchInterval)
	}
	ctx, stop := signalContext(context.Background())
	defer stop()
	db, _, err := co.open(ctx, args[0])
	if ctx.Err() != nil {
		return interruptStatus(ctx)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	w := watcher{out: c.stdout, errs: c.stderr, name: args[0]}
	if *asJSON {
		w.enc = json.NewEncoder(c.stdout)
	}
	op, err := operator.New(db, co.table)
	if err != nil {
		return err
	}
	// Operator.Observe times the looks by the database clock (a look when
	// the lease runs out) and wakes at a table-backend holder's handover.
	err = op.Observe(ctx, args[0], operator.ObserveOptions{
		Interval: *interval, JitterFactor: -1, QueryTimeout: queryTimeout}, w.see)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// watcher prints what watch sees: a line per change of leader, term or
// value, and database errors once each.
type watcher struct {
	out, errs io.Writer
	name      string        // the election
	enc       *json.Encoder // JSON lines on out; nil for text
	last      *seen
	lastErr   string
}

// seen is one look at the election as watch reports it: leader and value
// are empty when nobody holds a live lease.
type seen struct {
	leader   string
	term     uint64
	state    string
	value    string
	priority int
}

// see reports one look at the election; it returns the errors that end
// watch (the table or the privileges are gone, stdout cannot be written).
func (w *watcher) see(rec election.Record, err error) error {
	now := time.Now().UTC()
	switch {
	case err != nil && !errors.Is(err, election.ErrNoLeader):
		if code, _ := describe(err); code == exitAccess || code == exitTable {
			return err
		}
		if msg := err.Error(); msg != w.lastErr {
			fmt.Fprintf(w.errs, "%s error (retrying): %v\n", now.Format(time.RFC3339Nano), err)
			w.lastErr = msg
			if w.enc != nil {
				return w.enc.Encode(event{Event: "error", Election: w.name, Time: now.Format(time.RFC3339Nano), Err: msg})
			}
		}
		return nil
	}
	w.lastErr = ""
	s := seen{term: rec.Term, state: state(rec)}
	if rec.Live() {
		s.leader, s.value, s.priority = rec.ID, rec.Value, rec.Priority
	}
	if errors.Is(err, election.ErrNoSuchElection) {
		s.state = "deleted"
	}
	if w.last != nil && s.leader == w.last.leader && s.term == w.last.term && s.value == w.last.value &&
		s.priority == w.last.priority {
		return nil
	}
	w.last = &s
	at := now.Format(time.RFC3339Nano)
	if w.enc != nil {
		ev := event{Event: "leader", Election: w.name, Term: s.term, Time: at,
			Leader: &s.leader, Value: s.value, State: s.state}
		if rec.Live() {
			ev.Priority = &s.priority // left out when nobody leads, as in campaign's
		}
		return w.enc.Encode(ev)
	}
	leader, priority := "(none)", "-"
	if rec.Live() {
		leader, priority = printable(s.leader), strconv.Itoa(s.priority)
	}
	_, err = fmt.Fprintf(w.out, "%s leader=%s term=%d state=%s priority=%s value=%s\n", at, leader, s.term, s.state, priority, printable(s.value))
	return err
}
