package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionprom"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/members"
)

const campaignDetail = `Joins ELECTION as a candidate and prints one JSON object per line to stdout,
each with event, election, id, term and time (RFC 3339 UTC, nanoseconds, when
the line was produced):

  {"event":"elected",...}     this candidate starts to lead; term is its
                              fencing term
  {"event":"demoted",...,"until":T,"reason":R}
                              it stopped leading; until is the last instant
                              it could have believed it led (its lease
                              deadline or the instant it resigned), earlier
                              than time when the process was frozen; reason
                              is resigned, lease_lost, deposed, transferred
                              (it handed over: sqlelect transfer, reelect
                              --graceful), unhealthy (--health-cmd failed)
                              or error
  {"event":"leader",...,"leader":ID,"value":V,"priority":P}
                              it saw a new holder, term or published value
                              (leader "" when nobody holds a live lease;
                              value left out when empty; priority is the
                              holder's --priority, left out with no leader)
  {"event":"unhealthy",...,"err":E}
                              --health-cmd started failing (E says how,
                              with the first line of its stderr); term is
                              the term it leads, 0 when following. A leader
                              then stands down (demoted, reason unhealthy)
                              and releases the row, so a follower leads at
                              once; it does not campaign while the check
                              fails
  {"event":"healthy",...}     --health-cmd passes again: it campaigns again

--health-cmd runs with sh -c (stdin /dev/null, stdout discarded,
SQLELECT_ELECTION and SQLELECT_ID set) beside the campaign, every
--health-interval (default --renew), the same for a leader and a follower;
the campaign never waits for it and acts on its latest result (it does not
campaign before the first run passed). It fails when it exits non-zero or
does not exit within --health-timeout (default half of --renew-deadline);
its process group is then killed. After a failure (and after the start) a
candidate does not ask for leadership by --priority for --health-hold-down
(default the longer of --preference-tenure and 3 --health-interval), so a
flapping check does not draw leadership to it; it still takes a free row.

--http-addr serves, while the command runs, for load balancers and programs
that follow leadership without the library: GET /leader answers 200 "leader"
while this candidate leads and 404 "not leader" otherwise (no database
query); /status this candidate's view (is_leader, term, wedged, and healthy
with --health-cmd) and the current leader as JSON (one query; 503 when the
database does not answer); /healthz 200 while the elector works, 503 when
it is not running or wedged (see electionhttp.HealthzHandler). With
--metrics-addr the same address, /metrics is served there too. A port in
use is an error before campaigning starts; the server stops (requests in
flight get up to 2s) when the command exits.

Before it campaigns, it registers as a member of the election (see
'sqlelect members'), with --app-version, and removes itself when it exits.
When another live process runs with its --id, it exits 10 without
campaigning. With --follow-version newest (or oldest), the leader hands
over to a live, healthy member of a newer (older) --app-version once that
one has run for a lease.

On SIGTERM or SIGINT it resigns (the row is marked released, so another
candidate takes over at once), prints its demoted line if it led, and exits 0
(130, or 143 for SIGTERM, when the signal came while it was still connecting).
When a line cannot be written (the reader of stdout is gone), it resigns
and exits 1. Logs go to stderr.

Timing: --lease is recorded in the row; others may take over once it has run
out by the database clock after the last renewal. The leader stands down
--renew-deadline after its last successful renewal by its own clock, so
renew-deadline < lease. A candidate that creates the row (or claims a row
an operator gave it) waits --lock-delay before it leads. --lease is at least
100ms. Durations left out are derived from those given, like the defaults:
renew-deadline 2/3 of the lease (the lease 3/2 of renew-deadline when only
that is given), renew 1/5 of renew-deadline, retry 2/15 of the lease,
lock-delay the lease.

Preference: --priority N (0 to 1000; default 0, no preference) is written
into the row while this candidate holds it. A follower whose --priority is
strictly higher than the leader's asks it to hand over (as sqlelect transfer
does: the leader's demoted line says transferred, the follower leads at once)
once the leader has led for --preference-tenure (default --lease) by the
database clock. Equal priorities never ask, so leadership does not move
between them; a restarted preferred candidate gets leadership back once.`

var campaignCmd = &command{
	name:    "campaign",
	args:    "ELECTION [flags]",
	summary: "join an election as a candidate; print leadership events as JSON lines",
	detail:  campaignDetail,
	example: `sqlelect campaign web-primary --id web-1 --value 10.0.0.1:8080 --lease 15s
# {"event":"leader","election":"web-primary","id":"web-1","term":1763790000123456,"time":"...","leader":"web-1","value":"10.0.0.1:8080","priority":0}
# {"event":"elected","election":"web-primary","id":"web-1","term":1763790000123456,"time":"..."}
sqlelect campaign web-primary --id web-1 --http-addr 127.0.0.1:8081 --health-cmd 'curl -fsS http://127.0.0.1:8080/ready' > events.jsonl &
curl -s -o /dev/null -w '%{http_code}\n' http://127.0.0.1:8081/leader   # 200 on the leader, 404 elsewhere
# prefer web-1 (say, the bigger machine): it takes leadership back from web-2 once web-2 has led for 30s
sqlelect campaign web-primary --id web-1 --priority 10 --preference-tenure 30s
sqlelect campaign web-primary --id web-2 --priority 5`,
	run: (*cli).campaign,
}

// campaignFlags are the flags of campaign and run.
type campaignFlags struct {
	common
	id, backend, value, metricsAddr, logLevel     string
	logFormat, appVersion, followVersion          string
	httpAddr, healthCmd                           string
	lease, renewDeadline, renew, retry, lockDelay time.Duration
	priority                                      int
	preferenceTenure                              time.Duration
	healthInterval, healthTimeout, healthHoldDown time.Duration
	// set reports whether a flag was given (pflag's Changed), for flags
	// whose empty or zero value would otherwise quietly mean the default.
	set func(name string) bool
}

func (f *campaignFlags) register(fs *pflag.FlagSet) {
	f.common.register(fs)
	fs.StringVar(&f.id, "id", "", "this candidate's `ID`, unique among the candidates (default HOST:PID:RANDOM)")
	fs.StringVar(&f.backend, "backend", "table", "`backend`: table (a heartbeat row) or lock (GET_LOCK)")
	fs.DurationVar(&f.lease, "lease", 0, "lease recorded with each renewal, at least 100ms (default 15s, or 3/2 of --renew-deadline)")
	fs.DurationVar(&f.renewDeadline, "renew-deadline", 0, "stand down this long after the last successful renewal; less than --lease (default 2/3 of --lease)")
	fs.DurationVar(&f.renew, "renew-interval", 0, "time between the leader's renewals; less than --renew-deadline (default 1/5 of --renew-deadline)")
	fs.DurationVar(&f.retry, "retry-interval", 0, "time between a follower's looks (default 2/15 of --lease)")
	// The names before they matched Config's fields, kept as aliases.
	fs.DurationVar(&f.renew, "renew", 0, "alias of --renew-interval")
	fs.DurationVar(&f.retry, "retry", 0, "alias of --retry-interval")
	_ = fs.MarkHidden("renew")
	_ = fs.MarkHidden("retry")
	fs.DurationVar(&f.lockDelay, "lock-delay", 0, "wait before leading a row this candidate created or was given; at least --renew-deadline (default --lease)")
	fs.StringVar(&f.value, "value", "", "`value` published in the row while leading, e.g. an address")
	fs.IntVar(&f.priority, "priority", 0, "leadership preference `N`, 0 to 1000: a follower of higher priority asks the leader to hand over to it, "+
		"e.g. --priority 10 (default 0: no preference, never asks)")
	fs.DurationVar(&f.preferenceTenure, "preference-tenure", 0, "how long a leader leads, by the database clock, before a follower of higher --priority may ask for leadership (default --lease)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on http://`ADDR`/metrics, e.g. :9090")
	fs.StringVar(&f.httpAddr, "http-addr", "", "serve /leader (200 while leading, else 404), /status (JSON) and /healthz on http://`ADDR`, "+
		"e.g. 127.0.0.1:8080 (and /metrics when --metrics-addr is the same)")
	fs.StringVar(&f.healthCmd, "health-cmd", "", "shell `CMD` run with sh -c every --health-interval, beside the campaign; "+
		"while it fails (non-zero exit, or no exit within --health-timeout) this candidate hands leadership over and does not campaign, "+
		"e.g. 'curl -fsS http://127.0.0.1:8080/ready'")
	fs.DurationVar(&f.healthInterval, "health-interval", 0, "time between the starts of two runs of --health-cmd (default --renew-interval)")
	fs.DurationVar(&f.healthTimeout, "health-timeout", 0, "a run of --health-cmd that has not exited by then fails and is killed (default 1/2 of --renew-deadline)")
	fs.DurationVar(&f.healthHoldDown, "health-hold-down", 0, "after a failed --health-cmd (or the start), this long before asking for leadership by --priority "+
		"(default the longer of --preference-tenure and 3 --health-interval)")
	fs.StringVar(&f.appVersion, "app-version", "", "`version` this candidate registers as a member (see 'sqlelect members'), "+
		"e.g. 1.4.2 (default this binary's, as 'sqlelect version' prints it)")
	fs.StringVar(&f.followVersion, "follow-version", "none", "leadership follows the members' --app-version: `none`, newest (an upgraded "+
		"member takes over once it has run a lease) or oldest (pinned to the old version until it is gone)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log `level` on stderr: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log line `format`: text (key=value) or json (one object a line); durations as strings such as 1.5s")
	f.set = func(name string) bool { return fs.Changed(name) }
}

// checkGiven refuses flags given with an empty or zero value, which would
// otherwise mean the default: --lease 0 is a mistake, not a request for 15s.
func (f *campaignFlags) checkGiven() error {
	if f.set == nil {
		return nil // not parsed from flags
	}
	for _, d := range []struct {
		name string
		zero bool
	}{
		{"id", f.id == ""}, {"health-cmd", f.healthCmd == ""}, {"app-version", f.appVersion == ""},
		{"lease", f.lease == 0}, {"renew-deadline", f.renewDeadline == 0}, {"lock-delay", f.lockDelay == 0},
		{"renew-interval", f.renew == 0}, {"renew", f.renew == 0},
		{"retry-interval", f.retry == 0}, {"retry", f.retry == 0},
		{"preference-tenure", f.preferenceTenure == 0},
		{"health-interval", f.healthInterval == 0}, {"health-timeout", f.healthTimeout == 0},
		{"health-hold-down", f.healthHoldDown == 0},
	} {
		if d.zero && f.set(d.name) {
			return failf(exitUsage, "--%s is empty or zero: give a value, or leave the flag out for the default", d.name)
		}
	}
	return nil
}

// followVersions are --follow-version's values ("" is the default, none).
var followVersions = map[string]members.Follow{"": members.FollowNone, "none": members.FollowNone, "newest": members.FollowNewest, "oldest": members.FollowOldest}

// config checks the flags and builds the election config (without
// callbacks), with the library's defaults applied: the durations are passed
// as given, zero meaning the default.
func (f *campaignFlags) config(name string, logTo io.Writer) (election.Config, *slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return election.Config{}, nil, failf(exitUsage, "--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	if err := f.checkGiven(); err != nil {
		return election.Config{}, nil, err
	}
	if f.backend != "table" && f.backend != "lock" {
		return election.Config{}, nil, failf(exitUsage, "--backend %q: want table or lock", f.backend)
	}
	if _, ok := followVersions[f.followVersion]; !ok {
		return election.Config{}, nil, failf(exitUsage, "--follow-version %q: want none, newest or oldest", f.followVersion)
	}
	if err := checkAddr("--metrics-addr", f.metricsAddr); err != nil {
		return election.Config{}, nil, err
	}
	if err := checkAddr("--http-addr", f.httpAddr); err != nil {
		return election.Config{}, nil, err
	}
	id := f.id
	if id == "" {
		id = election.DefaultID() // the events name it
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: readableDurations}
	var h slog.Handler
	switch f.logFormat {
	case "text", "":
		h = slog.NewTextHandler(logTo, opts)
	case "json":
		h = slog.NewJSONHandler(logTo, opts)
	default:
		return election.Config{}, nil, failf(exitUsage, "--log-format %q: want text or json", f.logFormat)
	}
	log := slog.New(h)
	cfg, err := election.Config{
		Name:          name,
		ID:            id,
		Table:         f.table,
		LeaseDuration: f.lease,
		Health:        election.HealthConfig{Interval: f.healthInterval, Timeout: f.healthTimeout, HoldDown: f.healthHoldDown},
		Preference:    election.PreferenceConfig{Priority: f.priority, Tenure: f.preferenceTenure},
		Tuning:        election.TuningConfig{RenewDeadline: f.renewDeadline, RenewInterval: f.renew, RetryInterval: f.retry, LockDelay: f.lockDelay, Logger: log},
		Value:         f.value,
	}.WithDefaults()
	return cfg, log, err
}

// readableDurations writes durations as strings (1.5s), not as the JSON
// handler's nanoseconds.
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// event is one JSON line of campaign and run, and of watch --json (which
// has no id, and says the state).
type event struct {
	Event    string  `json:"event"`
	Election string  `json:"election"`
	ID       string  `json:"id,omitempty"`
	Term     uint64  `json:"term"`
	Time     string  `json:"time"`
	Until    string  `json:"until,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Leader   *string `json:"leader,omitempty"`
	Value    string  `json:"value,omitempty"`
	State    string  `json:"state,omitempty"`
	Priority *int    `json:"priority,omitempty"`
	Err      string  `json:"err,omitempty"`
}

// events writes event lines, one at a time.
type events struct {
	mu       sync.Mutex
	enc      *json.Encoder
	name, id string
	onFail   func() // called once when a line cannot be written
	failed   error
}

func newEvents(w io.Writer, name, id string) *events {
	return &events{enc: json.NewEncoder(w), name: name, id: id}
}

func (e *events) write(ev event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev.Election, ev.ID = cmp.Or(ev.Election, e.name), e.id
	ev.Time = time.Now().UTC().Format(time.RFC3339Nano)
	if err := e.enc.Encode(ev); err != nil && e.failed == nil {
		e.failed = err
		if e.onFail != nil {
			e.onFail()
		}
	}
}

// setOnFail sets what is called once when a line cannot be written.
func (e *events) setOnFail(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onFail = f
}

// err returns the first write error.
func (e *events) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

// callbacks returns the callbacks that write the events; onElected, if not
// nil, runs after the elected line, in OnElected.
func (e *events) callbacks(onElected func(ctx context.Context, term uint64)) election.Callbacks {
	return election.Callbacks{
		OnElected: func(ctx context.Context, l election.Leadership) {
			term := l.Term
			e.write(event{Event: "elected", Term: term})
			if onElected != nil {
				onElected(ctx, term)
			}
		},
		OnDemoted: func(d election.Demotion) {
			e.write(event{Event: "demoted", Term: d.Term, Until: d.Until.UTC().Format(time.RFC3339Nano), Reason: string(d.Reason)})
		},
		OnLeaderChanged: func(r election.Record) {
			leader, ev := r.ID, event{Event: "leader", Term: r.Term, Value: r.Value}
			ev.Leader = &leader
			if leader != "" {
				ev.Priority = &r.Priority
			}
			e.write(ev)
		},
	}
}

// newElection connects, runs preflight, listens on --metrics-addr and
// --http-addr, builds the candidate of the chosen backend (with metrics
// when asked) and serves its HTTP endpoints. stop releases what it set up,
// the servers first.
func (c *cli) newElection(ctx context.Context, f *campaignFlags, cfg election.Config, log *slog.Logger) (e *election.Candidate, _ *sql.DB, stop func(), err error) {
	var cleanups []func()
	stop = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	db, err := f.connect(ctx, log)
	if err != nil {
		return nil, nil, stop, err
	}
	cleanups = append(cleanups, func() { db.Close() })
	if err = preflight(ctx, db, cfg.Table, f.backend, cfg.Tuning.QueryTimeout); err != nil {
		return nil, nil, stop, campaignError(err, f.backend)
	}

	var srv *sidecar
	srv, err = listenSidecar(f.metricsAddr, f.httpAddr)
	if err != nil {
		return nil, nil, stop, err
	}
	cleanups = append(cleanups, srv.close)
	cfg.Metrics = srv.metricsFor()
	if srv.reg != nil { // sqlelect_members_live, read at each scrape
		srv.reg.MustRegister(electionprom.NewMembers(db, cfg.Table, cfg.Tuning.QueryTimeout, cfg.Name))
	}

	switch f.backend {
	case "lock":
		e, err = election.NewLock(db, cfg)
	default:
		e, err = election.NewTable(db, cfg)
	}
	if err != nil {
		if code, _ := describe(err); code == exitError {
			return nil, nil, stop, wrapf(exitError, err, "--backend %s", f.backend)
		}
		return nil, nil, stop, err
	}
	srv.serve(e, log)
	return e, db, stop, nil
}

// preflight runs the candidate's preflight (probe.Preflight, as Run does,
// with the SELECT privilege's probe for its peek) before members.Run
// registers the candidate, which that does before Run's own preflight: a
// refusal is then the election's, with what to do (migrate or adopt the
// table, grant a privilege, fix a session setting), not the members
// table's. What retrying can fix is left to Run, which retries it.
func preflight(ctx context.Context, db *sql.DB, table, backend string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := probe.Preflight(ctx, db, table, backend, probe.Privileges(ident.Quote(table))[0].Query)
	if !probe.Permanent(err) {
		return nil
	}
	// As Run says (election's migrateHint) for a table migrate does not manage.
	if t := table[strings.LastIndex(table, ".")+1:]; t != election.DefaultTable &&
		(errors.Is(err, election.ErrTableMissing) || errors.Is(err, election.ErrSchemaMismatch)) {
		return fmt.Errorf("%w (`sqlelect migrate` manages %s only: for %s, apply schema.DDL(%q) with your own migrations)",
			err, election.DefaultTable, table, t)
	}
	return err
}

// parseCandidate defines the campaign flags on fs (which may have more of
// the command's own), parses args and returns the flags, the positional
// arguments before "--" and those after it (nil without "--").
func (c *cli) parseCandidate(cmd *command, fs *pflag.FlagSet, args []string) (f *campaignFlags, before, after []string, err error) {
	f = new(campaignFlags)
	f.register(fs)
	pos, err := c.parse(cmd, fs, args)
	if err != nil {
		return nil, nil, nil, err
	}
	if n := fs.ArgsLenAtDash(); n >= 0 {
		return f, pos[:n], pos[n:], nil
	}
	return f, pos, nil, nil
}

// joined is a candidate connected and ready to Run.
type joined struct {
	ctx    context.Context // ended by SIGINT or SIGTERM
	e      *election.Candidate
	db     *sql.DB
	cfg    election.Config
	member members.Options
	ev     *events
	health *healthCmd // nil without --health-cmd
	stop   func()     // releases the election's resources and the signals
}

// run runs the election as a member (members.Run) until ctx ends.
func (j *joined) run(ctx context.Context) error {
	if j.health != nil {
		j.health.runCtx = ctx
	}
	err := members.Run(ctx, j.db, j.e, j.cfg, j.member)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil // stopped while registering: as Run when ctx ends
	}
	// The members table's errors are the driver's: name a missing privilege.
	return election.Classify(err)
}

// join connects and builds the election of cfg, whose callbacks write ev's
// lines (onElected, if not nil, runs after the elected line). A signal that
// comes before that is done ends the command with 128+N.
func (c *cli) join(f *campaignFlags, cfg election.Config, log *slog.Logger, ev *events,
	onElected func(context.Context, uint64)) (*joined, error) {
	cfg.Callbacks = ev.callbacks(onElected)
	var health *healthCmd
	if f.healthCmd != "" {
		health = &healthCmd{script: f.healthCmd, name: cfg.Name, id: cfg.ID, ev: ev}
		cfg.Health.Check = health.check
	}
	ctx, stopSignals := signalContext(context.Background())
	e, db, stopElection, err := c.newElection(ctx, f, cfg, log)
	if err != nil {
		interrupted := ctx.Err() != nil
		stopSignals()
		if interrupted {
			return nil, interruptStatus(ctx)
		}
		return nil, err
	}
	log.Info("campaigning", "election", cfg.Name, "id", cfg.ID, "backend", f.backend)
	if health != nil {
		health.e = e
	}
	return &joined{ctx: ctx, e: e, db: db, cfg: cfg, member: members.Options{Version: cmp.Or(f.appVersion, buildVersion()), Follow: followVersions[f.followVersion]},
		ev: ev, health: health, stop: func() { stopElection(); stopSignals() }}, nil
}

func (c *cli) campaign(cmd *command, args []string) error {
	f, names, after, err := c.parseCandidate(cmd, newFlagSet(cmd), args)
	if err != nil {
		return err
	}
	if len(names) != 1 || after != nil {
		return failf(exitUsage, "want exactly one election (see 'sqlelect campaign --help')")
	}
	cfg, log, err := f.config(names[0], c.stderr)
	if err != nil {
		return err
	}
	// When whoever reads the events is gone (stdout a broken pipe), nobody
	// acts on this candidate's leadership: resign and exit 1 rather than
	// die of SIGPIPE still holding the lease.
	signal.Ignore(syscall.SIGPIPE)
	ev := newEvents(c.stdout, cfg.Name, cfg.ID)
	j, err := c.join(f, cfg, log, ev, nil)
	if err != nil {
		return err
	}
	defer j.stop()
	ctx, cancel := context.WithCancel(j.ctx)
	defer cancel()
	ev.setOnFail(cancel)
	if err := j.run(ctx); err != nil {
		return campaignError(err, f.backend)
	}
	if err := ev.err(); err != nil {
		return wrapf(exitError, err, "cannot write events to stdout; resigned")
	}
	return nil
}

// campaignError names the backend in an error that stopped Run because the
// server does not support it.
func campaignError(err error, backend string) error {
	if errors.Is(err, election.ErrUnsupportedTopology) {
		return fmt.Errorf("--backend %s: %w", backend, err)
	}
	return err
}
